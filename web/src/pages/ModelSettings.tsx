import { useEffect, useState } from "preact/hooks";
import { agents, type ModelSettings as Settings } from "../agents";

/** ModelSettings is the Models page's table of a project's settings of
 * models the catalog lacks (a local model's context window and price),
 * with a form that sets one and a Remove per row. The engine checks
 * them (a route the project reaches, a window from 1,024 tokens, prices
 * of zero or more) and says what is wrong. */
export function ModelSettings({ project }: { project: string }) {
  const [rows, setRows] = useState<Settings[]>([]);
  const [error, setError] = useState("");
  const [saved, setSaved] = useState("");
  const [form, setForm] = useState({ model: "", window: "", input: "", output: "" });
  const load = () => agents.modelSettings(project).then((r) => setRows(r.settings ?? [])).catch((e) => setError(e.message));
  useEffect(() => { void load(); }, [project]);
  const save = async (e: Event) => {
    e.preventDefault();
    setError("");
    setSaved("");
    const slash = form.model.indexOf("/");
    if (slash <= 0) {
      setError("The model is provider/model-id, such as local/qwen3-32b.");
      return;
    }
    const settings: Settings = { model: { provider: form.model.slice(0, slash), model_id: form.model.slice(slash + 1) } };
    if (form.window.trim()) settings.context_window = form.window.trim();
    if (form.input.trim() || form.output.trim()) {
      const [input, output] = [Number(form.input || 0), Number(form.output || 0)];
      if (Number.isNaN(input) || Number.isNaN(output)) {
        setError("A price is a number of US dollars per million tokens, such as 0.2.");
        return;
      }
      settings.price = { input, output };
    }
    try {
      await agents.setModelSettings(project, settings);
      setSaved(`Saved the settings of ${form.model}.`);
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const remove = async (s: Settings) => {
    setError("");
    try {
      await agents.setModelSettings(project, { model: s.model });
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const price = (v: number) => `$${v}`;
  return (
    <>
      <h2>Model settings{project ? <> of <code>{project}</code></> : ""}</h2>
      <p class="muted small">A model's context window and price in this project, for a local model the catalog does not know or prices otherwise.
        Sessions use them before the catalog's (an agent's own <code>model.context_window</code> comes first), and usage costs are computed with the price.</p>
      {rows.length > 0 && <table class="routes" data-testid="model-settings">
        <thead><tr><th>Model</th><th>Context window</th><th>Input $/M</th><th>Output $/M</th><th>Cache read $/M</th><th></th></tr></thead>
        <tbody>{rows.map((s) => {
          const name = `${s.model.provider}/${s.model.model_id}`;
          return <tr data-testid={`model-setting-${name}`}>
            <td><code>{name}</code></td><td>{Number(s.context_window ?? 0) > 0 ? Number(s.context_window).toLocaleString("en") : "catalog"}</td>
            <td>{s.price ? price(s.price.input ?? 0) : "catalog"}</td><td>{s.price ? price(s.price.output ?? 0) : "catalog"}</td>
            <td>{!s.price ? "catalog" : s.price.cache_read === undefined ? "= input" : price(s.price.cache_read)}</td>
            <td><button type="button" aria-label={`Remove the settings of ${name}`} onClick={() => remove(s)}>Remove</button></td>
          </tr>;
        })}</tbody>
      </table>}
      <form class="form" onSubmit={save} aria-label="Model settings">
        <label>Model <input required value={form.model} name="settings_model" placeholder="provider/model-id, e.g. local/qwen3-32b"
          onInput={(e) => setForm({ ...form, model: e.currentTarget.value })} /></label>
        <label>Context window (tokens) <input value={form.window} name="context_window" inputMode="numeric" placeholder="empty: the catalog's"
          onInput={(e) => setForm({ ...form, window: e.currentTarget.value })} /></label>
        <label>Input price (USD per million tokens) <input value={form.input} name="price_input" inputMode="decimal" placeholder="empty: the catalog's"
          onInput={(e) => setForm({ ...form, input: e.currentTarget.value })} /></label>
        <label>Output price (USD per million tokens) <input value={form.output} name="price_output" inputMode="decimal" placeholder="empty: the catalog's"
          onInput={(e) => setForm({ ...form, output: e.currentTarget.value })} /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        {saved && <p class="banner info" role="status">{saved}</p>}
        <button class="primary" type="submit">Save settings</button>
      </form>
    </>
  );
}
