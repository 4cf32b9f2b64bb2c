// The view model of a conversation: the session's stream (partials,
// complete messages, events, approval requests and state changes, each
// with its sequence number) folded into the items a chat page shows.
//
// It is a plain module with no DOM: apply() mutates a Conversation and
// bumps its version, so a page re-renders by version. The rules it keeps:
//
//   - Every event is applied once: an event whose sequence number is not
//     above the last one applied is dropped, so a reconnect that replays
//     what was seen, or history overlapping the stream, doubles nothing.
//     Gaps are normal (partials are numbered but only complete messages
//     are kept), so nothing waits for a missing number.
//   - Partials build a streaming item (start, deltas, stop); the complete
//     message that follows replaces its content in place. A delta whose
//     start was missed (the stream resumed mid-segment) opens the item.
//   - Tool outputs hang on their call by tool_call_id, whatever order
//     they arrive in (completion order, not call order).
//   - Messages with an origin belong to a subagent: they go to the thread
//     of that origin chain, which hangs under the run_subagent call that
//     started it.

import type { OmniMessage, Payload, StreamEvent, TokenCounts } from "./types";

export type Item =
  | { key: string; type: "user"; text: string; sender?: string; images?: string[] }
  | { key: string; type: "text"; text: string; streaming: boolean; stopReason?: string }
  | { key: string; type: "thinking"; text: string; streaming: boolean }
  | ToolItem
  | { key: string; type: "compaction"; reason?: string; mode?: string; status?: string; context?: number; turns?: number }
  | { key: string; type: "request_failed"; status: string; error?: string; attempt?: number; retryInMs?: number }
  | { key: string; type: "usage"; request: TokenCounts; session?: TokenCounts; model?: string }
  | { key: string; type: "abort"; reason?: string }
  | { key: string; type: "subagent"; thread: string }
  | { key: string; type: "notice"; text: string };

export interface ToolItem {
  key: string;
  type: "tool";
  id: string;
  name: string;
  args: string;
  streaming: boolean;
  output?: string;
  outputStreaming?: boolean;
  images?: string[];
  stopReason?: string;
  /** allow, deny or forbidden, once decided. */
  decision?: string;
  /** Set while the call waits for Allow or Deny. */
  awaiting?: { permission: string };
  /** The thread of the subagent this call started. */
  thread?: string;
}

/** A thread is the main conversation ("") or a subagent's. */
export interface Thread {
  key: string;
  sessionId: string;
  items: Item[];
  /** The open text and thinking segments. */
  openText?: Extract<Item, { type: "text" }>;
  openThinking?: Extract<Item, { type: "thinking" }>;
  tools: Map<string, ToolItem>;
  /** Whether a call's item links here (else a subagent row does). */
  linked: boolean;
}

export interface PendingApproval {
  thread: string;
  origin: string[];
  toolCallId: string;
  name: string;
  args: string;
  permission: string;
}

export interface Conversation {
  version: number;
  lastSeq: number;
  threads: Map<string, Thread>;
  /** idle, running, awaiting_approval, retry_wait, compacting or awaiting_owner (a stopped replica handed the run over). */
  state: string;
  /** How the last task ended, once idle. */
  status?: string;
  statusMessage?: string;
  /** The next reconnect, while the session waits to retry. */
  retry?: { at: number };
  pending: Map<string, PendingApproval>;
  sessionUsage?: TokenCounts;
  model?: { provider?: string; id?: string };
  workspace?: string;
  /** Counts the workspace_change events seen, so that a panel of the
   * workspace knows when to read it again. */
  workspaceChanges?: number;
  nextKey: number;
}

export function newConversation(): Conversation {
  const main: Thread = { key: "", sessionId: "", items: [], tools: new Map(), linked: true };
  return { version: 0, lastSeq: 0, threads: new Map([["", main]]), state: "idle", pending: new Map(), nextKey: 0 };
}

/** mainItems returns the items of the main thread. */
export function mainItems(c: Conversation): Item[] {
  return c.threads.get("")!.items;
}

/** thread returns the thread with the given key. */
export function thread(c: Conversation, key: string): Thread | undefined {
  return c.threads.get(key);
}

const SUBAGENT_TOOLS = new Set(["run_subagent"]);

function key(c: Conversation): string {
  return "i" + c.nextKey++;
}

function threadKey(origin: string[] | undefined): string {
  return (origin ?? []).join("/");
}

/** threadFor returns the thread of an origin chain, creating it (and its
 * parents) on first sight. */
function threadFor(c: Conversation, origin: string[] | undefined): Thread {
  const k = threadKey(origin);
  let t = c.threads.get(k);
  if (t) return t;
  const chain = origin ?? [];
  const parent = threadFor(c, chain.slice(0, -1));
  t = { key: k, sessionId: chain[chain.length - 1], items: [], tools: new Map(), linked: false };
  c.threads.set(k, t);
  link(c, parent, t);
  return t;
}

/** link hangs a subagent thread under the newest run_subagent call of its
 * parent that has none yet, or under a row of its own. */
function link(c: Conversation, parent: Thread, child: Thread) {
  if (child.linked) return;
  for (let i = parent.items.length - 1; i >= 0; i--) {
    const it = parent.items[i];
    if (it.type === "tool" && SUBAGENT_TOOLS.has(it.name) && !it.thread) {
      it.thread = child.key;
      child.linked = true;
      return;
    }
  }
  parent.items.push({ key: key(c), type: "subagent", thread: child.key });
  child.linked = true;
}

/** apply folds one stream event into the conversation. It returns false
 * for an event already applied. now is the clock for retry countdowns. */
export function apply(c: Conversation, ev: StreamEvent, now: number = Date.now()): boolean {
  if (ev.seq <= c.lastSeq) return false;
  c.lastSeq = ev.seq;
  c.version++;
  switch (ev.kind) {
    case "message":
      applyMessage(c, ev.message, now);
      break;
    case "approval_request":
      applyApproval(c, ev);
      break;
    case "task_state":
      applyState(c, ev, now);
      break;
  }
  return true;
}

function applyState(c: Conversation, ev: Extract<StreamEvent, { kind: "task_state" }>, now: number) {
  c.state = ev.state;
  if (ev.state === "retry_wait" && ev.retryInMs) {
    // The engine's deadline runs from the failed request, which announced
    // the wait a moment earlier; its state says the whole wait again, so
    // the earlier end stands (else the countdown would grow, 60s to 61s).
    const at = now + ev.retryInMs;
    c.retry = { at: c.retry ? Math.min(c.retry.at, at) : at };
  } else {
    c.retry = undefined;
  }
  if (ev.state === "running") {
    c.status = undefined;
    c.statusMessage = undefined;
  }
  if (ev.state === "idle") {
    if (ev.status) {
      c.status = ev.status;
      c.statusMessage = ev.message || undefined;
    }
    // A task that ended leaves nothing to approve.
    for (const p of c.pending.values()) {
      const t = c.threads.get(p.thread)?.tools.get(p.toolCallId);
      if (t) t.awaiting = undefined;
    }
    c.pending.clear();
    for (const t of c.threads.values()) closeSegments(t);
  }
}

function approvalKey(origin: string[] | undefined, id: string): string {
  return threadKey(origin) + "#" + id;
}

function applyApproval(c: Conversation, ev: Extract<StreamEvent, { kind: "approval_request" }>) {
  const p = ev.toolCall.payload;
  const id = p.tool_call_id ?? "";
  const th = threadFor(c, ev.origin);
  const tool = toolItem(c, th, id, p.name ?? "", p.arguments ?? "");
  tool.awaiting = { permission: ev.permission };
  c.pending.set(approvalKey(ev.origin, id), {
    thread: th.key, origin: ev.origin ?? [], toolCallId: id, name: tool.name, args: tool.args, permission: ev.permission,
  });
}

/** toolItem returns the item of a call, creating it when the call was not
 * seen (its stream began before this client joined). */
function toolItem(c: Conversation, th: Thread, id: string, name: string, args: string): ToolItem {
  let t = th.tools.get(id);
  if (!t) {
    t = { key: key(c), type: "tool", id, name, args, streaming: false };
    th.tools.set(id, t);
    th.items.push(t);
  }
  return t;
}

function closeSegments(th: Thread) {
  if (th.openText) th.openText.streaming = false;
  if (th.openThinking) th.openThinking.streaming = false;
  th.openText = th.openThinking = undefined;
}

function applyMessage(c: Conversation, m: OmniMessage, now: number) {
  const p = m.payload;
  if (m.type === "session_meta") {
    if (!m.origin?.length) {
      c.model = { provider: p.provider, id: p.model_id };
      c.workspace = p.workspace;
    }
    return;
  }
  const th = threadFor(c, m.origin);
  switch (p.type) {
    case "partial_text":
      return partialSegment(c, th, "text", p.event_type, p.text ?? "");
    case "partial_thinking":
      return partialSegment(c, th, "thinking", p.event_type, p.thinking ?? "");
    case "text":
      if (p.role === "user") {
        // A goal round's prompt: the [goal] block is the engine's (its
        // goal_round notice stands for it); the bubble is the body.
        const round = /^\[goal\]\n[\s\S]*?\n\[\/goal\]\n\n([\s\S]*)$/.exec(p.text ?? "");
        if (round) {
          th.items.push({ key: key(c), type: "user", text: round[1] });
          return;
        }
        const steer = /^\[user_steering\]\n([\s\S]*)\n\[\/user_steering\]$/.exec(p.text ?? "");
        th.items.push({ key: key(c), type: "user", text: steer ? steer[1] : p.text ?? "", sender: steer ? "steering" : p.sender });
        return;
      }
      return completeSegment(c, th, "text", p.text ?? "", p.stop_reason);
    case "thinking":
      return completeSegment(c, th, "thinking", p.thinking ?? "", p.stop_reason);
    case "image_url": {
      th.items.push({ key: key(c), type: "user", text: "", images: [p.image_url ?? ""] });
      return;
    }
    case "partial_tool_call": {
      const t = toolItem(c, th, p.tool_call_id ?? "", p.name ?? "", "");
      if (p.name) t.name = p.name;
      t.args += p.arguments ?? "";
      t.streaming = p.event_type !== "stop";
      return;
    }
    case "tool_call": {
      const t = toolItem(c, th, p.tool_call_id ?? "", p.name ?? "", "");
      t.name = p.name ?? t.name;
      t.args = p.arguments ?? "";
      t.streaming = false;
      t.stopReason = p.stop_reason;
      return;
    }
    case "partial_tool_call_output": {
      const t = toolItem(c, th, p.tool_call_id ?? "", "", "");
      t.output = (t.output ?? "") + (p.output ?? "");
      if (p.images?.length) t.images = p.images;
      t.outputStreaming = p.event_type !== "stop";
      return;
    }
    case "tool_call_output": {
      const t = toolItem(c, th, p.tool_call_id ?? "", "", "");
      t.output = p.output ?? "";
      t.images = p.images;
      t.outputStreaming = false;
      t.stopReason = p.stop_reason;
      t.awaiting = undefined;
      return;
    }
    case "approval_decision": {
      const t = toolItem(c, th, p.tool_call_id ?? "", "", "");
      t.decision = p.decision;
      t.awaiting = undefined;
      c.pending.delete(approvalKey(m.origin, p.tool_call_id ?? ""));
      return;
    }
    case "token_usage":
      if (!m.origin?.length && p.session) c.sessionUsage = p.session;
      th.items.push({
        key: key(c), type: "usage", request: p.request ?? {}, session: p.session,
        model: p.model_id ? `${p.provider ?? ""}/${p.model_id}` : undefined,
      });
      return;
    case "request_begin":
      closeSegments(th);
      // The next attempt began: no wait is left. (A replayed log has no
      // task states, so this is what ends a countdown there.)
      if (!m.origin?.length) c.retry = undefined;
      return;
    case "request_end":
      closeSegments(th);
      if (p.status && p.status !== "completed") {
        th.items.push({
          key: key(c), type: "request_failed", status: p.status, error: p.error_message, attempt: p.attempt, retryInMs: p.retry_in_ms,
        });
        if (p.retry_in_ms && !m.origin?.length) c.retry = { at: now + p.retry_in_ms };
      }
      return;
    case "compaction_begin":
      th.items.push({ key: key(c), type: "compaction", reason: p.reason ?? undefined, mode: p.mode, context: p.context, turns: p.turns });
      return;
    case "compaction_end": {
      for (let i = th.items.length - 1; i >= 0; i--) {
        const it = th.items[i];
        if (it.type === "compaction" && !it.status) {
          it.status = p.status;
          return;
        }
      }
      th.items.push({ key: key(c), type: "compaction", reason: p.reason ?? undefined, mode: p.mode, status: p.status });
      return;
    }
    case "abort":
      closeSegments(th);
      if (!m.origin?.length) c.retry = undefined;
      th.items.push({ key: key(c), type: "abort", reason: p.reason ?? undefined });
      return;
    case "subagent": {
      const child = threadFor(c, [...(m.origin ?? []), p.session_id ?? ""]);
      void child;
      return;
    }
    case "goal_started":
      th.items.push({ key: key(c), type: "notice", text: `Goal started` + (p.budget ? ` · budget ${p.budget} tokens` : "") });
      return;
    case "goal_round":
      th.items.push({
        key: key(c), type: "notice",
        text: `Goal · round ${p.round}` + (p.wrap_up ? " · wrap-up" : "") + (p.budget ? ` · ${p.used ?? 0} of ${p.budget} tokens used` : ""),
      });
      return;
    case "goal_finished":
      th.items.push({
        key: key(c), type: "notice",
        text: `Goal ${(p.outcome ?? "").replace("_", " ")} after ${p.rounds ?? 0} round(s), ${p.tokens ?? 0} tokens` + (p.message ? `: ${p.message}` : ""),
      });
      return;
    case "mcp_connect_begin":
      th.items.push({ key: key(c), type: "notice", text: `Connecting to MCP servers: ${(p.servers ?? []).join(", ")}` });
      return;
    case "mcp_connect_end": {
      const failed = (p.results ?? []).filter((r) => r.status !== "completed").map((r) => r.server);
      th.items.push({ key: key(c), type: "notice", text: `MCP servers ${p.status}` + (failed.length ? ` (unavailable: ${failed.join(", ")})` : "") });
      return;
    }
    case "workspace_change": {
      c.workspaceChanges = (c.workspaceChanges ?? 0) + 1;
      const files = (p.files ?? []).map((f) => f.path);
      const list = files.slice(0, 6).join(", ") + (files.length > 6 ? `, and ${files.length - 6} more` : "");
      const text = p.kind === "undo" ? `Undid change #${p.turn_sequence}: ${list}`
        : p.kind === "redo" ? `Redid change #${p.turn_sequence}: ${list}`
        : `${files.length} file(s) changed: ${list}` + (p.incomplete ? " (too large to undo)" : "");
      th.items.push({ key: key(c), type: "notice", text });
      return;
    }
    default:
      // tool_list_ready and payloads this page does not show.
      return;
  }
}

type SegmentKind = "text" | "thinking";

function partialSegment(c: Conversation, th: Thread, kind: SegmentKind, phase: Payload["event_type"], delta: string) {
  let seg = kind === "text" ? th.openText : th.openThinking;
  if (!seg || phase === "start") {
    seg = { key: key(c), type: kind, text: "", streaming: true } as Extract<Item, { type: SegmentKind }>;
    th.items.push(seg);
    if (kind === "text") th.openText = seg as Extract<Item, { type: "text" }>;
    else th.openThinking = seg as Extract<Item, { type: "thinking" }>;
  }
  seg.text += delta;
  if (phase === "stop") seg.streaming = false;
}

/** completeSegment puts a complete message in place of the segment its
 * partials built, or appends it when none was streamed. */
function completeSegment(c: Conversation, th: Thread, kind: SegmentKind, text: string, stopReason?: string) {
  const seg = kind === "text" ? th.openText : th.openThinking;
  if (seg) {
    seg.text = text;
    seg.streaming = false;
    if (seg.type === "text") seg.stopReason = stopReason;
    if (kind === "text") th.openText = undefined;
    else th.openThinking = undefined;
    return;
  }
  if (kind === "text") th.items.push({ key: key(c), type: "text", text, streaming: false, stopReason });
  else th.items.push({ key: key(c), type: "thinking", text, streaming: false });
}
