import { describe, expect, it } from "vitest";
import { apply, mainItems, newConversation, thread, type Conversation, type ToolItem } from "./reducer";
import type { OmniMessage, Payload, StreamEvent } from "./types";

const ts = "2026-07-18T03:10:22.531Z";
let seq = 0;
function msg(payload: Payload, origin?: string[]): StreamEvent {
  const type = payload.type.startsWith("partial_") || ["text", "thinking", "tool_call", "tool_call_output", "image_url"].includes(payload.type)
    ? "model_msg" : "event_msg";
  const m: OmniMessage = { timestamp: ts, type, payload, ...(origin ? { origin } : {}) };
  return { seq: ++seq, kind: "message", message: m };
}
function run(events: StreamEvent[], c: Conversation = newConversation()): Conversation {
  for (const e of events) apply(c, e, 1000);
  return c;
}
function tool(c: Conversation, id: string, th = ""): ToolItem {
  const t = thread(c, th)!.tools.get(id);
  if (!t) throw new Error("no tool " + id);
  return t;
}

describe("partials", () => {
  it("build a streaming item that the complete message replaces in place", () => {
    seq = 0;
    const c = newConversation();
    run([
      msg({ type: "partial_thinking", event_type: "start", thinking: "" }),
      msg({ type: "partial_thinking", event_type: "delta", thinking: "Let me " }),
      msg({ type: "partial_thinking", event_type: "delta", thinking: "look." }),
    ], c);
    expect(mainItems(c)).toMatchObject([{ type: "thinking", text: "Let me look.", streaming: true }]);
    run([
      msg({ type: "partial_thinking", event_type: "stop", thinking: "" }),
      msg({ type: "thinking", role: "assistant", thinking: "Let me look." }),
      msg({ type: "partial_text", event_type: "start", text: "Hel" }),
      msg({ type: "partial_text", event_type: "delta", text: "lo" }),
    ], c);
    const items = mainItems(c);
    expect(items).toHaveLength(2);
    expect(items[0]).toMatchObject({ type: "thinking", text: "Let me look.", streaming: false });
    expect(items[1]).toMatchObject({ type: "text", text: "Hello", streaming: true });
    const key = items[1].key;
    run([msg({ type: "partial_text", event_type: "stop", text: "" }), msg({ type: "text", role: "assistant", text: "Hello!" })], c);
    expect(mainItems(c)).toHaveLength(2);
    expect(mainItems(c)[1]).toMatchObject({ key, type: "text", text: "Hello!", streaming: false });
  });

  it("stream a tool call's arguments and its output", () => {
    seq = 0;
    const c = run([
      msg({ type: "partial_tool_call", event_type: "start", name: "exec_command", tool_call_id: "c1", arguments: "" }),
      msg({ type: "partial_tool_call", event_type: "delta", tool_call_id: "c1", arguments: '{"cmd":' }),
      msg({ type: "partial_tool_call", event_type: "delta", tool_call_id: "c1", arguments: '"ls"}' }),
    ]);
    expect(tool(c, "c1")).toMatchObject({ name: "exec_command", args: '{"cmd":"ls"}', streaming: true });
    run([
      msg({ type: "partial_tool_call", event_type: "stop", tool_call_id: "c1", arguments: "" }),
      msg({ type: "tool_call", role: "assistant", name: "exec_command", tool_call_id: "c1", arguments: '{"cmd":"ls"}' }),
      msg({ type: "partial_tool_call_output", event_type: "start", tool_call_id: "c1", output: "a\n" }),
      msg({ type: "partial_tool_call_output", event_type: "delta", tool_call_id: "c1", output: "b\n" }),
    ], c);
    expect(tool(c, "c1")).toMatchObject({ streaming: false, output: "a\nb\n", outputStreaming: true });
    run([msg({ type: "tool_call_output", role: "user", tool_call_id: "c1", output: "a\nb\nc\n" })], c);
    expect(tool(c, "c1")).toMatchObject({ output: "a\nb\nc\n", outputStreaming: false });
    expect(mainItems(c)).toHaveLength(1);
  });
});

describe("complete messages", () => {
  it("without partials, as history has them, append items", () => {
    seq = 0;
    const c = run([
      { seq: ++seq, kind: "message", message: { timestamp: ts, type: "session_meta", payload: { type: "session_meta", provider: "openai", model_id: "gpt-4o", workspace: "/w" } } },
      msg({ type: "request_begin" }),
      msg({ type: "text", role: "user", text: "Fix it" }),
      msg({ type: "thinking", role: "assistant", thinking: "hmm" }),
      msg({ type: "text", role: "assistant", text: "Done." }),
      msg({ type: "request_end", status: "completed" }),
      msg({ type: "token_usage", session: { total: 100, output: 10, cost_usd: 0.02 }, request: { total: 100, output: 10, cost_usd: 0.02 } }),
    ]);
    expect(c.model).toEqual({ provider: "openai", id: "gpt-4o" });
    expect(c.workspace).toBe("/w");
    expect(mainItems(c).map((i) => i.type)).toEqual(["user", "thinking", "text", "usage"]);
    expect(c.sessionUsage?.cost_usd).toBe(0.02);
  });
});

describe("steering", () => {
  it("shows the text a user steered with, without its block", () => {
    seq = 0;
    const c = run([msg({ type: "text", role: "user", text: "[user_steering]\nalso the README\n[/user_steering]" })]);
    expect(mainItems(c)).toMatchObject([{ type: "user", text: "also the README", sender: "steering" }]);
  });
});

describe("reordering", () => {
  it("hangs outputs on their calls by id, in completion order", () => {
    seq = 0;
    const c = run([
      msg({ type: "tool_call", role: "assistant", name: "read_file", tool_call_id: "A", arguments: "{}" }),
      msg({ type: "tool_call", role: "assistant", name: "read_file", tool_call_id: "B", arguments: "{}" }),
      msg({ type: "partial_tool_call_output", event_type: "start", tool_call_id: "B", output: "b1" }),
      msg({ type: "partial_tool_call_output", event_type: "start", tool_call_id: "A", output: "a1" }),
      msg({ type: "tool_call_output", role: "user", tool_call_id: "B", output: "b1b2" }),
      msg({ type: "partial_tool_call_output", event_type: "delta", tool_call_id: "A", output: "a2" }),
      msg({ type: "tool_call_output", role: "user", tool_call_id: "A", output: "a1a2" }),
    ]);
    expect(mainItems(c).map((i) => (i as ToolItem).id)).toEqual(["A", "B"]);
    expect(tool(c, "A").output).toBe("a1a2");
    expect(tool(c, "B").output).toBe("b1b2");
  });
});

describe("approvals", () => {
  it("mark the call while pending and record the decision", () => {
    seq = 0;
    const c = run([
      msg({ type: "tool_call", role: "assistant", name: "edit_file", tool_call_id: "c1", arguments: '{"file_path":"a"}' }),
      { seq: ++seq, kind: "approval_request", permission: "rw", toolCall: { timestamp: ts, type: "model_msg", payload: { type: "tool_call", name: "edit_file", tool_call_id: "c1", arguments: '{"file_path":"a"}' } } },
      { seq: ++seq, kind: "task_state", state: "awaiting_approval" },
    ]);
    expect(c.pending.size).toBe(1);
    expect(tool(c, "c1").awaiting).toEqual({ permission: "rw" });
    run([msg({ type: "approval_decision", decision: "allow", tool_call_id: "c1" })], c);
    expect(c.pending.size).toBe(0);
    expect(tool(c, "c1")).toMatchObject({ decision: "allow", awaiting: undefined });
  });
});

describe("subagents", () => {
  it("nest under the run_subagent call that started them, at any depth", () => {
    seq = 0;
    const child = "session-child";
    const grandchild = "session-grandchild";
    const c = run([
      msg({ type: "tool_call", role: "assistant", name: "run_subagent", tool_call_id: "s1", arguments: '{"prompt":"x"}' }),
      msg({ type: "subagent", session_id: child }),
      msg({ type: "text", role: "user", sender: "parent_agent", text: "x" }, [child]),
      msg({ type: "partial_text", event_type: "start", text: "child " }, [child]),
      msg({ type: "tool_call", role: "assistant", name: "run_subagent", tool_call_id: "s2", arguments: "{}" }, [child]),
      msg({ type: "text", role: "assistant", text: "deep" }, [child, grandchild]),
      { seq: ++seq, kind: "approval_request", permission: "rw", origin: [child], toolCall: { timestamp: ts, type: "model_msg", origin: [child], payload: { type: "tool_call", name: "exec_command", tool_call_id: "e1", arguments: "{}" } } },
      msg({ type: "tool_call_output", role: "user", tool_call_id: "s1", output: "child done" }),
    ]);
    expect(mainItems(c)).toHaveLength(1);
    expect(tool(c, "s1")).toMatchObject({ thread: child, output: "child done" });
    const t = thread(c, child)!;
    expect(t.items.map((i) => i.type)).toEqual(["user", "text", "tool", "tool"]);
    expect(tool(c, "s2", child).thread).toBe(`${child}/${grandchild}`);
    expect(thread(c, `${child}/${grandchild}`)!.items).toMatchObject([{ type: "text", text: "deep" }]);
    expect([...c.pending.values()]).toMatchObject([{ thread: child, toolCallId: "e1", origin: [child] }]);
  });

  it("get a row of their own when no call claims them", () => {
    seq = 0;
    const c = run([msg({ type: "text", role: "assistant", text: "orphan" }, ["session-x"])]);
    expect(mainItems(c)).toMatchObject([{ type: "subagent", thread: "session-x" }]);
  });
});

describe("resume", () => {
  it("drops what was applied and continues after a gap", () => {
    seq = 0;
    const first = [
      msg({ type: "text", role: "user", text: "go" }),
      msg({ type: "partial_text", event_type: "start", text: "Work" }),
      msg({ type: "partial_text", event_type: "delta", text: "ing" }),
    ];
    const c = run(first);
    // A reconnect replays the last events, then goes on; numbers skip
    // (partials the server's buffer no longer had).
    const replay = first.slice(1);
    seq += 5;
    const rest = [
      msg({ type: "partial_text", event_type: "delta", text: " hard" }),
      msg({ type: "partial_text", event_type: "stop", text: "" }),
      msg({ type: "text", role: "assistant", text: "Working hard" }),
    ];
    let applied = 0;
    for (const e of [...replay, ...rest]) if (apply(c, e, 1000)) applied++;
    expect(applied).toBe(rest.length);
    expect(mainItems(c)).toMatchObject([{ type: "user" }, { type: "text", text: "Working hard", streaming: false }]);
  });

  it("opens an item for a delta whose start it never saw", () => {
    seq = 40;
    const c = run([
      msg({ type: "partial_text", event_type: "delta", text: "…tail" }),
      msg({ type: "partial_tool_call_output", event_type: "delta", tool_call_id: "x", output: "late" }),
    ]);
    expect(mainItems(c)).toMatchObject([{ type: "text", text: "…tail", streaming: true }, { type: "tool", id: "x", output: "late" }]);
  });
});

describe("states", () => {
  it("count down a retry and clear it when the task goes on", () => {
    seq = 0;
    const c = newConversation();
    apply(c, msg({ type: "request_end", status: "timeout", error_message: "provider timed out", attempt: 1, retry_in_ms: 4000 }), 1000);
    // The state comes a moment after the failed request, saying the whole
    // wait again: the countdown keeps the end the request announced.
    apply(c, { seq: ++seq, kind: "task_state", state: "retry_wait", retryInMs: 4000 }, 1150);
    expect(c.retry).toEqual({ at: 5000 });
    expect(mainItems(c)).toMatchObject([{ type: "request_failed", status: "timeout", attempt: 1 }]);
    apply(c, { seq: ++seq, kind: "task_state", state: "running" }, 2000);
    expect(c.retry).toBeUndefined();
  });

  it("leave no countdown when a replayed log shows the retry was made or the task aborted", () => {
    seq = 0;
    const failed = () => msg({ type: "request_end", status: "timeout", error_message: "503", attempt: 1, retry_in_ms: 60000 });
    const retried = run([failed(), msg({ type: "request_begin" }), msg({ type: "text", role: "assistant", text: "on" })]);
    expect(retried.retry).toBeUndefined();
    const aborted = run([failed(), msg({ type: "abort", reason: "stop" })]);
    expect(aborted.retry).toBeUndefined();
    // A subagent's retry is not the session's.
    const child = run([msg({ type: "request_begin" }, ["child"])], run([failed()]));
    expect(child.retry).toEqual({ at: 61000 });
  });

  it("show compaction where it happened and how a task ended", () => {
    seq = 0;
    const c = run([
      msg({ type: "text", role: "assistant", text: "before" }),
      msg({ type: "compaction_begin", reason: "manual", mode: "summarize", context: 9000, turns: 4 }),
      msg({ type: "compaction_end", reason: "manual", mode: "summarize", status: "completed" }),
      msg({ type: "abort", reason: "stop" }),
      { seq: ++seq, kind: "task_state", state: "idle", status: "aborted", message: "aborted by the user" },
    ]);
    expect(mainItems(c).map((i) => i.type)).toEqual(["text", "compaction", "abort"]);
    expect(mainItems(c)[1]).toMatchObject({ status: "completed", context: 9000 });
    expect(c).toMatchObject({ state: "idle", status: "aborted", statusMessage: "aborted by the user" });
  });
});
