import { useEffect, useState } from "preact/hooks";
import { api, type AuditRecord, type AuthState, type Member, type Project, type Token, type User } from "../api";

/** useLoad runs load now and whenever reload is called, keeping its
 * answer and its error. */
function useLoad<T>(load: () => Promise<T>): [T | undefined, string, () => void] {
  const [value, setValue] = useState<T>();
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);
  useEffect(() => { load().then((v) => { setValue(v); setError(""); }).catch((e) => setError(e.message)); }, [tick]);
  return [value, error, () => setTick((t) => t + 1)];
}

/** act runs a change and reports its error in the section's banner. */
function useAct(): [string, (f: () => Promise<unknown>, then?: () => void) => Promise<void>] {
  const [error, setError] = useState("");
  return [error, async (f, then) => {
    setError("");
    try {
      await f();
      then?.();
    } catch (e) {
      setError((e as Error).message);
    }
  }];
}

const roleWord = (r?: string) => (r ?? "").replace("PROJECT_ROLE_", "").toLowerCase();

/** Account: the signed-in user's password and personal access tokens.
 * onAuthChanged reloads the sign-in state after a change of password,
 * which ends the "set for you" warning. */
function Account({ auth, onAuthChanged }: { auth: AuthState; onAuthChanged: () => void }) {
  const [old, setOld] = useState("");
  const [next, setNext] = useState("");
  const [done, setDone] = useState("");
  const [tokens, loadError, reload] = useLoad(() => api.tokens());
  const [name, setName] = useState("");
  const [scope, setScope] = useState("TOKEN_SCOPE_FULL");
  const [days, setDays] = useState(90);
  const [secret, setSecret] = useState("");
  const [error, act] = useAct();
  return (
    <section aria-label="Account">
      <h2>Account</h2>
      <p>Signed in as <strong data-testid="me">{auth.user?.id}</strong>{auth.user?.admin ? " (admin)" : ""}.</p>
      {auth.must_change_password && <p class="banner warn" role="status">Your password was set for you; choose your own.</p>}
      <form class="form" aria-label="Change password" onSubmit={(e) => {
        e.preventDefault();
        void act(() => api.changePassword(old, next), () => { setOld(""); setNext(""); setDone("Password changed; your other sign-ins have ended."); onAuthChanged(); });
      }}>
        <label>Current password <input type="password" autocomplete="current-password" value={old} onInput={(e) => setOld(e.currentTarget.value)} /></label>
        <label>New password <input type="password" autocomplete="new-password" required minLength={10} value={next} onInput={(e) => setNext(e.currentTarget.value)} /></label>
        <button type="submit">Change password</button>
        {done && <p role="status">{done}</p>}
      </form>
      <h3>Personal access tokens</h3>
      <form class="form row" aria-label="New token" onSubmit={(e) => {
        e.preventDefault();
        void act(async () => { const r = await api.createToken(name, scope, days); setSecret(r.secret); setName(""); }, reload);
      }}>
        <label>Name <input required value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>Scope <select value={scope} onChange={(e) => setScope(e.currentTarget.value)}>
          <option value="TOKEN_SCOPE_FULL">full</option><option value="TOKEN_SCOPE_READ">read-only</option>
        </select></label>
        <label>Days <input type="number" min={1} max={366} value={days} onInput={(e) => setDays(Number(e.currentTarget.value))} /></label>
        <button type="submit">Create token</button>
      </form>
      {secret && <p class="banner" role="status" data-testid="token-secret">Copy this token now; it is not shown again: <code>{secret}</code></p>}
      {(error || loadError) && <p class="banner error" role="alert">{error || loadError}</p>}
      <table>
        <thead><tr><th>Name</th><th>Scope</th><th>Expires</th><th>Last used</th><th /></tr></thead>
        <tbody>{(tokens?.tokens ?? []).map((t: Token) => (
          <tr key={t.token_id}><td>{t.name}</td><td>{(t.scope ?? "").replace("TOKEN_SCOPE_", "").toLowerCase()}</td>
            <td>{t.expires_at?.slice(0, 10)}</td><td>{t.last_used_at?.slice(0, 16).replace("T", " ") ?? "never"}</td>
            <td><button onClick={() => void act(() => api.revokeToken(t.token_id), () => { setSecret(""); reload(); })}>Revoke {t.name}</button></td></tr>
        ))}</tbody>
      </table>
    </section>
  );
}

/** Members lists a project's members; its owners add, change and remove them. */
function Members({ project, onChanged }: { project: Project; onChanged: () => void }) {
  const [members, loadError, reload] = useLoad(() => api.members(project.project_id));
  const [user, setUser] = useState("");
  const [role, setRole] = useState("PROJECT_ROLE_MEMBER");
  const [error, act] = useAct();
  const owner = project.role === "PROJECT_ROLE_OWNER";
  return (
    <div aria-label={`Members of ${project.project_id}`} role="group">
      <ul>{(members?.members ?? []).map((m: Member) => (
        <li key={m.user_id}>{m.user_id} <span class="muted">{roleWord(m.role)}</span>
          {owner && <button class="link" onClick={() => void act(() => api.removeMember(project.project_id, m.user_id), () => { reload(); onChanged(); })}>Remove {m.user_id}</button>}</li>
      ))}</ul>
      {owner && <form class="form row" aria-label={`Add a member to ${project.project_id}`} onSubmit={(e) => {
        e.preventDefault();
        void act(() => api.setMember(project.project_id, user.trim(), role), () => { setUser(""); reload(); });
      }}>
        <label>User <input required value={user} onInput={(e) => setUser(e.currentTarget.value)} /></label>
        <label>Role <select value={role} onChange={(e) => setRole(e.currentTarget.value)}>
          <option value="PROJECT_ROLE_MEMBER">member</option><option value="PROJECT_ROLE_OWNER">owner</option>
        </select></label>
        <button type="submit">Add member</button>
      </form>}
      {(error || loadError) && <p class="banner error" role="alert">{error || loadError}</p>}
    </div>
  );
}

/** Projects lists the caller's projects, creates one and manages members. */
function Projects({ onChanged }: { onChanged: () => void }) {
  const [projects, loadError, reload] = useLoad(() => api.projects());
  const [id, setId] = useState("");
  const [name, setName] = useState("");
  const [error, act] = useAct();
  return (
    <section aria-label="Projects">
      <h2>Projects</h2>
      <form class="form row" aria-label="New project" onSubmit={(e) => {
        e.preventDefault();
        void act(() => api.createProject(id.trim(), name), () => { setId(""); setName(""); reload(); onChanged(); });
      }}>
        <label>Project id <input required pattern="[a-z0-9._-]{1,63}" value={id} onInput={(e) => setId(e.currentTarget.value)} /></label>
        <label>Name <input value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <button type="submit">Create project</button>
      </form>
      {(error || loadError) && <p class="banner error" role="alert">{error || loadError}</p>}
      {(projects?.projects ?? []).map((p: Project) => (
        <details key={p.project_id} data-testid={`project-${p.project_id}`}>
          <summary>{p.project_id}{p.name ? ` — ${p.name}` : ""} <span class="muted">{roleWord(p.role)}</span></summary>
          <Members project={p} onChanged={onChanged} />
          {p.role === "PROJECT_ROLE_OWNER" && <Audit project={p.project_id} />}
          {p.role === "PROJECT_ROLE_OWNER" && p.project_id !== "default" &&
            <button onClick={() => void act(() => api.deleteProject(p.project_id), () => { reload(); onChanged(); })}>Delete project {p.project_id}</button>}
        </details>
      ))}
    </section>
  );
}

/** Audit shows, on demand, the newest records of a project's audit log
 * (project set, for its owners) or of the global one (admins). */
function Audit({ project }: { project: string }) {
  const [records, setRecords] = useState<AuditRecord[]>();
  const [error, act] = useAct();
  const what = project ? `the audit log of ${project}` : "the global audit log";
  return (
    <div aria-label={`Audit log${project ? ` of ${project}` : ""}`} role="group">
      <button onClick={() => void act(async () => setRecords((await api.audit(project)).records ?? []))}>{records ? "Reload" : "Show"} {what}</button>
      {error && <p class="banner error" role="alert">{error}</p>}
      {records && (records.length === 0 ? <p class="muted">Nothing recorded yet.</p> :
        <table>
          <thead><tr><th>When</th><th>Who</th><th>What</th><th>Target</th><th>Detail</th></tr></thead>
          <tbody>{records.map((r) => (
            <tr key={r.id}><td>{r.at ? new Date(r.at).toLocaleString() : ""}</td><td>{r.actor || "—"}</td><td>{r.action}</td><td>{r.target}</td><td>{r.detail}</td></tr>
          ))}</tbody>
        </table>)}
    </div>
  );
}

/** Users is the admins' page of accounts. */
function Users() {
  const [users, loadError, reload] = useLoad(() => api.users());
  const [id, setId] = useState("");
  const [name, setName] = useState("");
  const [password, setPassword] = useState("");
  const [admin, setAdmin] = useState(false);
  const [error, act] = useAct();
  return (
    <section aria-label="Users">
      <h2>Users</h2>
      <form class="form row" aria-label="New user" onSubmit={(e) => {
        e.preventDefault();
        void act(() => api.createUser({ user_id: id.trim(), name, password, admin }), () => { setId(""); setName(""); setPassword(""); setAdmin(false); reload(); });
      }}>
        <label>User id <input required value={id} onInput={(e) => setId(e.currentTarget.value)} /></label>
        <label>Display name <input value={name} onInput={(e) => setName(e.currentTarget.value)} /></label>
        <label>First password <input type="password" autocomplete="new-password" required minLength={10} value={password} onInput={(e) => setPassword(e.currentTarget.value)} /></label>
        <label><input type="checkbox" checked={admin} onChange={(e) => setAdmin(e.currentTarget.checked)} /> Admin</label>
        <button type="submit">Create user</button>
      </form>
      {(error || loadError) && <p class="banner error" role="alert">{error || loadError}</p>}
      <table>
        <thead><tr><th>User</th><th>Name</th><th>Role</th><th>State</th><th /></tr></thead>
        <tbody>{(users?.users ?? []).map((u: User) => (
          <tr key={u.user_id}><td>{u.user_id}</td><td>{u.name}</td><td>{u.admin ? "admin" : "user"}</td><td>{u.disabled ? "disabled" : "enabled"}</td>
            <td>
              <button onClick={() => void act(() => api.updateUser(u.user_id, { disabled: !u.disabled }), reload)}>{u.disabled ? "Enable" : "Disable"} {u.user_id}</button>
              <button onClick={() => { const p = prompt(`New password of ${u.user_id} (at least 10 characters)`); if (p) void act(() => api.resetPassword(u.user_id, p)); }}>Reset password of {u.user_id}</button>
              <button onClick={() => { if (confirm(`Delete ${u.user_id} with their memberships and tokens?`)) void act(() => api.deleteUser(u.user_id), reload); }}>Delete {u.user_id}</button>
            </td></tr>
        ))}</tbody>
      </table>
    </section>
  );
}

/** Team is the page of the account, the projects and, for admins, the users. */
export function Team({ auth, onProjectsChanged, onAuthChanged }: { auth: AuthState; onProjectsChanged: () => void; onAuthChanged: () => void }) {
  return (
    <div class="page team">
      <h1>Team</h1>
      {auth.user && <Account auth={auth} onAuthChanged={onAuthChanged} />}
      <Projects onChanged={onProjectsChanged} />
      {(auth.user?.admin || auth.operator) && <Users />}
      {(auth.user?.admin || auth.operator) && <section aria-label="Global audit log"><h2>Audit log</h2><Audit project="" /></section>}
    </div>
  );
}
