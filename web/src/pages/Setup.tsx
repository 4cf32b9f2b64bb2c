import { useEffect, useState } from "preact/hooks";
import { api, num, type CatalogProvider, type ModelInfo, type Project, type ProviderRouteInfo, type SetupResult } from "../api";
import { onLink } from "../router";
import { ModelSettings } from "./ModelSettings";

/** OTHER is the choice of a server that is not a catalog provider: a
 * local model server, a proxy, a gateway. */
const OTHER = "";

const APIS = [
  ["openai", "OpenAI-compatible (Chat Completions)"],
  ["openai-responses", "OpenAI Responses API"],
  ["anthropic", "Anthropic Messages"],
  ["gemini", "Google Gemini"],
];

/** The providers people use most, listed first. */
const USUAL = ["openai", "anthropic", "google", "deepseek", "mistral", "xai", "openrouter", "groq"];

function ordered(ps: CatalogProvider[]): CatalogProvider[] {
  const rank = (p: CatalogProvider) => {
    const i = USUAL.indexOf(p.id);
    return i < 0 ? USUAL.length : i;
  };
  return [...ps].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}

/** Setup is the first-run page (and the Models page later): it says why
 * no model is available, lists the configured providers, and offers the
 * form that adds a provider route through the llm service, which keeps it
 * (its key encrypted) and uses it at once, on every replica.
 *
 * With a project chosen in the switcher, it lists what that project's
 * sessions see (the global routes and the project's own), and the
 * project's owners add and remove the project's routes; administrators
 * manage the global ones. The server decides either way: the page only
 * leaves out what the caller may not do. */
export function Setup({ notice, models, onDone, project = "", projects = [], admin = true }: {
  notice?: string; models: ModelInfo[]; onDone: () => void;
  /** The switcher's project, empty for none. */
  project?: string; projects?: Project[];
  /** The caller administers the server (always so in local mode). */
  admin?: boolean;
}) {
  /** mayManage says whether the caller may change the routes of p (empty: the global ones). */
  const mayManage = (p: string) => p ? admin || projects.some((x) => x.project_id === p && x.role === "PROJECT_ROLE_OWNER") : admin;
  const scopes = [...(admin ? [""] : []), ...(project && mayManage(project) ? [project] : [])];
  const [scope, setScope] = useState(project && mayManage(project) ? project : "");
  useEffect(() => setScope(project && mayManage(project) ? project : ""), [project, projects.length]);
  const [catalog, setCatalog] = useState<CatalogProvider[]>([]);
  const [choice, setChoice] = useState("openai");
  const [other, setOther] = useState({ name: "local", type: "openai", model: "" });
  const [baseURL, setBaseURL] = useState("");
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<SetupResult>();
  const [error, setError] = useState("");
  const [routes, setRoutes] = useState<ProviderRouteInfo[]>([]);
  const [tested, setTested] = useState<Record<string, string>>({});
  const loadRoutes = () => api.providers(project).then((r) => setRoutes(r.providers ?? [])).catch((e) => setError(e.message));
  useEffect(() => { loadRoutes(); }, [done, project]);
  const test = async (name: string, owner = "") => {
    setTested({ ...tested, [name]: "testing…" });
    try {
      const r = await api.testProvider(name, owner || project);
      setTested((t) => ({ ...t, [name]: r.ok ? `${r.model_id} answered in ${num(r.latency_ms)} ms` : `${r.model_id} failed: ${r.outcome?.message ?? "no answer"}` }));
    } catch (err) {
      setTested((t) => ({ ...t, [name]: (err as Error).message }));
    }
  };
  const remove = async (name: string, owner = "") => {
    try {
      await api.removeProvider(name, owner);
      await loadRoutes();
      onDone();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  useEffect(() => {
    api.setup().then((s) => {
      setCatalog(ordered(s.providers ?? []));
    }).catch((e) => setError(e.message));
  }, []);
  const picked = catalog.find((p) => p.id === choice);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError("");
    setDone(undefined);
    setBusy(true);
    try {
      const form = picked
        ? { project: scope, name: picked.id, type: picked.type, base_url: baseURL.trim(), api_key: key.trim(), models: [] }
        : { project: scope, name: other.name.trim(), type: other.type, base_url: baseURL.trim(), api_key: key.trim(), models: other.model.trim() ? other.model.trim().split(/[\s,]+/) : [] };
      const r = await api.addProvider(form);
      setDone(r);
      setKey("");
      onDone();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const byProvider = new Map<string, number>();
  for (const m of models) byProvider.set(m.model.provider, (byProvider.get(m.model.provider) ?? 0) + 1);
  const first = byProvider.size === 0;
  return (
    <section class="page" aria-label={first ? "Add a model" : "Models"}>
      <h1>{first ? "Welcome to Penguin" : "Models"}</h1>
      {first && <>
        <p class="lead" data-testid="first-run">No model is configured yet. Add a model provider to start: pick one and paste its API key below,
          or point Penguin at a server of your own.</p>
      </>}
      {!first && (
        <p data-testid="configured">Configured: {[...byProvider].map(([p, n], i) => <>{i ? ", " : ""}<code>{p}</code> ({n} {n === 1 ? "model" : "models"})</>)}.
          {" "}<a href="/new" onClick={onLink}>New session</a></p>
      )}
      {routes.length > 0 && <table class="routes" data-testid="routes">
        <thead><tr><th>Route</th><th>API</th><th>Key</th><th>For</th><th>From</th><th></th></tr></thead>
        <tbody>{routes.map((r) => <tr data-testid={`route-${r.name}`}>
          <td><code>{r.name}</code></td><td>{r.type}</td><td><code>{r.key_hint || "—"}</code></td>
          <td>{r.project ? <>project <code>{r.project}</code></> : "every project"}</td>
          <td>{r.origin === "store" ? "added here" : r.origin === "file" ? "providers file" : "environment"}</td>
          <td>
            <button type="button" onClick={() => test(r.name, r.project)}>Test</button>
            {r.origin === "store" && mayManage(r.project ?? "") && <button type="button" aria-label={`Remove ${r.name}`} onClick={() => remove(r.name, r.project)}>Remove</button>}
            {tested[r.name] && <span class="muted small" role="status" data-testid={`tested-${r.name}`}> {tested[r.name]}</span>}
          </td>
        </tr>)}</tbody>
      </table>}
      {!first && <h2>Add a provider</h2>}
      {!scopes.length && <p class="muted" data-testid="no-scope">Administrators add the routes of every project, and a project's owners its own:
        {project ? <> you do not own <code>{project}</code>.</> : " choose a project you own in the switcher."}</p>}
      {scopes.length > 0 && <form class="form" onSubmit={submit}>
        {(scopes.length > 1 || scope) && <label>For
          <select value={scope} onChange={(e) => setScope(e.currentTarget.value)} name="project">
            {scopes.map((p) => <option value={p}>{p ? `Project ${p} only` : "Every project"}</option>)}
          </select>
        </label>}
        <label>Provider
          <select value={choice} onChange={(e) => { setChoice(e.currentTarget.value); setDone(undefined); }} name="provider">
            {catalog.map((p) => <option value={p.id}>{p.name}</option>)}
            <option value={OTHER}>Another server (local, proxy, compatible API)</option>
          </select>
        </label>
        {!picked && <>
          <label>Name <input required value={other.name} pattern="[a-z0-9][a-z0-9_.\-]*" title="lower-case letters, digits, '.', '_' or '-'"
            onInput={(e) => setOther({ ...other, name: e.currentTarget.value })} name="name" />
            <span class="muted small">The provider half of a model reference: <code>{other.name || "name"}/model-id</code>.</span></label>
          <label>API <select value={other.type} onChange={(e) => setOther({ ...other, type: e.currentTarget.value })} name="type">
            {APIS.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
        </>}
        <label>API key{picked ? "" : " (optional)"}
          <input required={!!picked} type="password" autocomplete="off" value={key} onInput={(e) => setKey(e.currentTarget.value)} name="api_key" />
        </label>
        <label>Base URL{picked ? " (optional)" : ""}
          <input value={baseURL} required={!picked} type="url" onInput={(e) => setBaseURL(e.currentTarget.value)} name="base_url"
            placeholder={picked ? picked.base_url : "http://127.0.0.1:8000/v1"} />
          {picked && <span class="muted small">Empty: {picked.name}'s own API. Set it for a proxy or a gateway that speaks the same API.</span>}
        </label>
        {!picked && <label>Model ids <input value={other.model} onInput={(e) => setOther({ ...other, model: e.currentTarget.value })} placeholder="e.g. qwen3-32b (several: comma-separated)" name="model_id" /></label>}
        {picked && <p class="muted small">{picked.name}'s {picked.models} models come from Penguin's catalog, with their limits and prices.</p>}
        {error && <p class="banner error" role="alert">{error}</p>}
        {done && <p class="banner info" role="status" data-testid="setup-done">Provider <code>{done.provider}</code> is ready{done.replaced ? " (replaced)" : ""}.
          {done.route.key_hint ? <> Its key is stored encrypted: <code data-testid="key-hint">{done.route.key_hint}</code>. </> : " "}
          <a href="/new" onClick={onLink}>Start a session</a></p>}
        <button class="primary" type="submit" disabled={busy}>{busy ? "Saving…" : "Save"}</button>
        <p class="muted small">The server keeps the route in its route store, the key encrypted, and shows only its first and last characters again.</p>
      </form>}
      {!first && <ModelSettings project={project} />}
      {first && <p class="muted small">Or restart <code>penguin serve</code> with a key in its environment
        ({picked?.key_var ? <code>{picked.key_var}</code> : <><code>OPENAI_API_KEY</code>, <code>ANTHROPIC_API_KEY</code>, …</>}).
        {notice && <> The server says: <span data-testid="setup-notice">{notice}</span></>}</p>}
    </section>
  );
}
