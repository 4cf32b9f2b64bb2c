import { useEffect, useState } from "preact/hooks";
import { agents } from "../agents";
import { api, num, type ModelInfo } from "../api";
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
  ["SANDBOX_MODE_NONE", "none"],
  ["SANDBOX_MODE_WORKSPACE_WRITE", "write only in the workspace"],
  ["SANDBOX_MODE_READ_ONLY", "read-only"],
];

/** NewSession creates a session and, with a first message, starts its
 * first task. */
export function NewSession({ models }: { models: ModelInfo[] }) {
  const last = JSON.parse(localStorage.getItem("penguin.new") ?? "{}");
  const [workspace, setWorkspace] = useState<string>(last.workspace ?? "");
  const [model, setModel] = useState<string>(last.model ?? "");
  const [mode, setMode] = useState<string>(last.mode ?? "APPROVAL_MODE_ALWAYS_ASK");
  const [thinking, setThinking] = useState<string>(last.thinking ?? "");
  const [sandbox, setSandbox] = useState<string>(last.sandbox ?? "SANDBOX_MODE_NONE");
  const [agent, setAgent] = useState<string>(last.agent ?? "default");
  const [agentNames, setAgentNames] = useState<string[]>(["default"]);
  useEffect(() => { agents.list().then((r) => setAgentNames((r.agents ?? []).map((a) => a.name))).catch(() => undefined); }, []);
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
      localStorage.setItem("penguin.new", JSON.stringify({ workspace, model, mode, thinking, sandbox, agent }));
      const s = await api.createSession({
        model: { provider: model.slice(0, slash), model_id: model.slice(slash + 1) },
        workspace, approval_mode: mode, sandbox_mode: sandbox, agent_state: agent,
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
        <label>Workspace <input required value={workspace} placeholder="/path/to/project" onInput={(e) => setWorkspace(e.currentTarget.value)} name="workspace" /></label>
        <label>Model
          <input list="models" aria-label="Model" required value={model} placeholder="provider/model-id" onInput={(e) => setModel(e.currentTarget.value)} name="model" />
          <datalist id="models">{usable.map((m) => <option value={ref(m)}>{[m.name, price(m.price)].filter(Boolean).join(" · ")}</option>)}</datalist>
          {chosen && <span class="muted small" data-testid="model-facts">{[chosen.name, num(chosen.context_window) ? `${tokens(num(chosen.context_window))} context` : "",
            chosen.reasoning ? "reasons" : "", price(chosen.price) || "price unknown"].filter(Boolean).join(" · ")}</span>}
        </label>
        <label>Agent <select value={agent} onChange={(e) => setAgent(e.currentTarget.value)} name="agent">{agentNames.map((a) => <option value={a}>{a}</option>)}</select></label>
        <label>Approval <select value={mode} onChange={(e) => setMode(e.currentTarget.value)} name="approval">{MODES.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
        <label>Thinking <select value={thinking} onChange={(e) => setThinking(e.currentTarget.value)} name="thinking">{THINKING.map((v) => <option value={v}>{v || "model default"}</option>)}</select></label>
        <label>Sandbox <select value={sandbox} onChange={(e) => setSandbox(e.currentTarget.value)} name="sandbox">{SANDBOX.map(([v, l]) => <option value={v}>{l}</option>)}</select></label>
        <label>First message <textarea rows={4} value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} name="prompt" placeholder="Optional: the task to start with" /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        <button class="primary" type="submit" disabled={busy}>Create</button>
      </form>
    </section>
  );
}
