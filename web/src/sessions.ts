// The live session list: GET /api/events (WatchSessions) as an
// EventSource. Each (re)connection starts with a snapshot of the newest
// sessions, which replaces the list once it is complete; changes and
// deletions follow. Older sessions are paged in from GET /api/sessions on
// demand; the live ones take precedence over a page's copy.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, type Session, type SessionChange } from "./api";

/** SNAPSHOT is how many of the newest sessions the live list holds. */
const SNAPSHOT = 500;

export interface SessionList {
  rows: SessionChange[];
  loaded: boolean;
  connected: boolean;
  /** more loads the next page of older sessions; undefined when none is left. */
  more?: () => Promise<void>;
  /** changed puts a session as the server answered a change of it. */
  changed: (s: Session) => void;
}

export function useSessionList(enabled: boolean): SessionList {
  const [state, setState] = useState<{ rows: SessionChange[]; loaded: boolean; connected: boolean; done: boolean }>({ rows: [], loaded: false, connected: false, done: false });
  const live = useRef(new Map<string, SessionChange>());
  const older = useRef(new Map<string, SessionChange>());
  const token = useRef<string | undefined>("");
  // Changes are published once per frame: a burst of them (a reconnect's
  // thousands of rows) costs one copy and one render, not one per row.
  const pending = useRef<Partial<typeof state> | null>(null);
  const publish = (patch: Partial<typeof state> = {}) => {
    const first = pending.current === null;
    pending.current = { ...pending.current, ...patch };
    if (!first) return;
    requestAnimationFrame(() => {
      const p = pending.current ?? {};
      pending.current = null;
      setState((st) => {
        const all = new Map(older.current);
        for (const [id, c] of live.current) all.set(id, c);
        return { ...st, ...p, rows: [...all.values()] };
      });
    });
  };
  useEffect(() => {
    if (!enabled) return;
    // Rows before the first open (a body that arrived at once) belong to
    // the snapshot too.
    let snapshot: Map<string, SessionChange> | null = new Map();
    const es = new EventSource(`/api/events?snapshot_size=${SNAPSHOT}`);
    es.onopen = () => {
      snapshot = new Map();
    };
    es.addEventListener("session", (e) => {
      const c = JSON.parse((e as MessageEvent).data) as SessionChange;
      if (snapshot) snapshot.set(c.session.session_id, c);
      else {
        live.current.set(c.session.session_id, c);
        publish({ connected: true });
      }
    });
    es.addEventListener("session_deleted", (e) => {
      const { session_id } = JSON.parse((e as MessageEvent).data);
      snapshot?.delete(session_id);
      live.current.delete(session_id);
      older.current.delete(session_id);
      publish({ connected: true });
    });
    es.addEventListener("snapshot_end", () => {
      if (snapshot) live.current = snapshot;
      const full = snapshot !== null && snapshot.size >= SNAPSHOT;
      snapshot = null;
      publish({ loaded: true, connected: true, done: !full && !older.current.size });
    });
    es.onerror = () => publish({ connected: false });
    return () => es.close();
  }, [enabled]);
  const more = async () => {
    if (token.current === undefined) return;
    const page = await api.listSessions(token.current);
    for (const s of page.sessions ?? []) {
      if (!live.current.has(s.session_id)) older.current.set(s.session_id, { session: s });
    }
    token.current = page.next_page_token || undefined;
    publish({ done: token.current === undefined });
  };
  const changed = (s: Session) => {
    const into = live.current.has(s.session_id) || !older.current.has(s.session_id) ? live.current : older.current;
    const was = into.get(s.session_id);
    into.set(s.session_id, { ...was, session: { ...was?.session, ...s } });
    publish();
  };
  return { rows: state.rows, loaded: state.loaded, connected: state.connected, more: state.done ? undefined : more, changed };
}
