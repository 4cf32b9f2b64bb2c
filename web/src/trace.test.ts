import { describe, expect, it } from "vitest";
import { splitContexts } from "./trace";

const line = (type: string, payload: string, ts = "2026-01-01T00:00:00Z") => JSON.stringify({ timestamp: ts, type, payload: { type: payload } });

describe("splitContexts", () => {
  it("opens a context at the first line and at each later session_meta", () => {
    const text = [
      line("session_meta", "session_meta", "t1"),
      line("model_msg", "text"),
      line("event_msg", "compaction_begin"),
      line("event_msg", "compaction_end"),
      line("session_meta", "session_meta", "t2"),
      line("model_msg", "text"),
      "",
    ].join("\n");
    const cs = splitContexts(text);
    expect(cs.map((c) => [c.index, c.lines.length, c.started, c.compacted])).toEqual([[1, 4, "t1", true], [2, 2, "t2", false]]);
    expect(cs[0].lines[1].kind).toBe("model_msg/text");
    expect(cs[0].lines[0].kind).toBe("session_meta");
  });

  it("numbers a log that does not begin with session_meta from 1, and keeps lines it cannot read", () => {
    const cs = splitContexts([line("model_msg", "text"), "not json", line("session_meta", "session_meta")].join("\n"));
    expect(cs.map((c) => c.lines.length)).toEqual([2, 1]);
    expect(cs[0].lines[1]).toMatchObject({ kind: "?", raw: "not json" });
  });

  it("has no context for an empty trace", () => {
    expect(splitContexts("\n")).toEqual([]);
  });
});
