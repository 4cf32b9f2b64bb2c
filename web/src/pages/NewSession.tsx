import { useEffect, useRef, useState } from "preact/hooks";
import { agents } from "../agents";
import { api, num, type ModelInfo, type SessionDefaults } from "../api";
import { price, tokens } from "../format";
import { navigate } from "../router";

const MODES = [
  ["APPROVAL_MODE_ALWAYS_ASK", "always ask"],
  ["APPROVAL_MODE_READ_ONLY", "read-only tools run, others ask"],
  ["APPROVAL_MODE_ALLOW_ALL", "allow all"],
  ["APPROVAL_MODE_DENY_ALL", "deny all"],
];
const THINKING = ["", "none", "low", "medium", "high", "xhigh", "max"];
const SANDBOX = [
  ["SANDBOX_MODE_WORKSPACE_WRITE", "write only in the workspace"],
  ["SANDBOX_MODE_READ_ONLY", "read-only"],
  ["SANDBOX_MODE_NONE", "none (commands run with the server's powers)"],
];
const SANDBOX_WORDS: Record<string, string> = Object.fromEntries(SANDBOX);
const NETWORK_WORDS: Record<string, string> = {
  NETWORK_ACCESS_NONE: "no network", NETWORK_ACCESS_PROXY: "network through the proxy", NETWORK_ACCESS_HOST: "the host's network",
};

/** Choices are the form's settings that are remembered per workspace: a
 * project that needs commands unconfined, or one where every write is
 * fine, keeps that choice without making it everyone's. */
interface Choices { mode?: string; thinking?: string; sandbox?: string }

const lastKey = "penguin.new";
const wsKey = (ws: string) => `penguin.new.ws:${ws.trim()}`;
const read = <T,>(key: string): T => {
  try {
    return JSON.parse(localStorage.getItem(key) ?? "{}") as T;
  } catch {
    return {} as T;
  }
};

/** NewSession creates a session and, with a first message, starts its
 * first task. Its approval mode and sandbox start as the server's
 * defaults (GET /api/defaults): a newcomer's session is confined and its
 * reads run without a question. "Server default" sends no sandbox mode, so
 * the server's own default applies even if it changes later. */
/** NewSession starts a session in project (the switcher's; empty lets
 * the server choose). */
export function NewSession({ models, project }: { models: ModelInfo[]; project?: string }) {
  const last = read<{ workspace?: string; model?: string; agent?: string }>(lastKey);
  const [workspace, setWorkspace] = useState<string>(last.workspace ?? "");
  const [model, setModel] = useState<string>(last.model ?? "");
  const [defaults, setDefaults] = useState<SessionDefaults>();
  const [choices, setChoices] = useState<Choices>(() => read<Choices>(wsKey(last.workspace ?? "")));
  useEffect(() => {
    api.defaults().then(setDefaults).catch(() => setDefaults({}));
  }, []);
  const mode = choices.mode ?? defaults?.interactive_approval_mode ?? "APPROVAL_MODE_READ_ONLY";
  const thinking = choices.thinking ?? "";
  const sandbox = choices.sandbox ?? "";
  const choose = (c: Choices) => setChoices({ ...choices, ...c });
  const serverSandbox = defaults?.sandbox_mode
    ? `server default: ${SANDBOX_WORDS[defaults.sandbox_mode] ?? defaults.sandbox_mode}${defaults.sandbox_mode !== "SANDBOX_MODE_NONE" && defaults.network ? ", " + (NETWORK_WORDS[defaults.network] ?? defaults.network) : ""}`
    : "server default";
  const [agent, setAgent] = useState<string>(last.agent ?? "default");
  const [agentNames, setAgentNames] = useState<string[]>(["default"]);
  useEffect(() => { agents.list().then((r) => setAgentNames((r.agents ?? []).map((a) => a.name))).catch(() => undefined); }, []);
  // The agent's default model is the choice until the field is touched.
  const touched = useRef(false);
  useEffect(() => {
    agents.model(agent).then((r) => {
      if (!touched.current && r.model?.provider && r.model.model_id) setModel(`${r.model.provider}/${r.model.model_id}`);
    }).catch(() => undefined);
  }, [agent]);
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  // An agent needs a model that calls tools; the others (image and
  // embedding models of a catalog provider) are left out of the list,
  // though a model id can still be typed.
  const usable = models.filter((m) => m.tools && m.status !== "deprecated");
  const ref = (m: ModelInfo) => `${m.model.provider}/${m.model.model_id}`;
  useEffect(() => {
    if (usable.length && !usable.some((m) => ref(m) === model)) setModel(ref(usable[0]));
  }, [models]);
  const chosen = models.find((m) => ref(m) === model);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError("");
    const slash = model.indexOf("/");
    if (slash <= 0) {
      setError("Pick a model, or type one as provider/model-id.");
      return;
    }
    setBusy(true);
    try {
      localStorage.setItem(lastKey, JSON.stringify({ workspace, model, agent }));
      localStorage.setItem(wsKey(workspace), JSON.stringify({ mode, thinking, sandbox }));
      const s = await api.createSession({
        model: { provider: model.slice(0, slash), model_id: model.slice(slash + 1) },
        workspace, agent_state: agent, approval_mode: mode, ...(sandbox ? { sandbox_mode: sandbox } : {}),
        ...(project ? { project_id: project } : {}),
        ...(thinking ? { thinking_level: "THINKING_LEVEL_" + thinking.toUpperCase() } : {}),
      });
      if (prompt.trim()) await api.startTask(s.session_id, prompt.trim());
      navigate(`/sessions/${encodeURIComponent(s.session_id)}`);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="page" aria-label="New session">
      <h1>New session</h1>
      <form class="form" onSubmit={submit}>
        <label>Workspace <input required value={workspace} placeholder="/path/to/project" name="workspace"
          onInput={(e) => setWorkspace(e.currentTarget.value)} onChange={(e) => setChoices(read<Choices>(wsKey(e.currentTarget.value)))} /></label>
        <label>Model
          <input list="models" aria-label="Model" required value={model} placeholder="provider/model-id" onInput={(e) => { touched.current = true; setModel(e.currentTarget.value); }} name="model" />
          <datalist id="models">{usable.map((m) => <option value={ref(m)}>{[m.name, price(m.price)].filter(Boolean).join(" · ")}</option>)}</datalist>
          {chosen && <span class="muted small" data-testid="model-facts">{[chosen.name, num(chosen.context_window) ? `${tokens(num(chosen.context_window))} context` : "",
            chosen.reasoning ? "reasons" : "", price(chosen.price) || "price unknown"].filter(Boolean).join(" · ")}</span>}
        </label>
        <label>Agent <select value={agent} onChange={(e) => setAgent(e.currentTarget.value)} name="agent">{agentNames.map((a) => <option value={a}>{a}</option>)}</select></label>
        <label>Approval <select value={mode} onChange={(e) => choose({ mode: e.currentTarget.value })} name="approval">{MODES.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
        <label>Thinking <select value={thinking} onChange={(e) => choose({ thinking: e.currentTarget.value })} name="thinking">{THINKING.map((v) => <option value={v}>{v || "model default"}</option>)}</select></label>
        <label>Sandbox <select value={sandbox} onChange={(e) => choose({ sandbox: e.currentTarget.value })} name="sandbox">
          <option value="">{serverSandbox}</option>{SANDBOX.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
        <label>First message <textarea rows={4} value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} name="prompt" placeholder="Optional: the task to start with" /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        <button class="primary" type="submit" disabled={busy}>Create</button>
      </form>
    </section>
  );
}
