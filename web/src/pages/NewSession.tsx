import { useEffect, useState } from "preact/hooks";
import { api, type ModelInfo } from "../api";
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
export function NewSession({ models, notice }: { models: ModelInfo[]; notice?: string }) {
  const last = JSON.parse(localStorage.getItem("penguin.new") ?? "{}");
  const [workspace, setWorkspace] = useState<string>(last.workspace ?? "");
  const [model, setModel] = useState<string>(last.model ?? "");
  const [mode, setMode] = useState<string>(last.mode ?? "APPROVAL_MODE_ALWAYS_ASK");
  const [thinking, setThinking] = useState<string>(last.thinking ?? "");
  const [sandbox, setSandbox] = useState<string>(last.sandbox ?? "SANDBOX_MODE_NONE");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (!model && models.length) setModel(`${models[0].model.provider}/${models[0].model.model_id}`);
  }, [models]);
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
      localStorage.setItem("penguin.new", JSON.stringify({ workspace, model, mode, thinking, sandbox }));
      const s = await api.createSession({
        model: { provider: model.slice(0, slash), model_id: model.slice(slash + 1) },
        workspace, approval_mode: mode, sandbox_mode: sandbox,
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
      {(notice || !models.length) && <p class="banner warn">{notice || "No model is listed."} <a href="/setup" onClick={(e) => { e.preventDefault(); navigate("/setup"); }}>Add a model</a></p>}
      <form class="form" onSubmit={submit}>
        <label>Workspace <input required value={workspace} placeholder="/path/to/project" onInput={(e) => setWorkspace(e.currentTarget.value)} name="workspace" /></label>
        <label>Model
          <input list="models" required value={model} placeholder="provider/model-id" onInput={(e) => setModel(e.currentTarget.value)} name="model" />
          <datalist id="models">{models.map((m) => <option value={`${m.model.provider}/${m.model.model_id}`}>{m.name ?? ""}</option>)}</datalist>
        </label>
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
