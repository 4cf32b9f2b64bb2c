// The sidebar's session list: pinned first, then newest; active or
// archived; as one list or grouped under each session's agent; the active
// sessions a schedule started kept apart in a Scheduled folder at the end
// (they are not the person's own
// conversations, and a frequent schedule would bury those); searched by
// title, id, workspace and last message; rename, pin and archive from a
// row's menu (its ⋯ button, a right click, or Shift+F10 on the row). It
// renders only the rows in view (fixed-height rows in a scrolled box), so
// ten thousand sessions cost as much as thirty, and it pages older
// sessions in on demand.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, type Session, type SessionChange } from "../api";
import { ago, stateWord } from "../format";
import { onLink } from "../router";

/** ROW is a row's height in pixels; the virtual list places rows by it. */
const ROW = 34;
/** OVERSCAN rows are rendered above and below the view, so a quick
 * scroll shows rows rather than blank space. */
const OVERSCAN = 8;

export type Shelf = "active" | "archived";

/** Grouping of the list: none, or under each session's agent. */
export type Grouping = "none" | "agent";

/** ListOptions are the sidebar's choices remembered per project: the
 * grouping, and whether the Scheduled folder is open. */
export interface ListOptions {
  grouping: Grouping;
  scheduledOpen: boolean;
}

/** listOptionsKey is where the browser keeps a project's list options
 * ("" is the switcher's every-project view). */
export const listOptionsKey = (project: string) => `penguin.list.${project || "*"}`;

/** loadListOptions reads a project's list options; anything unreadable
 * reads as the defaults (one list, the folder closed). */
export function loadListOptions(project: string): ListOptions {
  let o: Partial<ListOptions> = {};
  try {
    o = JSON.parse(localStorage.getItem(listOptionsKey(project)) ?? "{}") ?? {};
  } catch {
    // A value another version wrote: the defaults.
  }
  return { grouping: o.grouping === "agent" ? "agent" : "none", scheduledOpen: o.scheduledOpen === true };
}

/** saveListOptions remembers a project's list options. */
export function saveListOptions(project: string, o: ListOptions) {
  localStorage.setItem(listOptionsKey(project), JSON.stringify(o));
}

/** NO_AGENT heads the sessions of an agent directory outside the
 * engine's agents. */
export const NO_AGENT = "other agents";

/** SCHEDULED names the folder of the sessions schedules started. */
export const SCHEDULED = "Scheduled";

/** Entry is one fixed-height line of the list: a session, the heading of
 * an agent's group, or the Scheduled folder's header. A row or group in
 * the folder says so (folder), which keeps their keys apart from the
 * main list's and leaves pinning out of the folder's rows. */
export type Entry =
  | { kind: "row"; row: SessionChange; folder?: boolean }
  | { kind: "group"; agent: string; count: number; folder?: boolean }
  | { kind: "folder"; count: number; open: boolean };

/** scheduled says whether a schedule started the session. */
export const scheduled = (r: SessionChange) => r.session.source === "schedule";

/** lay lays ordered rows out as lines: as they are, or grouped under
 * their agents (agents by name, each group in the rows' order). */
function lay(rows: SessionChange[], grouping: Grouping, folder: boolean): Entry[] {
  const mark = folder ? { folder: true } : {};
  if (grouping === "none") return rows.map((row) => ({ kind: "row", row, ...mark }));
  const groups = new Map<string, SessionChange[]>();
  for (const r of rows) {
    const agent = r.session.agent || NO_AGENT;
    groups.set(agent, [...(groups.get(agent) ?? []), r]);
  }
  const out: Entry[] = [];
  for (const agent of [...groups.keys()].sort((a, b) => Number(a === NO_AGENT) - Number(b === NO_AGENT) || a.localeCompare(b))) {
    const rs = groups.get(agent)!;
    out.push({ kind: "group", agent, count: rs.length, ...mark });
    for (const row of rs) out.push({ kind: "row", row, ...mark });
  }
  return out;
}

/** entries lays ordered rows out as the list's lines. With a folder
 * (the active shelf), the scheduled sessions leave the main list for the
 * Scheduled folder at its end, grouped the same way inside it, its rows
 * shown only while it is open; without one (the archived shelf) every
 * row is in the one list. */
export function entries(rows: SessionChange[], grouping: Grouping, folder?: { open: boolean }): Entry[] {
  if (!folder) return lay(rows, grouping, false);
  const inFolder = rows.filter(scheduled);
  const out = lay(rows.filter((r) => !scheduled(r)), grouping, false);
  if (!inFolder.length) return out;
  out.push({ kind: "folder", count: inFolder.length, open: folder.open });
  if (folder.open) out.push(...lay(inFolder, grouping, true));
  return out;
}

/** order sorts pinned sessions first, then the newest. */
export function order(rows: SessionChange[]): SessionChange[] {
  return rows.slice().sort((a, b) => Number(!!b.session.pinned) - Number(!!a.session.pinned) ||
    (b.session.created_at ?? "").localeCompare(a.session.created_at ?? ""));
}

/** matches says whether a row fits the query, by title, id, workspace or
 * last message. */
export function matches(r: SessionChange, q: string): boolean {
  if (!q) return true;
  const s = r.session;
  return [s.title, s.session_id, s.workspace, r.last_message].some((f) => (f ?? "").toLowerCase().includes(q));
}

interface Props {
  rows: SessionChange[];
  loaded: boolean;
  current: string;
  query: string;
  shelf: Shelf;
  grouping: Grouping;
  /** scheduledOpen shows the Scheduled folder's rows. */
  scheduledOpen: boolean;
  /** toggleScheduled opens or closes the Scheduled folder. */
  toggleScheduled: () => void;
  /** more pages in older sessions; undefined when there are none. */
  more?: () => Promise<void>;
  /** changed reports a session as the server now has it. */
  changed: (s: Session) => void;
}

export function SessionList({ rows, loaded, current, query, shelf, grouping, scheduledOpen, toggleScheduled, more, changed }: Props) {
  const q = query.trim().toLowerCase();
  const shown = useMemo(() => order(rows.filter((r) => !!r.session.archived === (shelf === "archived") && matches(r, q))), [rows, q, shelf]);
  // A search looks in the folder too, so it opens while one is typed.
  const lines = useMemo(() => entries(shown, grouping, shelf === "active" ? { open: scheduledOpen || !!q } : undefined),
    [shown, grouping, shelf, scheduledOpen, q]);
  const box = useRef<HTMLDivElement>(null);
  const [view, setView] = useState({ top: 0, height: 800 });
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setView({ top: el.scrollTop, height: el.clientHeight });
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const [menu, setMenu] = useState<{ id: string; x: number; y: number }>();
  const [renaming, setRenaming] = useState("");
  const [error, setError] = useState("");
  const update = async (id: string, body: Parameters<typeof api.updateSession>[1]) => {
    setError("");
    try {
      changed(await api.updateSession(id, body));
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const first = Math.max(0, Math.floor(view.top / ROW) - OVERSCAN);
  const last = Math.min(lines.length, Math.ceil((view.top + view.height) / ROW) + OVERSCAN);
  const open = (id: string, el: HTMLElement) => {
    const r = el.getBoundingClientRect();
    setMenu({ id, x: r.left + 24, y: r.bottom });
  };
  const target = menu && shown.find((r) => r.session.session_id === menu.id);
  return (
    <>
      {error && <div class="banner error small" role="alert">{error}</div>}
      <div class="session-list" ref={box} data-testid="session-list"
        onScroll={(e) => { setView({ top: e.currentTarget.scrollTop, height: e.currentTarget.clientHeight }); setMenu(undefined); }}>
        {!loaded && <div class="muted small">Loading…</div>}
        {loaded && !shown.length && <div class="muted small">{q ? "No session matches" : shelf === "archived" ? "No archived sessions" : "No sessions"}</div>}
        <div role="list" aria-label={shelf === "archived" ? "Archived sessions" : "Sessions"} style={{ height: `${lines.length * ROW}px`, position: "relative" }}>
          {lines.slice(first, last).map((line, i) => {
            if (line.kind === "folder") {
              return (
                <div role="listitem" key="folder" class="session-group session-folder" style={{ top: `${(first + i) * ROW}px` }}>
                  <button class="link" aria-expanded={line.open} data-testid="scheduled-folder" onClick={toggleScheduled}
                    title="Sessions your schedules started">
                    <span aria-hidden="true">{line.open ? "▾" : "▸"}</span> {SCHEDULED}
                  </button>
                  <span class="muted small">{line.count}</span>
                </div>
              );
            }
            if (line.kind === "group") {
              return (
                <div role="listitem" key={`group:${line.folder ? "scheduled:" : ""}${line.agent}`} class={`session-group ${line.folder ? "in-folder" : ""}`}
                  style={{ top: `${(first + i) * ROW}px` }} data-testid="session-group">
                  <span role="heading" aria-level={3} class="name">{line.agent}</span>
                  <span class="muted small">{line.count}</span>
                </div>
              );
            }
            const r = line.row;
            const s = r.session;
            const id = s.session_id;
            const word = stateWord(s.state, r.last_status);
            return (
              <div role="listitem" key={id} class={`session-row ${id === current ? "active" : ""} ${line.folder ? "in-folder" : ""}`} style={{ top: `${(first + i) * ROW}px` }}
                onContextMenu={(e) => { e.preventDefault(); setMenu({ id, x: e.clientX, y: e.clientY }); }}
                onKeyDown={(e) => { if (e.key === "F10" && e.shiftKey) { e.preventDefault(); open(id, e.currentTarget as HTMLElement); } }}>
                {renaming === id ? (
                  <RenameBox title={s.title || id} onDone={(t) => { setRenaming(""); if (t !== undefined) void update(id, { title: t }); }} />
                ) : (
                  <>
                    <a href={`/sessions/${encodeURIComponent(id)}`} onClick={onLink} data-session={id} title={r.last_message || id}
                      aria-current={id === current ? "page" : undefined}>
                      <span class={`dot state-${word.replace(" ", "-")}`} aria-hidden="true" />
                      {s.pinned && <span class="pin" aria-label="pinned" title="Pinned">📌</span>}
                      {s.source === "schedule" && <span class="scheduled" aria-label="scheduled" title="Started by a schedule">↻</span>}
                      <span class="title">{s.title || id}</span>
                      <span class="muted small state-word" data-testid="session-state">{word === "idle" ? ago(s.updated_at) : word}</span>
                    </a>
                    <button class="icon row-menu" aria-label={`Actions for ${s.title || id}`} aria-haspopup="menu" data-testid="row-menu"
                      onClick={(e) => open(id, e.currentTarget as HTMLElement)}>⋯</button>
                  </>
                )}
              </div>
            );
          })}
        </div>
        {more && <button class="link small more" onClick={() => void more().catch((e) => setError(e.message))}>Load older sessions</button>}
      </div>
      {menu && target && (
        <RowMenu x={menu.x} y={menu.y} session={target.session} pinnable={!target.session.archived && (!scheduled(target) || !!target.session.pinned)} onClose={() => setMenu(undefined)}
          onRename={() => { setRenaming(target.session.session_id); setMenu(undefined); }}
          onUpdate={(body) => { setMenu(undefined); void update(target.session.session_id, body); }} />
      )}
    </>
  );
}

/** RowMenu is a row's actions; pinning only in the active list, as the
 * archived and scheduled sessions sort in folders of their own (a
 * scheduled session pinned through the API can still be unpinned). */
function RowMenu({ x, y, session, pinnable, onClose, onRename, onUpdate }: {
  x: number; y: number; session: Session; pinnable: boolean; onClose: () => void; onRename: () => void;
  onUpdate: (b: { pinned?: boolean; archived?: boolean }) => void;
}) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    ref.current?.querySelector("button")?.focus();
    const away = (e: MouseEvent) => { if (!ref.current?.contains(e.target as Node)) onClose(); };
    addEventListener("mousedown", away);
    return () => removeEventListener("mousedown", away);
  }, []);
  const keys = (e: KeyboardEvent) => {
    const items = [...(ref.current?.querySelectorAll("button") ?? [])];
    const at = items.indexOf(document.activeElement as HTMLButtonElement);
    if (e.key === "Escape") onClose();
    else if (e.key === "ArrowDown") items[(at + 1) % items.length]?.focus();
    else if (e.key === "ArrowUp") items[(at - 1 + items.length) % items.length]?.focus();
    else return;
    e.preventDefault();
  };
  return (
    <div class="menu" role="menu" ref={ref} style={{ left: `${Math.min(x, innerWidth - 180)}px`, top: `${Math.min(y, innerHeight - 140)}px` }} onKeyDown={keys}>
      {pinnable && <button role="menuitem" onClick={() => onUpdate({ pinned: !session.pinned })}>{session.pinned ? "Unpin" : "Pin"}</button>}
      <button role="menuitem" onClick={onRename}>Rename</button>
      <button role="menuitem" onClick={() => onUpdate({ archived: !session.archived, ...(session.archived ? {} : { pinned: false }) })}>{session.archived ? "Unarchive" : "Archive"}</button>
    </div>
  );
}

/** RenameBox edits a title in place: Enter saves, Escape or leaving
 * cancels. */
export function RenameBox({ title, onDone }: { title: string; onDone: (title?: string) => void }) {
  const [text, setText] = useState(title);
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => { ref.current?.focus(); ref.current?.select(); }, []);
  return (
    <input ref={ref} class="rename" aria-label="New title" value={text} maxLength={200}
      onInput={(e) => setText(e.currentTarget.value)}
      onBlur={() => onDone()}
      onKeyDown={(e) => {
        if (e.key === "Enter") { e.preventDefault(); onDone(text.trim() ? text : undefined); }
        if (e.key === "Escape") { e.preventDefault(); onDone(); }
      }} />
  );
}
