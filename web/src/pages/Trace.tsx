import { useEffect, useState } from "preact/hooks";
import { api, traceURL } from "../api";
import { onLink } from "../router";
import { splitContexts, type TraceContext } from "../trace";

/** Trace shows a session's trace (ExportTrace), one line per frame. A
 * compacted session has one trace per model context, as `penguin sessions
 * export` writes them: each is shown, and downloaded, on its own. */
export function Trace({ id }: { id: string }) {
  const [contexts, setContexts] = useState<TraceContext[] | null>(null);
  const [error, setError] = useState("");
  const [filter, setFilter] = useState("");
  useEffect(() => {
    api.trace(id).then((t) => setContexts(splitContexts(t))).catch((e) => setError(e.message));
  }, [id]);
  const lines = contexts?.reduce((n, c) => n + c.lines.length, 0);
  const f = filter.toLowerCase();
  return (
    <section class="page wide" aria-label="Trace">
      <div class="row">
        <h1>Trace</h1>
        <a class="button" href={`/sessions/${encodeURIComponent(id)}`} onClick={onLink}>Back to the chat</a>
      </div>
      <p class="muted small"><code>{id}</code> · {contexts ? `${contexts.length} ${contexts.length === 1 ? "context" : "contexts"} · ${lines} lines` : "…"}</p>
      <input type="search" placeholder="Filter lines" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} aria-label="Filter the trace" />
      {error && <p class="banner error" role="alert">{error}</p>}
      {contexts?.map((c) => {
        const rows = c.lines.filter((l) => !f || l.raw.toLowerCase().includes(f));
        // Each context downloads as a file of its own, named as `penguin
        // sessions export` names it (ID_001.jsonl, …).
        const href = traceURL(id, c.index, true);
        return (
          <section class="trace-context" data-testid="trace-context" data-context={c.index} aria-label={`Context ${c.index}`}>
            <div class="row">
              <h2>{contexts.length > 1 ? `Context ${c.index}` : "Context"}</h2>
              <span class="muted small">{c.lines.length} lines{c.started ? ` · from ${new Date(c.started).toLocaleString()}` : ""}{c.compacted ? " · ended by a compaction" : ""}</span>
              <a class="button primary" href={href} download data-testid="trace-download" title={`${id}_${String(c.index).padStart(3, "0")}.jsonl`}>Download</a>
            </div>
            <ol class="trace" data-testid="trace-lines">
              {rows.map((r) => (
                <li><details><summary><code>{r.kind}</code> <span class="muted small">{r.time}</span></summary><pre>{r.pretty}</pre></details></li>
              ))}
            </ol>
          </section>
        );
      })}
    </section>
  );
}
