// The wire shapes the gateway sends: OmniMessages in the trace format (the
// SSE stream's unnamed events and the history), and its server events.

/** Token counts: numbers in the trace format, decimal strings (64-bit
 * integers) in the gateway's protojson; read them with num(). */
export interface TokenCounts {
  cache_read?: number | string;
  cache_write?: number | string;
  output?: number | string;
  total?: number | string;
  reasoning?: number | string;
  /** The cost in USD, when the model's price is known. */
  cost_usd?: number;
  /** The provider reported no usage: the counts are unknown, not zero. */
  unreported?: boolean;
}

export interface OmniMessage {
  timestamp: string;
  type: "session_meta" | "model_msg" | "event_msg";
  origin?: string[];
  // The payload's fields depend on payload.type; the reducer reads them
  // by name, so one loose type serves every payload.
  payload: Payload;
}

export interface Payload {
  type: string;
  role?: "user" | "assistant";
  sender?: string;
  text?: string;
  thinking?: string;
  name?: string;
  arguments?: string;
  tool_call_id?: string;
  output?: string;
  images?: string[];
  stop_reason?: string;
  event_type?: "start" | "delta" | "stop";
  image_url?: string;
  decision?: string;
  status?: string;
  error_message?: string;
  attempt?: number;
  retry_in_ms?: number;
  session?: TokenCounts;
  request?: TokenCounts;
  provider?: string;
  model_id?: string;
  reason?: string | null;
  mode?: string;
  context?: number;
  turns?: number;
  session_id?: string;
  workspace?: string;
  servers?: string[];
  results?: { server: string; status: string; tools?: number; error?: string }[];
  // Goal events (goal_started, goal_round, goal_finished).
  objective?: string;
  budget?: number;
  goal_file?: string;
  round?: number;
  used?: number;
  wrap_up?: boolean;
  outcome?: string;
  rounds?: number;
  tokens?: number;
  message?: string;
  // workspace_change: kind is turn, undo or redo.
  kind?: string;
  files?: WorkspaceFile[];
  turn_sequence?: number;
  incomplete?: string;
}

/** One file of a workspace_change (and of the changes API). */
export interface WorkspaceFile {
  path: string;
  /** added, modified or deleted in the trace format; FILE_CHANGE_KIND_… in the API. */
  kind?: string;
  added_lines?: number;
  removed_lines?: number;
  binary?: boolean;
  too_large?: boolean;
  link?: boolean;
  diff?: string;
}

/** One event of a session's stream, with its sequence number. */
export type StreamEvent =
  | { seq: number; kind: "message"; message: OmniMessage }
  | { seq: number; kind: "approval_request"; toolCall: OmniMessage; permission: string; origin?: string[] }
  | { seq: number; kind: "task_state"; state: string; status?: string; message?: string; retryInMs?: number };

/** parseSSE turns one SSE event of the session stream into a StreamEvent. */
export function parseSSE(name: string, id: string, data: string): StreamEvent | null {
  const seq = Number(id);
  if (!Number.isFinite(seq)) return null;
  const v = JSON.parse(data);
  if (name === "message" || name === "") return { seq, kind: "message", message: v as OmniMessage };
  if (name !== "server_event") return null;
  if (v.type === "approval_request") {
    return { seq, kind: "approval_request", toolCall: v.tool_call, permission: v.permission ?? "", origin: v.origin };
  }
  if (v.type === "task_state") {
    return { seq, kind: "task_state", state: v.state, status: v.status, message: v.message, retryInMs: v.retry_in_ms };
  }
  return null;
}
