import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, changePage, type TurnChange, type WorkspaceEntry } from "../api";
import { highlight } from "../markdown";
import type { WorkspaceFile } from "../omni/types";

/** Workspace is the session's workspace panel: the turns' changes of its
 * files, each with its diff and an Undo or Redo button, and a read-only
 * tree of the files (what git would not ignore). It reads both again
 * when a change arrives on the stream (version) or a task ends. */
export function Workspace({ id, running, version }: { id: string; running: boolean; version: number }) {
  const [changes, setChanges] = useState<TurnChange[]>();
  const [error, setError] = useState("");
  const [note, setNote] = useState("");
  const [conflict, setConflict] = useState<{ seq: string; redo: boolean; message: string }>();
  const [treeVersion, setTreeVersion] = useState(0);
  const load = () => api.changes(id).then((r) => { setChanges(r.changes ?? []); setError(""); }).catch((e: Error) => setError(e.message));
  useEffect(() => { void load(); }, [id, running, version]);

  const restore = async (seq: string, redo: boolean, force = false) => {
    setNote("");
    setConflict(undefined);
    try {
      const r = await api.undoChange(id, seq, redo, force);
      setNote(`${redo ? "Redid" : "Undid"} change #${seq}.` + (r.overwritten?.length ? ` Overwrote ${r.overwritten.join(", ")} (kept in the checkpoint before).` : ""));
    } catch (e) {
      const err = e as Error;
      if (err instanceof ApiError && err.status === 409 && !force && /changed since/.test(err.message)) setConflict({ seq, redo, message: err.message });
      else setError(err.message);
    }
    void load();
    setTreeVersion((v) => v + 1);
  };

  return (
    <section id="workspace" class="workspace" aria-label="Workspace" data-testid="workspace">
      <div class="workspace-changes">
        <h2 class="small">Changes by turn</h2>
        {error && <div class="banner error" role="alert">{error}</div>}
        {note && <div class="muted small" role="status" data-testid="undo-note">{note}</div>}
        {conflict && (
          <div class="banner warn" role="alert" data-testid="undo-conflict">
            {conflict.message}{" "}
            <button class="danger small" onClick={() => restore(conflict.seq, conflict.redo, true)}>{conflict.redo ? "Redo" : "Undo"} anyway</button>
          </div>
        )}
        {changes && !changes.length && <p class="muted small">No turn of this session has changed the workspace yet.</p>}
        {[...(changes ?? [])].reverse().map((c) => <Change key={c.sequence} id={id} c={c} running={running} onRestore={restore} />)}
      </div>
      <div class="workspace-files">
        <h2 class="small">Files</h2>
        <Tree id={id} version={version + treeVersion} />
      </div>
    </section>
  );
}

/** Change is one turn's change: its files, its diff on demand, Undo or
 * Redo. The list shows the first files the changes' list carries; more
 * come a page at a time (with their diffs), so that a change of tens of
 * thousands of files never renders whole. */
function Change({ id, c, running, onRestore }: { id: string; c: TurnChange; running: boolean; onRestore: (seq: string, redo: boolean) => void }) {
  const [loaded, setLoaded] = useState<WorkspaceFile[]>();
  const [next, setNext] = useState("");
  const [open, setOpen] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => { setLoaded(undefined); setNext(""); setOpen(false); }, [c.undone]);
  const listed = c.change?.files ?? [];
  const total = c.file_count ?? listed.length;
  /** more loads the next page of files with their diffs. */
  const more = async () => {
    setBusy(true);
    try {
      const r = await api.changeDiff(id, c.sequence, loaded ? next : "");
      setLoaded([...(loaded ?? []), ...(r.change?.change?.files ?? [])]);
      setNext(r.next_page_token ?? "");
      setError("");
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const toggle = async () => {
    setOpen(!open);
    if (!open && !loaded) await more();
  };
  const files = loaded ?? listed;
  const left = loaded ? (next ? Math.max(total - loaded.length, 0) : 0) : total - listed.length;
  const incomplete = c.change?.incomplete;
  return (
    <article class={`change${c.undone ? " undone" : ""}`} data-testid="change" data-seq={c.sequence}>
      <div class="row">
        <span class="small"><strong>#{c.sequence}</strong> {c.prompt ? `“${c.prompt}”` : ""} {c.undone && <span class="badge" data-testid="undone">undone</span>}</span>
        <span class="spacer" />
        <button class="small" aria-expanded={open} onClick={toggle}>{open ? "Hide diff" : "Diff"}</button>
        <button class="small" disabled={running || !!incomplete} title={running ? "Wait until the task ends" : incomplete ? `Too large to undo: ${incomplete}` : undefined}
          onClick={() => onRestore(c.sequence, !!c.undone)}>{c.undone ? "Redo" : "Undo"}</button>
      </div>
      <ul class="change-files small" data-testid="change-files">
        {files.map((f) => (
          <li><span class={`mark mark-${mark(f.kind)}`} title={kindWord(f.kind)}>{mark(f.kind)}</span> <code>{f.path}</code>{" "}
            {f.too_large ? <span class="muted">too large to undo</span> : f.binary ? <span class="muted">binary</span>
              : <span class="muted">+{f.added_lines ?? 0} −{f.removed_lines ?? 0}</span>}</li>
        ))}
      </ul>
      {left > 0 && (
        <div class="row small">
          <span class="muted" data-testid="files-left">{left} more file{left === 1 ? "" : "s"} of {total}</span>{" "}
          <button class="link small" disabled={busy} onClick={more} data-testid="more-files">Show {Math.min(left, changePage)} more</button>
        </div>
      )}
      {error && <div class="banner error" role="alert">{error}</div>}
      {open && loaded && loaded.map((f) => f.diff ? <UnifiedDiff text={f.diff} /> : null)}
    </article>
  );
}

/** mark is a change's letter, as git shows it. */
function mark(kind?: string): string {
  if (kind?.endsWith("ADDED") || kind === "added") return "A";
  if (kind?.endsWith("DELETED") || kind === "deleted") return "D";
  return "M";
}

function kindWord(kind?: string): string {
  return { A: "added", D: "deleted", M: "modified" }[mark(kind)]!;
}

/** UnifiedDiff shows a unified diff with its lines marked. */
function UnifiedDiff({ text }: { text: string }) {
  return (
    <pre class="diff unified" data-testid="change-diff">
      {text.replace(/\n$/, "").split("\n").map((l) => {
        const cls = l.startsWith("+++") || l.startsWith("---") ? "hdr" : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "ctx";
        return <div class={`line ${cls}`}>{l}</div>;
      })}
    </pre>
  );
}

/** Tree is the workspace's files, a directory read when it is opened,
 * with a read-only view of the file chosen. */
function Tree({ id, version }: { id: string; version: number }) {
  const [view, setView] = useState<{ path: string; text: string }>();
  const show = async (path: string) => {
    try {
      const f = await api.file(id, path);
      setView({ path, text: f.too_large ? `(${f.size} bytes: too large to show)` : f.binary ? "(binary file)" : f.content ?? "" });
    } catch (e) {
      setView({ path, text: (e as Error).message });
    }
  };
  useEffect(() => { if (view) void show(view.path); }, [version]);
  return (
    <div class="tree-and-view">
      <ul class="tree small" aria-label="Workspace files" data-testid="file-tree">
        <Dir id={id} dir="" version={version} onOpen={show} />
      </ul>
      {view && (
        <div class="file-view" data-testid="file-view">
          <div class="row small"><code>{view.path}</code><span class="spacer" /><button class="link small" onClick={() => setView(undefined)}>Close</button></div>
          <Preview path={view.path} text={view.text} />
        </div>
      )}
    </div>
  );
}

/** languages maps a file's extension to highlight.js's language for it
 * (one of those its common build carries). */
const languages: Record<string, string> = {
  go: "go", ts: "typescript", tsx: "typescript", js: "javascript", mjs: "javascript", jsx: "javascript", py: "python",
  sh: "bash", bash: "bash", json: "json", yaml: "yaml", yml: "yaml", md: "markdown", css: "css", html: "xml", xml: "xml",
  rs: "rust", c: "c", h: "c", cc: "cpp", cpp: "cpp", java: "java", rb: "ruby", toml: "ini", sql: "sql", proto: "protobuf",
};

/** Preview shows a file's text, highlighted by its extension with the
 * highlighter that answers' code blocks load on demand. Keyed by path
 * and text, so the highlighted nodes are made anew for every file. */
function Preview({ path, text }: { path: string; text: string }) {
  const ref = useRef<HTMLPreElement>(null);
  const lang = languages[path.split(".").pop()?.toLowerCase() ?? ""];
  useEffect(() => { if (ref.current && lang) void highlight(ref.current.parentElement!); }, [path, text, lang]);
  return (
    <pre class="pre" ref={ref} key={path + "\0" + text} data-testid="file-preview">
      <code class={lang ? `language-${lang}` : undefined}>{text}</code>
    </pre>
  );
}

/** Dir lists one directory's entries; a subdirectory is read when opened. */
function Dir({ id, dir, version, onOpen }: { id: string; dir: string; version: number; onOpen: (path: string) => void }) {
  const [entries, setEntries] = useState<WorkspaceEntry[]>();
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState("");
  useEffect(() => {
    api.files(id, dir).then((r) => { setEntries(r.entries ?? []); setTruncated(!!r.truncated); setError(""); }).catch((e: Error) => setError(e.message));
  }, [id, dir, version]);
  if (error) return <li class="muted">{error}</li>;
  if (!entries) return <li class="muted">…</li>;
  return (
    <>
      {!entries.length && !dir && <li class="muted">The workspace is empty.</li>}
      {entries.map((e) => e.dir ? <DirEntry id={id} e={e} version={version} onOpen={onOpen} /> : (
        <li data-path={e.path}>
          <button class="link" onClick={() => onOpen(e.path)}>{e.name}</button>{e.link && <span class="muted"> (link)</span>}
        </li>
      ))}
      {truncated && <li class="muted">… more entries not shown</li>}
    </>
  );
}

function DirEntry({ id, e, version, onOpen }: { id: string; e: WorkspaceEntry; version: number; onOpen: (path: string) => void }) {
  const [open, setOpen] = useState(false);
  return (
    <li data-path={e.path}>
      <button class="link" aria-expanded={open} onClick={() => setOpen(!open)}>{open ? "▾" : "▸"} {e.name}/</button>
      {open && <ul><Dir id={id} dir={e.path} version={version} onOpen={onOpen} /></ul>}
    </li>
  );
}
