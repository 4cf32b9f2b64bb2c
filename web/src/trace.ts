// A session's trace as ExportTrace sends every context of it: JSONL, the
// contexts one after the other. The first line opens context 1 and each
// later session_meta opens the next (a compaction writes one where the
// fresh context starts), which is how the engine numbers them for
// `?context=N` and `penguin sessions export`.

export interface TraceLine {
  /** envelope type/payload type, such as model_msg/tool_call. */
  kind: string;
  time: string;
  raw: string;
  pretty: string;
}

export interface TraceContext {
  /** The 1-based index the gateway's ?context=N takes. */
  index: number;
  /** When the context began: the timestamp of its first line. */
  started: string;
  /** Whether a compaction ended this context. */
  compacted: boolean;
  lines: TraceLine[];
}

export function splitContexts(text: string): TraceContext[] {
  const out: TraceContext[] = [];
  for (const raw of text.split("\n")) {
    if (!raw.trim()) continue;
    let line: TraceLine;
    let v: { type?: string; timestamp?: string; payload?: { type?: string } } | undefined;
    try {
      v = JSON.parse(raw);
      const inner = v?.payload?.type;
      line = { kind: inner && inner !== v?.type ? `${v?.type}/${inner}` : String(v?.type), time: v?.timestamp ?? "", raw, pretty: JSON.stringify(v, null, 2) };
    } catch {
      line = { kind: "?", time: "", raw, pretty: raw };
    }
    if (!out.length || v?.type === "session_meta") {
      out.push({ index: out.length + 1, started: line.time, compacted: false, lines: [] });
    }
    const cur = out[out.length - 1];
    if (v?.payload?.type === "compaction_end") cur.compacted = true;
    cur.lines.push(line);
  }
  return out;
}
