import { useState } from "preact/hooks";
import { signIn } from "../api";

/** SignIn trades the server's token for a session cookie. */
export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  return (
    <main class="signin">
      <form class="form" onSubmit={async (e) => {
        e.preventDefault();
        setError("");
        try {
          await signIn(token);
          onSignedIn();
        } catch (err) {
          setError((err as Error).message);
        }
      }}>
        <h1>Penguin</h1>
        <p>This server needs its token (<code>PENGUIN_AUTH_TOKEN</code>). It is exchanged for a cookie that this browser keeps for a week.</p>
        <label>Token <input type="password" autofocus required autocomplete="current-password" value={token} onInput={(e) => setToken(e.currentTarget.value)} name="token" /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        <button class="primary" type="submit">Sign in</button>
      </form>
    </main>
  );
}
