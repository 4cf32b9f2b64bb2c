import { useEffect, useState } from "preact/hooks";
import { agents, toBase64, type AgentInfo, type AgentTool, type MCPServer, type MemoryFile, type MemoryScope, type SkillInfo, type TestResult } from "../agents";
import { api, currentProject, type ModelInfo } from "../api";
import { navigate, onLink } from "../router";
import { SchedulesTab } from "./Schedules";

const TABS = ["General", "Instructions", "Tools", "MCP", "Skills", "Memory", "Vault", "Models", "Schedules"] as const;
type Tab = (typeof TABS)[number];

/** useLoad runs load now and whenever reload is called; errors land in
 * the page's banner. */
function useLoad<T>(load: () => Promise<T>, deps: unknown[]): [T | undefined, () => void, string] {
  const [value, setValue] = useState<T>();
  const [error, setError] = useState("");
  const [tick, setTick] = useState(0);
  useEffect(() => {
    load().then((v) => { setValue(v); setError(""); }).catch((e) => setError(e.message));
  }, [...deps, tick]);
  return [value, () => setTick((t) => t + 1), error];
}

/** Agents lists the project's agents, creates one (from the template or
 * as a copy of another) and imports one from a snapshot; with a name, it
 * is that agent's settings. */
export function Agents({ name }: { name?: string }) {
  const [list, reload, error] = useLoad(() => agents.list(), []);
  const [newName, setNewName] = useState("");
  const [from, setFrom] = useState("");
  const [importName, setImportName] = useState("");
  const [archive, setArchive] = useState<File>();
  const [replace, setReplace] = useState(false);
  const [msg, setMsg] = useState<{ ok: boolean; text: string }>();
  if (name) return <AgentSettings agent={name} />;
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      await agents.create(newName.trim(), from);
      setMsg({ ok: true, text: `Created ${newName.trim()}.` });
      setNewName("");
      reload();
    } catch (err) { setMsg({ ok: false, text: (err as Error).message }); }
  };
  const importAgent = async (e: Event) => {
    e.preventDefault();
    if (!archive) return;
    try {
      const r = await agents.importAgent(importName.trim(), await toBase64(archive), replace);
      setMsg({ ok: true, text: `Imported ${r.files ?? 0} files into ${importName.trim()}.` });
      reload();
    } catch (err) { setMsg({ ok: false, text: (err as Error).message }); }
  };
  const names = (list?.agents ?? []).map((a: AgentInfo) => a.name);
  return (
    <section class="page" aria-label="Agents">
      <h1>Agents <span class="muted small">project {currentProject()}</span></h1>
      {(error || msg) && <p class={`banner ${msg?.ok && !error ? "" : "error"}`} role={msg?.ok && !error ? "status" : "alert"}>{error || msg?.text}</p>}
      <table class="table">
        <thead><tr><th>Name</th><th>Version</th><th>Updated</th><th /></tr></thead>
        <tbody>{(list?.agents ?? []).map((a: AgentInfo) => (
          <tr><td><a href={`/agents/${encodeURIComponent(a.name)}`} onClick={onLink}>{a.name}</a></td><td>{a.version}</td>
            <td class="small">{a.updated_at ? new Date(a.updated_at).toLocaleString() : ""}</td>
            <td><a href={agents.exportURL(a.name)} download aria-label={`Export ${a.name}`}>Export</a></td></tr>
        ))}</tbody>
      </table>
      <h2>New agent</h2>
      <form class="form inline" onSubmit={create} aria-label="New agent">
        <input aria-label="New agent name" value={newName} placeholder="new agent name" onInput={(e) => setNewName(e.currentTarget.value)} required />
        <label>From <select aria-label="Create from" value={from} onChange={(e) => setFrom(e.currentTarget.value)}>
          <option value="">the default template</option>
          {names.map((n) => <option value={n}>a copy of {n} (without its memory)</option>)}
        </select></label>
        <button type="submit">Create</button>
      </form>
      <h2>Import a snapshot</h2>
      <form class="form inline" onSubmit={importAgent} aria-label="Import agent">
        <input aria-label="Imported agent name" value={importName} placeholder="agent name" onInput={(e) => setImportName(e.currentTarget.value)} required />
        <input type="file" aria-label="Agent archive" accept=".tar.gz,.tgz,application/gzip" required onChange={(e) => setArchive(e.currentTarget.files?.[0])} />
        <label><input type="checkbox" checked={replace} onChange={(e) => setReplace(e.currentTarget.checked)} /> replace an existing agent's files</label>
        <button type="submit">Import</button>
      </form>
    </section>
  );
}

function AgentSettings({ agent }: { agent: string }) {
  const [tab, setTab] = useState<Tab>("General");
  const [newName, setNewName] = useState(agent);
  const [error, setError] = useState("");
  const rename = async (e: Event) => {
    e.preventDefault();
    try { await agents.rename(agent, newName.trim()); navigate(`/agents/${encodeURIComponent(newName.trim())}`); } catch (err) { setError((err as Error).message); }
  };
  return (
    <section class="page" aria-label={`Agent ${agent}`}>
      <h1><a href="/agents" onClick={onLink}>Agents</a> / {agent}</h1>
      <form class="form inline" onSubmit={rename} aria-label="Rename agent">
        <input aria-label="Agent name" value={newName} onInput={(e) => setNewName(e.currentTarget.value)} required />
        <button type="submit" disabled={newName.trim() === agent}>Rename</button>
        <a href={agents.exportURL(agent)} download>Export</a>
      </form>
      {error && <p class="banner error" role="alert">{error}</p>}
      <div role="tablist" class="tabs">
        {TABS.map((t) => <button role="tab" aria-selected={t === tab} class={t === tab ? "primary" : ""} onClick={() => setTab(t)}>{t}</button>)}
      </div>
      <div role="tabpanel" aria-label={tab}>
        {tab === "General" && <ConfigFile agent={agent} file="system_config.yaml" />}
        {tab === "Instructions" && <ConfigFile agent={agent} file="AGENTS.md" />}
        {tab === "Tools" && <ToolsTab agent={agent} />}
        {tab === "MCP" && <MCPTab agent={agent} />}
        {tab === "Skills" && <SkillsTab agent={agent} />}
        {tab === "Memory" && <MemoryTab agent={agent} />}
        {tab === "Vault" && <VaultTab agent={agent} />}
        {tab === "Models" && <ModelTab agent={agent} />}
        {tab === "Schedules" && <SchedulesTab agent={agent} />}
      </div>
      <p><button class="link danger" onClick={async () => {
        if (confirm(`Delete agent ${agent} with its memory?`)) { await agents.remove(agent); navigate("/agents"); }
      }}>Delete agent</button></p>
    </section>
  );
}

/** ConfigFile edits a file with the version it read: a stale save is
 * refused with the current version, and a file the engine refuses is
 * kept in the editor with the engine's reason. */
function ConfigFile({ agent, file }: { agent: string; file: string }) {
  const [text, setText] = useState("");
  const [version, setVersion] = useState("0");
  const [note, setNote] = useState<{ ok: boolean; text: string }>();
  const load = () => agents.getConfig(agent, file).then((r) => { setText(r.content ?? ""); setVersion(r.version ?? "0"); });
  useEffect(() => { load().catch((e) => setNote({ ok: false, text: e.message })); }, [agent, file]);
  const save = async () => {
    try {
      const r = await agents.putConfig(agent, file, text, version);
      setVersion(r.version ?? version);
      setNote({ ok: true, text: "Saved." });
    } catch (e) { setNote({ ok: false, text: (e as Error).message }); }
  };
  return (
    <div class="form">
      <label>{file}<textarea aria-label={file} rows={22} spellcheck={false} class="mono" value={text} onInput={(e) => setText(e.currentTarget.value)} /></label>
      {note && <p class={`banner ${note.ok ? "" : "error"}`} role={note.ok ? "status" : "alert"}>{note.text}</p>}
      <div><button class="primary" onClick={save}>Save</button> <button onClick={() => { setNote(undefined); void load(); }}>Reload</button></div>
    </div>
  );
}

/** ToolsTab lists the tools the agent's configuration offers: the
 * builtin ones switch on and off (the engine rewrites tools.builtin), a
 * custom one is changed in the configuration. */
function ToolsTab({ agent }: { agent: string }) {
  const [list, reload, error] = useLoad(() => agents.tools(agent), [agent]);
  const [note, setNote] = useState("");
  const toggle = async (t: AgentTool, on: boolean) => {
    try { await agents.enableTool(agent, t.name, on); setNote(""); } catch (err) { setNote((err as Error).message); }
    reload();
  };
  return (
    <div>
      {(error || note) && <p class="banner error" role="alert">{error || note}</p>}
      <table class="table"><thead><tr><th>Tool</th><th>Kind</th><th>Permission</th><th>Models</th><th>Enabled</th><th>Description</th></tr></thead>
        <tbody>{(list?.tools ?? []).map((t: AgentTool) => (
          <tr data-testid={`tool-${t.name}`}><td class="mono nowrap">{t.name}</td><td>{t.kind}</td><td>{t.permission}</td><td>{t.for_model || "all"}</td>
            <td><input type="checkbox" aria-label={`enable tool ${t.name}`} checked={!!t.enabled} disabled={t.kind === "custom"}
              title={t.kind === "custom" ? "a custom tool is changed in system_config.yaml" : ""} onChange={(e) => toggle(t, e.currentTarget.checked)} /></td>
            <td class="small">{(t.description ?? "").split("\n")[0]}</td></tr>
        ))}</tbody></table>
    </div>
  );
}

function MCPTab({ agent }: { agent: string }) {
  const [list, reload, error] = useLoad(() => agents.mcp(agent), [agent]);
  const [form, setForm] = useState<{ name: string; transport: string; target: string; args: string; permission: string }>({ name: "", transport: "stdio", target: "", args: "", permission: "auto" });
  const [note, setNote] = useState("");
  const [tests, setTests] = useState<Record<string, TestResult>>({});
  const add = async (e: Event) => {
    e.preventDefault();
    const s: MCPServer = { name: form.name, transport: form.transport, permission: form.permission };
    if (form.transport === "stdio") { s.command = form.target; s.args = form.args.split(" ").filter(Boolean); } else s.url = form.target;
    try { await agents.putMCP(agent, s); setNote(""); reload(); } catch (err) { setNote((err as Error).message); }
  };
  return (
    <div>
      {(error || note) && <p class="banner error" role="alert">{error || note}</p>}
      <table class="table"><thead><tr><th>Name</th><th>Transport</th><th>Permission</th><th>Target</th><th /></tr></thead>
        <tbody>{(list?.servers ?? []).map((s) => (
          <tr><td>{s.name}</td><td>{s.transport}</td><td>{s.permission || "auto"}</td><td class="mono">{s.url || [s.command, ...(s.args ?? [])].join(" ")}</td>
            <td><button onClick={async () => setTests({ ...tests, [s.name]: await agents.testMCP(agent, s.name) })}>Test</button>{" "}
              <button onClick={async () => { await agents.deleteMCP(agent, s.name); reload(); }}>Remove</button>
              {tests[s.name] && <span class="small" data-testid={`mcp-test-${s.name}`}>{tests[s.name].ok ? ` ok, ${tests[s.name].latency_ms} ms: ${(tests[s.name].tools ?? []).join(", ")}` : ` failed: ${tests[s.name].message}`}</span>}</td></tr>
        ))}</tbody></table>
      <form class="form" onSubmit={add} aria-label="Add MCP server">
        <label>Name <input required value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} /></label>
        <label>Transport <select value={form.transport} onChange={(e) => setForm({ ...form, transport: e.currentTarget.value })}><option>stdio</option><option>http</option><option>sse</option></select></label>
        <label>{form.transport === "stdio" ? "Command" : "URL"} <input required value={form.target} onInput={(e) => setForm({ ...form, target: e.currentTarget.value })} /></label>
        {form.transport === "stdio" && <label>Arguments <input value={form.args} onInput={(e) => setForm({ ...form, args: e.currentTarget.value })} /></label>}
        <label>Permission <select value={form.permission} onChange={(e) => setForm({ ...form, permission: e.currentTarget.value })}><option>auto</option><option>r</option><option>rw</option></select></label>
        <button class="primary" type="submit">Add</button>
      </form>
    </div>
  );
}

function SkillsTab({ agent }: { agent: string }) {
  const [list, reload, error] = useLoad(() => agents.skills(agent), [agent]);
  const [note, setNote] = useState("");
  const [library, setLibrary] = useState("");
  const install = async (e: Event) => {
    const f = (e.currentTarget as HTMLInputElement).files?.[0];
    if (!f) return;
    try { await agents.installSkill(agent, await toBase64(f)); setNote(""); reload(); } catch (err) { setNote((err as Error).message); }
  };
  return (
    <div>
      {(error || note) && <p class="banner error" role="alert">{error || note}</p>}
      <table class="table"><thead><tr><th>Skill</th><th>Description</th><th>Enabled</th><th /></tr></thead>
        <tbody>{(list?.skills ?? []).map((s: SkillInfo) => (
          <tr><td>{s.name}</td><td>{s.description}</td>
            <td><input type="checkbox" aria-label={`enable ${s.name}`} checked={!!s.enabled} onChange={async (e) => { await agents.enableSkill(agent, s.name, e.currentTarget.checked); reload(); }} /></td>
            <td><button onClick={async () => { await agents.removeSkill(agent, s.name); reload(); }}>Remove</button></td></tr>
        ))}</tbody></table>
      <label>Install from a .tar.gz <input type="file" aria-label="Skill archive" accept=".tar.gz,.tgz,application/gzip" onChange={install} /></label>
      <form class="form inline" aria-label="Install from the server's library" onSubmit={async (e) => {
        e.preventDefault();
        try { await agents.installLibrarySkill(agent, library.trim()); setLibrary(""); setNote(""); reload(); } catch (err) { setNote((err as Error).message); }
      }}>
        <input aria-label="Library skill" placeholder="a skill of the server's skills/ directory" value={library} onInput={(e) => setLibrary(e.currentTarget.value)} required />
        <button type="submit">Install from the library</button>
      </form>
    </div>
  );
}

function MemoryTab({ agent }: { agent: string }) {
  const [scopes, , error] = useLoad(() => agents.scopes(agent), [agent]);
  const [scope, setScope] = useState("user");
  const [files, reloadFiles] = useLoad(() => agents.memoryFiles(agent, scope), [agent, scope]);
  const [open, setOpen] = useState<{ name: string; content: string; version: string }>();
  const [note, setNote] = useState("");
  const [doc, setDoc] = useState("");
  const [mode, setMode] = useState("skip");
  const [newFile, setNewFile] = useState("");
  const act = async (f: () => Promise<unknown>) => { try { await f(); setNote(""); reloadFiles(); } catch (e) { setNote((e as Error).message); } };
  return (
    <div>
      {(error || note) && <p class="banner error" role="alert">{error || note}</p>}
      <label>Scope <select aria-label="Scope" value={scope} onChange={(e) => { setScope(e.currentTarget.value); setOpen(undefined); }}>
        {(scopes?.scopes ?? [{ key: "user" }]).map((s: MemoryScope) => <option value={s.key}>{s.key}{s.workspace ? ` (${s.workspace})` : ""}</option>)}</select></label>
      <table class="table"><thead><tr><th>File</th><th>Description</th><th /></tr></thead>
        <tbody>{(files?.files ?? []).map((f: MemoryFile) => (
          <tr><td><button class="link" onClick={async () => { const r = await agents.memoryFile(agent, scope, f.name); setOpen({ name: f.name, content: r.content ?? "", version: r.version ?? "0" }); }}>{f.name}</button></td>
            <td>{f.front_matter?.description}</td>
            <td><button onClick={() => act(() => agents.deleteMemoryFile(agent, scope, f.name))}>Delete</button></td></tr>
        ))}</tbody></table>
      <form class="form inline" aria-label="New memory file" onSubmit={(e) => { e.preventDefault(); setOpen({ name: newFile.trim(), content: "", version: "0" }); setNewFile(""); }}>
        <input aria-label="New memory file name" placeholder="topic.md" value={newFile} onInput={(e) => setNewFile(e.currentTarget.value)} required />
        <button type="submit">New file</button>
      </form>
      {open && <div class="form">
        <label>{open.name}<textarea aria-label={`memory ${open.name}`} rows={10} value={open.content} onInput={(e) => setOpen({ ...open, content: e.currentTarget.value })} /></label>
        <button class="primary" onClick={() => act(async () => { await agents.putMemoryFile(agent, scope, open.name, open.content, open.version); setOpen(undefined); })}>Save</button>
      </div>}
      <div class="form">
        <button onClick={async () => setDoc((await agents.exportMemory(agent, scope)).document ?? "")}>Export</button>
        <label>Document <textarea aria-label="Memory document" rows={6} class="mono" value={doc} onInput={(e) => setDoc(e.currentTarget.value)} /></label>
        <label>Mode <select value={mode} onChange={(e) => setMode(e.currentTarget.value)}><option>skip</option><option>overwrite</option><option>replace</option></select></label>
        <button onClick={() => act(() => agents.importMemory(agent, scope, doc, mode, mode === "skip" || confirm(`Import with ${mode}? Files will be overwritten or deleted.`)))}>Import</button>
      </div>
    </div>
  );
}

function VaultTab({ agent }: { agent: string }) {
  const [list, reload, error] = useLoad(() => agents.vault(agent), [agent]);
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [note, setNote] = useState("");
  const set = async (e: Event) => {
    e.preventDefault();
    try { await agents.setVault(agent, name, value); setName(""); setValue(""); setNote(""); reload(); } catch (err) { setNote((err as Error).message); }
  };
  return (
    <div>
      {(error || note) && <p class="banner error" role="alert">{error || note}</p>}
      <table class="table"><thead><tr><th>Name</th><th>Value</th><th /></tr></thead>
        <tbody>{(list?.names ?? []).map((n) => (
          <tr><td class="mono">{n}</td><td aria-label={`value of ${n}`}>••••••••</td><td><button onClick={async () => { await agents.deleteVault(agent, n); reload(); }}>Delete</button></td></tr>
        ))}</tbody></table>
      <form class="form inline" onSubmit={set} aria-label="Set vault value">
        <input aria-label="Vault name" required placeholder="NAME" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <input aria-label="Vault value" required type="password" autocomplete="off" placeholder="value" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
        <button class="primary" type="submit">Set</button>
      </form>
    </div>
  );
}

/** ModelTab sets the agent's default model, the one a session created
 * without a model runs on; the engine accepts only a provider route of
 * the project. */
function ModelTab({ agent }: { agent: string }) {
  const [model, setModel] = useState("");
  const [known, setKnown] = useState<ModelInfo[]>([]);
  const [note, setNote] = useState<{ ok: boolean; text: string }>();
  useEffect(() => {
    // What was typed before the agent's model arrived is kept: the answer
    // would otherwise overwrite it, and Save would store the old model.
    setModel("");
    agents.model(agent).then((r) => setModel((typed) => typed || (r.model?.provider ? `${r.model.provider}/${r.model.model_id}` : ""))).catch((e) => setNote({ ok: false, text: e.message }));
    api.models().then((r) => setKnown((r.models ?? []).filter((m) => m.tools))).catch(() => setKnown([]));
  }, [agent]);
  const split = () => { const i = model.indexOf("/"); return [model.slice(0, i), model.slice(i + 1)] as const; };
  return (
    <div class="form">
      <label>Default model <input aria-label="Default model" list="agent-models" placeholder="provider/model-id" value={model} onInput={(e) => setModel(e.currentTarget.value)} /></label>
      <datalist id="agent-models">{known.map((m) => <option value={`${m.model.provider}/${m.model.model_id}`} />)}</datalist>
      {note && <p class={`banner ${note.ok ? "" : "error"}`} role={note.ok ? "status" : "alert"}>{note.text}</p>}
      <div>
        <button class="primary" onClick={async () => { try { await agents.setModel(agent, ...split()); setNote({ ok: true, text: "Saved." }); } catch (e) { setNote({ ok: false, text: (e as Error).message }); } }}>Save</button>{" "}
        <button onClick={async () => { const r = await agents.testModel(...split()); setNote({ ok: !!r.ok, text: r.ok ? `ok in ${r.latency_ms} ms` : `failed: ${r.message}` }); }}>Test</button>
      </div>
    </div>
  );
}
