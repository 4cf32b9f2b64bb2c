import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { navigate } from "../router";

/** Trace shows a session's trace (ExportTrace), one line per frame, and
 * downloads it as JSONL. */
export function Trace({ id }: { id: string }) {
  const [lines, setLines] = useState<string[] | null>(null);
  const [error, setError] = useState("");
  const [filter, setFilter] = useState("");
  useEffect(() => {
    api.trace(id).then((t) => setLines(t.split("\n").filter(Boolean))).catch((e) => setError(e.message));
  }, [id]);
  const rows = (lines ?? []).map((l) => {
    try {
      const v = JSON.parse(l);
      return { kind: `${v.type}/${v.payload?.type ?? ""}`, time: v.timestamp as string, line: l, pretty: JSON.stringify(v, null, 2) };
    } catch {
      return { kind: "?", time: "", line: l, pretty: l };
    }
  }).filter((r) => !filter || r.line.toLowerCase().includes(filter.toLowerCase()));
  return (
    <section class="page wide" aria-label="Trace">
      <div class="row">
        <h1>Trace</h1>
        <a class="button" href={`/sessions/${encodeURIComponent(id)}`} onClick={(e) => { e.preventDefault(); navigate(`/sessions/${encodeURIComponent(id)}`); }}>Back to the chat</a>
        <a class="button primary" href={`/api/sessions/${encodeURIComponent(id)}/trace`} download={`${id}.jsonl`} data-testid="trace-download">Download JSONL</a>
      </div>
      <p class="muted small"><code>{id}</code> · {lines?.length ?? "…"} lines</p>
      <input type="search" placeholder="Filter lines" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} aria-label="Filter the trace" />
      {error && <p class="banner error">{error}</p>}
      <ol class="trace" data-testid="trace-lines">
        {rows.map((r) => (
          <li><details><summary><code>{r.kind}</code> <span class="muted small">{r.time}</span></summary><pre>{r.pretty}</pre></details></li>
        ))}
      </ol>
    </section>
  );
}
