import { useState } from "preact/hooks";
import { signIn } from "../api";

/** providerError takes the reason of a refused sign-in with the identity
 * provider, which the gateway's callback puts in ?signin_error=, out of
 * the address, so that a reload does not show it again. */
function providerError(): string {
  const params = new URLSearchParams(location.search);
  const e = params.get("signin_error") ?? "";
  if (e) {
    params.delete("signin_error");
    const q = params.toString();
    history.replaceState(history.state, "", location.pathname + (q ? "?" + q : "") + location.hash);
  }
  return e;
}

/** SignIn trades a user's id and password (team mode), or the server's
 * token, for a session cookie; with an identity provider configured
 * (oidcName), it also offers the provider's sign-in, a navigation through
 * the gateway's /api/auth/oidc/start that comes back with the same
 * cookie. */
export function SignIn({ onSignedIn, team, oidcName }: { onSignedIn: () => void; team: boolean; oidcName?: string }) {
  const [withToken, setWithToken] = useState(!team);
  const [user, setUser] = useState("");
  const [secret, setSecret] = useState("");
  const [error, setError] = useState(providerError);
  return (
    <main class="signin">
      <form class="form" onSubmit={async (e) => {
        e.preventDefault();
        setError("");
        try {
          await signIn(withToken ? { token: secret } : { user_id: user.trim(), password: secret });
          onSignedIn();
        } catch (err) {
          setError((err as Error).message);
        }
      }}>
        <h1>Penguin</h1>
        {oidcName && <a class="button primary" href="/api/auth/oidc/start">Sign in with {oidcName}</a>}
        {withToken
          ? <p>Sign in with the server's token (<code>PENGUIN_AUTH_TOKEN</code>). It is exchanged for a cookie that this browser keeps for a week.</p>
          : <label>User <input autofocus required autocomplete="username" value={user} onInput={(e) => setUser(e.currentTarget.value)} name="user" /></label>}
        <label>{withToken ? "Token" : "Password"} <input type="password" required autocomplete="current-password" value={secret} onInput={(e) => setSecret(e.currentTarget.value)} name={withToken ? "token" : "password"} /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        <button class="primary" type="submit">Sign in</button>
        <button type="button" class="link" onClick={() => { setWithToken(!withToken); setError(""); }}>
          {withToken ? "Use a user id and password instead" : "Use the server's token instead"}
        </button>
      </form>
    </main>
  );
}
