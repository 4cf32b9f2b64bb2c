import { useEffect, useState } from "preact/hooks";
import { api } from "../api";

/** Setup is the first-run page: it says why no model is available and
 * offers the form that writes a provider route into the providers file. */
export function Setup({ notice, onDone }: { notice?: string; onDone: () => void }) {
  const [file, setFile] = useState<string | null>(null);
  const [form, setForm] = useState({ name: "openai", type: "openai", base_url: "", api_key: "", model: "" });
  const [msg, setMsg] = useState("");
  const [error, setError] = useState("");
  useEffect(() => {
    api.setup().then((s) => setFile(s.providers_file)).catch((e) => setError(e.message));
  }, []);
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const submit = async (e: Event) => {
    e.preventDefault();
    setError("");
    setMsg("");
    try {
      const r = await api.addProvider({
        name: form.name, type: form.type, base_url: form.base_url, api_key: form.api_key,
        models: form.model ? [form.model] : [],
      });
      setMsg(`Provider ${r.provider} written; its key is in ${r.key_file}. The llm service picks up the change by itself.`);
      setForm({ ...form, api_key: "" });
      onDone();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <section class="page" aria-label="Add a model">
      <h1>Add a model</h1>
      {notice && <p class="banner warn" role="status">{notice}</p>}
      <p>Penguin needs a model provider. Either start <code>penguin serve</code> with a key in its environment
        (<code>OPENAI_API_KEY</code>, <code>ANTHROPIC_API_KEY</code>), or add one here: the form writes it to the providers file,
        with the key in a file of its own that only the server's user can read.</p>
      {file === "" && <p class="banner warn">This server was started without a providers file, so this form cannot write one. Restart it with <code>--providers FILE</code>.</p>}
      {file && <p class="muted small">Providers file: <code>{file}</code></p>}
      <form class="form" onSubmit={submit}>
        <label>Name <input required value={form.name} onInput={set("name")} name="name" /></label>
        <label>API <select value={form.type} onChange={set("type")} name="type"><option value="openai">OpenAI-compatible (Chat Completions)</option><option value="anthropic">Anthropic (Messages)</option></select></label>
        <label>Base URL <input value={form.base_url} onInput={set("base_url")} placeholder="empty: the vendor's own API" name="base_url" /></label>
        <label>API key <input required type="password" autocomplete="off" value={form.api_key} onInput={set("api_key")} name="api_key" /></label>
        <label>Model id <input value={form.model} onInput={set("model")} placeholder="optional, e.g. gpt-4o" name="model_id" /></label>
        {error && <p class="banner error" role="alert">{error}</p>}
        {msg && <p class="banner info" role="status">{msg}</p>}
        <button class="primary" type="submit" disabled={!file}>Save</button>
      </form>
    </section>
  );
}
