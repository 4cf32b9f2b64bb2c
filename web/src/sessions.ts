// The live session list: GET /api/events (WatchSessions) as an
// EventSource. Each (re)connection starts with a snapshot, which replaces
// the list once it is complete; changes and deletions follow.
import { useEffect, useState } from "preact/hooks";
import type { SessionChange } from "./api";

export interface SessionList {
  rows: SessionChange[];
  loaded: boolean;
  connected: boolean;
}

function sorted(m: Map<string, SessionChange>): SessionChange[] {
  return [...m.values()].sort((a, b) => (b.session.created_at ?? "").localeCompare(a.session.created_at ?? ""));
}

export function useSessionList(enabled: boolean): SessionList {
  const [list, setList] = useState<SessionList>({ rows: [], loaded: false, connected: false });
  useEffect(() => {
    if (!enabled) return;
    let live = new Map<string, SessionChange>();
    let snapshot: Map<string, SessionChange> | null = null;
    let loaded = false;
    const es = new EventSource("/api/events");
    const publish = (connected: boolean) => setList({ rows: sorted(live), loaded, connected });
    es.onopen = () => {
      snapshot = new Map();
    };
    es.addEventListener("session", (e) => {
      const c = JSON.parse((e as MessageEvent).data) as SessionChange;
      if (snapshot) snapshot.set(c.session.session_id, c);
      else {
        live.set(c.session.session_id, c);
        publish(true);
      }
    });
    es.addEventListener("session_deleted", (e) => {
      const { session_id } = JSON.parse((e as MessageEvent).data);
      snapshot?.delete(session_id);
      live.delete(session_id);
      publish(true);
    });
    es.addEventListener("snapshot_end", () => {
      if (snapshot) live = snapshot;
      snapshot = null;
      loaded = true;
      publish(true);
    });
    es.onerror = () => publish(false);
    return () => es.close();
  }, [enabled]);
  return list;
}
