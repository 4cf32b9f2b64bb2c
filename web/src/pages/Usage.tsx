import { useEffect, useState } from "preact/hooks";
import { api, num, type Session } from "../api";
import { ago, cost, tokens } from "../format";
import { onLink } from "../router";

interface Row {
  key: string;
  sessions: number;
  total: number;
  output: number;
  cached: number;
  /** Unset while no session of the row has a known price. */
  cost?: number;
  /** Some session's counts lack a request the provider did not report. */
  unreported: boolean;
}

function row(key: string): Row {
  return { key, sessions: 0, total: 0, output: 0, cached: 0, unreported: false };
}

function add(r: Row, s: Session) {
  r.sessions++;
  r.total += num(s.usage?.total);
  r.output += num(s.usage?.output);
  r.cached += num(s.usage?.cache_read);
  if (s.usage?.cost_usd !== undefined) r.cost = (r.cost ?? 0) + s.usage.cost_usd;
  r.unreported ||= !!s.usage?.unreported;
}

const when = (iso: string | undefined) => {
  const a = ago(iso);
  return a === "now" ? "just now" : a ? `${a} ago` : "";
};

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

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
  const total = row("all");
  const perSession = (sessions ?? []).map((s) => {
    const m = `${s.model?.provider}/${s.model?.model_id}`;
    if (!byModel.has(m)) byModel.set(m, row(m));
    add(byModel.get(m)!, s);
    add(total, s);
    const r = row(s.session_id);
    add(r, s);
    return { s, r, model: m };
  });
  const figures = (r: Row) => <>
    <td>{tokens(r.total)}{r.unreported ? " *" : ""}</td><td>{tokens(r.output)}</td><td>{tokens(r.cached)}</td>
    <td>{r.cost === undefined ? "—" : cost(r.cost)}</td>
  </>;
  const data = (r: Row) => ({ "data-key": r.key, "data-total": r.total, "data-cost": r.cost ?? "" });
  return (
    <section class="page wide" aria-label="Usage">
      <h1>Usage</h1>
      {error && <p class="banner error" role="alert">{error}</p>}
      {!sessions && !error && <p class="muted">Loading…</p>}
      {sessions && <>
        <p data-testid="usage-total" {...data(total)}>{plural(total.sessions, "session", "sessions")} · {tokens(total.total)} tokens
          {total.cost !== undefined ? ` · ${cost(total.cost)}` : " · cost unknown (no prices for these models)"}</p>
        <h2>Per model</h2>
        <div class="table-scroll">
          <table>
            <thead><tr><th>Model</th><th>Sessions</th><th>Tokens</th><th>Output</th><th>Cached</th><th>Cost</th></tr></thead>
            <tbody>{[...byModel.values()].map((r) => (
              <tr data-testid="usage-model" {...data(r)}><td>{r.key}</td><td>{r.sessions}</td>{figures(r)}</tr>
            ))}</tbody>
          </table>
        </div>
        <h2>Per session</h2>
        <div class="table-scroll">
          <table>
            <thead><tr><th>Session</th><th>Model</th><th>Updated</th><th>Tokens</th><th>Output</th><th>Cached</th><th>Cost</th></tr></thead>
            <tbody>{perSession.map(({ s, r, model }) => (
              <tr data-testid="usage-session" {...data(r)}>
                <td><a href={`/sessions/${encodeURIComponent(s.session_id)}`} onClick={onLink}>{s.title || s.session_id}</a></td>
                <td>{model}</td><td>{when(s.updated_at)}</td>{figures(r)}
              </tr>
            ))}</tbody>
          </table>
        </div>
        {total.unreported && <p class="muted small">* Some requests' usage was not reported by the provider; those counts are missing.</p>}
      </>}
    </section>
  );
}
