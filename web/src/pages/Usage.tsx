import { useEffect, useState } from "preact/hooks";
import { api, num, type Session } from "../api";
import { cost, tokens } from "../format";
import { navigate } from "../router";

interface Row {
  key: string;
  label: string;
  sessions: number;
  total: number;
  output: number;
  cached: number;
  cost?: number;
}

function add(r: Row, s: Session) {
  r.sessions++;
  r.total += num(s.usage?.total);
  r.output += num(s.usage?.output);
  r.cached += num(s.usage?.cache_read);
  if (s.usage?.cost_usd !== undefined) r.cost = (r.cost ?? 0) + s.usage.cost_usd;
}

/** Usage lists tokens and cost per model and per session, from every
 * session's cumulative counts. */
export function Usage() {
  const [sessions, setSessions] = useState<Session[] | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    (async () => {
      const all: Session[] = [];
      let token = "";
      for (let page = 0; page < 50; page++) {
        const r = await api.listSessions(token);
        all.push(...(r.sessions ?? []));
        token = r.next_page_token ?? "";
        if (!token) break;
      }
      setSessions(all);
    })().catch((e) => setError(e.message));
  }, []);
  const byModel = new Map<string, Row>();
  const total: Row = { key: "all", label: "All sessions", sessions: 0, total: 0, output: 0, cached: 0 };
  for (const s of sessions ?? []) {
    const m = `${s.model?.provider}/${s.model?.model_id}`;
    if (!byModel.has(m)) byModel.set(m, { key: m, label: m, sessions: 0, total: 0, output: 0, cached: 0 });
    add(byModel.get(m)!, s);
    add(total, s);
  }
  const table = (rows: Row[], link: boolean) => (
    <table>
      <thead><tr><th>{link ? "Session" : "Model"}</th><th>Sessions</th><th>Tokens</th><th>Output</th><th>Cached</th><th>Cost</th></tr></thead>
      <tbody>{rows.map((r) => (
        <tr>
          <td>{link ? <a href={`/sessions/${encodeURIComponent(r.key)}`} onClick={(e) => { e.preventDefault(); navigate(`/sessions/${encodeURIComponent(r.key)}`); }}>{r.label}</a> : r.label}</td>
          <td>{r.sessions}</td><td>{tokens(r.total)}</td><td>{tokens(r.output)}</td><td>{tokens(r.cached)}</td><td>{r.cost === undefined ? "—" : cost(r.cost)}</td>
        </tr>
      ))}</tbody>
    </table>
  );
  const perSession = (sessions ?? []).map((s) => {
    const r: Row = { key: s.session_id, label: s.title || s.session_id, sessions: 0, total: 0, output: 0, cached: 0 };
    add(r, s);
    return r;
  });
  return (
    <section class="page wide" aria-label="Usage">
      <h1>Usage</h1>
      {error && <p class="banner error">{error}</p>}
      {!sessions && !error && <p class="muted">Loading…</p>}
      {sessions && <>
        <p data-testid="usage-total">{total.sessions} sessions · {tokens(total.total)} tokens{total.cost !== undefined ? ` · ${cost(total.cost)}` : " · cost unknown (no prices for these models)"}</p>
        <h2>Per model</h2>
        {table([...byModel.values()], false)}
        <h2>Per session</h2>
        {table(perSession, true)}
      </>}
    </section>
  );
}
