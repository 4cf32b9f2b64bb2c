// The gateway's HTTP API: one function per route, the sign-in state and
// the CSRF header every state-changing request carries.

import type { AttachmentLimits } from "./attach";
import type { TokenCounts, WorkspaceFile } from "./omni/types";

export type { TokenCounts };

/** Session as the gateway sends it: protojson, so 64-bit numbers are strings. */
export interface Session {
  session_id: string;
  model?: { provider?: string; model_id?: string };
  workspace?: string;
  approval_mode?: string;
  thinking_level?: string;
  state?: string;
  created_at?: string;
  updated_at?: string;
  last_sequence?: string;
  title?: string;
  parent_session_id?: string;
  source?: string;
  usage?: TokenCounts;
  pinned?: boolean;
  archived?: boolean;
  project_id?: string;
  /** The agent it runs, by name; empty outside the engine's agents. */
  agent?: string;
}

/** What a new session gets by default (GET /api/defaults). */
export interface SessionDefaults {
  sandbox_mode?: string;
  network?: string;
  interactive_approval_mode?: string;
  attachments?: AttachmentLimits;
}

/** changePage is how many of a change's files (with their diffs) the
 * workspace panel loads at a time: a turn that changed 50,000 files is
 * shown a page at a time, never rendered whole. */
export const changePage = 500;

/** One turn's change of the workspace (GET /api/sessions/{id}/changes). */
export interface TurnChange {
  /** The sequence of the turn's workspace_change event (an int64, as a string). */
  sequence: string;
  time?: string;
  prompt?: string;
  undone?: boolean;
  /** How many files the change has; change.files may list fewer (a list's first 100, or a page). */
  file_count?: number;
  change?: { files?: WorkspaceFile[]; incomplete?: string };
}

/** One entry of a workspace directory (GET /api/sessions/{id}/files). */
export interface WorkspaceEntry {
  name: string;
  path: string;
  dir?: boolean;
  link?: boolean;
  size?: string;
}

/** A command of a session's environment (GET /api/sessions/{id}/processes). */
export interface ProcessInfo {
  process_id: string;
  command?: string;
  state?: string;
  exit_code?: number;
  pid?: number;
  started_at_ms?: string;
  background?: boolean;
  /** The last lines of the command's output, cleaned by the environment. */
  output_tail?: string;
}

export interface SessionChange {
  session: Session;
  last_status?: string;
  last_message?: string;
}

/** A model's price in USD per million tokens. */
export interface ModelPrice {
  input?: number;
  output?: number;
  cache_read?: number;
  cache_write?: number;
}

export interface ModelInfo {
  model: { provider: string; model_id: string };
  context_window?: string;
  max_tokens?: string;
  thinking_levels?: string[];
  name?: string;
  reasoning?: boolean;
  tools?: boolean;
  price?: ModelPrice;
  status?: string;
}

/** A catalog provider the first-run form offers. */
export interface CatalogProvider {
  id: string;
  name: string;
  type: string;
  base_url: string;
  key_var: string;
  models: number;
}

export interface SetupState {
  providers?: CatalogProvider[];
}

/** A provider route as the llm service lists it; a stored key only masked. */
export interface ProviderRouteInfo {
  name: string;
  type: string;
  base_url?: string;
  project?: string;
  /** "file", "env" or "store". */
  origin?: string;
  key_hint?: string;
}

/** routesPath is where the routes of project (empty: the global ones)
 * are managed. */
const routesPath = (project: string) => project ? `/api/projects/${encodeURIComponent(project)}/providers` : "/api/providers";

/** The answer of a route's test request. */
export interface ProviderTest {
  ok?: boolean;
  model_id?: string;
  latency_ms?: string;
  outcome?: { message?: string };
}

export interface SetupResult {
  provider: string;
  route: ProviderRouteInfo;
  /** The route existed and was replaced. */
  replaced?: boolean;
}

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

let csrfToken = "";

export interface AuthState {
  auth_required: boolean;
  signed_in: boolean;
  csrf_token?: string;
  /** "local" or "team". */
  mode?: string;
  user?: { id: string; name?: string; admin: boolean };
  operator?: boolean;
  must_change_password?: boolean;
  /** The identity provider's name, when one is configured: the sign-in
   * page offers "Sign in with <oidc_name>". */
  oidc_name?: string;
}

/** A user's account (teams.proto User). */
export interface User {
  user_id: string;
  name?: string;
  email?: string;
  admin?: boolean;
  disabled?: boolean;
  created_at?: string;
}

/** A project as the caller sees it, with their role. */
export interface Project {
  project_id: string;
  name?: string;
  role?: string;
  created_at?: string;
}

export interface Member {
  user_id: string;
  role?: string;
  created_at?: string;
}

/** One record of the audit log (teams.proto AuditRecord). */
export interface AuditRecord {
  id: string;
  at?: string;
  actor?: string;
  action: string;
  target?: string;
  detail?: string;
}

/** A personal access token, without its secret. */
export interface Token {
  token_id: string;
  name?: string;
  scope?: string;
  created_at?: string;
  expires_at?: string;
  last_used_at?: string;
}

/** projectKey is where the project switcher keeps its choice. */
export const projectKey = "penguin.project";

/** currentProject is the project the switcher chose, or the default
 * project while it shows every project: the one whose agents the agent
 * pages show and change. */
export function currentProject(): string {
  return localStorage.getItem(projectKey) || "default";
}

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  const resp = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin",
  });
  const text = await resp.text();
  if (!resp.ok) {
    let code = "unknown", message = text || resp.statusText;
    try {
      const e = JSON.parse(text);
      code = e.error ?? code;
      message = e.message ?? message;
    } catch {
      // Not the gateway's error shape (a proxy's page): keep the text.
    }
    throw new ApiError(resp.status, code, message);
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

export async function authState(): Promise<AuthState> {
  const st = await request<AuthState>("GET", "/api/auth");
  csrfToken = st.csrf_token ?? "";
  return st;
}

/** signIn trades the server's token, or a user's id and password, for a
 * session cookie. */
export async function signIn(body: { token: string } | { user_id: string; password: string }): Promise<AuthState> {
  const st = await request<AuthState>("POST", "/api/auth/login", body);
  csrfToken = st.csrf_token ?? "";
  return st;
}

export async function signOut(): Promise<void> {
  await request("POST", "/api/auth/logout");
  csrfToken = "";
}

export const api = {
  listSessions: (pageToken = "") =>
    request<{ sessions?: Session[]; next_page_token?: string }>("GET", `/api/sessions?page_size=200&page_token=${encodeURIComponent(pageToken)}`),
  changePassword: (old_password: string, new_password: string) => request<void>("POST", "/api/auth/password", { old_password, new_password }),
  users: () => request<{ users?: User[] }>("GET", "/api/users"),
  createUser: (body: { user_id: string; name?: string; password: string; admin?: boolean }) => request<{ user: User }>("POST", "/api/users", body),
  updateUser: (id: string, body: { disabled?: boolean; admin?: boolean }) => request<{ user: User }>("PATCH", `/api/users/${encodeURIComponent(id)}`, body),
  resetPassword: (id: string, password: string) => request<void>("PUT", `/api/users/${encodeURIComponent(id)}/password`, { password }),
  deleteUser: (id: string) => request<void>("DELETE", `/api/users/${encodeURIComponent(id)}`),
  projects: () => request<{ projects?: Project[] }>("GET", "/api/projects"),
  createProject: (project_id: string, name: string) => request<{ project: Project }>("POST", "/api/projects", { project_id, name }),
  deleteProject: (id: string) => request<void>("DELETE", `/api/projects/${encodeURIComponent(id)}`),
  /** A project's audit log (its owners), or the global one (admins) when
   * project is empty; newest first. */
  audit: (project: string) => request<{ records?: AuditRecord[] }>("GET", project ? `/api/projects/${encodeURIComponent(project)}/audit` : "/api/audit"),
  members: (id: string) => request<{ members?: Member[] }>("GET", `/api/projects/${encodeURIComponent(id)}/members`),
  setMember: (id: string, user: string, role: string) =>
    request<void>("PUT", `/api/projects/${encodeURIComponent(id)}/members/${encodeURIComponent(user)}`, { role }),
  removeMember: (id: string, user: string) => request<void>("DELETE", `/api/projects/${encodeURIComponent(id)}/members/${encodeURIComponent(user)}`),
  tokens: () => request<{ tokens?: Token[] }>("GET", "/api/tokens"),
  createToken: (name: string, scope: string, ttlDays: number) =>
    request<{ token: Token; secret: string }>("POST", "/api/tokens", { name, scope, ttl_seconds: String(ttlDays * 86400) }),
  revokeToken: (id: string) => request<void>("DELETE", `/api/tokens/${encodeURIComponent(id)}`),
  getSession: (id: string) => request<Session>("GET", `/api/sessions/${encodeURIComponent(id)}`),
  defaults: () => request<SessionDefaults>("GET", "/api/defaults"),
  createSession: (body: object) => request<Session>("POST", "/api/sessions", body),
  updateSession: (id: string, body: { title?: string; pinned?: boolean; archived?: boolean; approval_mode?: string; thinking_level?: string }) =>
    request<Session>("PATCH", `/api/sessions/${encodeURIComponent(id)}`, body),
  deleteSession: (id: string) => request<void>("DELETE", `/api/sessions/${encodeURIComponent(id)}`),
  forkSession: (id: string, upTo = 0) => request<Session>("POST", `/api/sessions/${encodeURIComponent(id)}/fork`, { up_to_sequence: String(upTo) }),
  startTask: (id: string, prompt: string, thinking?: string, goal?: { budget: number }, images?: string[], skills?: string[]) =>
    request<{ first_sequence: string }>("POST", `/api/sessions/${encodeURIComponent(id)}/tasks`,
      { prompt, ...(thinking ? { thinking_level: thinking } : {}), ...(goal ? { goal: { budget: String(goal.budget) } } : {}), ...(images?.length ? { images } : {}), ...(skills?.length ? { skills } : {}) }),
  changes: (id: string) => request<{ changes?: TurnChange[] }>("GET", `/api/sessions/${encodeURIComponent(id)}/changes`),
  /** A page of a change's files with their diffs; pageToken is the last page's next_page_token. */
  changeDiff: (id: string, seq: string, pageToken = "") =>
    request<{ change?: TurnChange; next_page_token?: string }>("GET", `/api/sessions/${encodeURIComponent(id)}/changes/${encodeURIComponent(seq)}?page_size=${changePage}`
      + (pageToken ? `&page_token=${encodeURIComponent(pageToken)}` : "")),
  undoChange: (id: string, seq: string, redo: boolean, force = false) =>
    request<{ overwritten?: string[] }>("POST", `/api/sessions/${encodeURIComponent(id)}/changes/${encodeURIComponent(seq)}/${redo ? "redo" : "undo"}`, force ? { force } : {}),
  files: (id: string, dir: string) => request<{ entries?: WorkspaceEntry[]; truncated?: boolean }>("GET", `/api/sessions/${encodeURIComponent(id)}/files?dir=${encodeURIComponent(dir)}`),
  file: (id: string, path: string) =>
    request<{ content?: string; size?: string; binary?: boolean; too_large?: boolean }>("GET", `/api/sessions/${encodeURIComponent(id)}/file?path=${encodeURIComponent(path)}`),
  processes: (id: string) => request<{ processes?: ProcessInfo[] }>("GET", `/api/sessions/${encodeURIComponent(id)}/processes`),
  killProcess: (id: string, pid: string) =>
    request<{ message?: string }>("POST", `/api/sessions/${encodeURIComponent(id)}/processes/${encodeURIComponent(pid)}/kill`),
  steer: (id: string, text: string, images?: string[]) =>
    request<void>("POST", `/api/sessions/${encodeURIComponent(id)}/steer`, images?.length ? { text, images } : { text }),
  abort: (id: string) => request<void>("POST", `/api/sessions/${encodeURIComponent(id)}/abort`, { reason: "aborted from the web app" }),
  retryNow: (id: string) => request<{ retried?: boolean }>("POST", `/api/sessions/${encodeURIComponent(id)}/retry-now`),
  compact: (id: string) => request<{ status?: string; message?: string }>("POST", `/api/sessions/${encodeURIComponent(id)}/compact`, {}),
  approve: (id: string, toolCallId: string, allow: boolean, origin: string[]) =>
    request<void>("POST", `/api/sessions/${encodeURIComponent(id)}/approvals/${encodeURIComponent(toolCallId)}`, {
      decision: allow ? "DECISION_ALLOW" : "DECISION_DENY", origin,
    }),
  trace: async (id: string): Promise<string> => {
    const resp = await fetch(traceURL(id, 0, false), { credentials: "same-origin" });
    if (!resp.ok) throw new ApiError(resp.status, "trace", await resp.text());
    return resp.text();
  },
  models: () => request<{ models?: ModelInfo[]; notice?: string }>("GET", "/api/models"),
  setup: () => request<SetupState>("GET", "/api/setup"),
  addProvider: (form: object) => request<SetupResult>("POST", "/api/setup/provider", form),
  /** The global routes, or with project those its sessions see: the
   * global ones and the project's own. */
  providers: (project = "") => request<{ providers?: ProviderRouteInfo[]; notice?: string }>("GET", `${routesPath(project)}`),
  removeProvider: (name: string, project = "") => request<void>("DELETE", `${routesPath(project)}/${encodeURIComponent(name)}`),
  testProvider: (name: string, project = "") => request<ProviderTest>("POST", `${routesPath(project)}/${encodeURIComponent(name)}/test`, {}),
};

/** traceURL is the address of a session's trace: every context (0) or
 * one, as a download or to read inline. */
export function traceURL(id: string, context: number, download: boolean): string {
  const q = new URLSearchParams();
  if (context > 0) q.set("context", String(context));
  if (!download) q.set("download", "0");
  const qs = q.toString();
  return `/api/sessions/${encodeURIComponent(id)}/trace${qs ? "?" + qs : ""}`;
}

/** num reads a protojson 64-bit number (a string) or a plain number. */
export function num(v: string | number | undefined): number {
  if (v === undefined) return 0;
  const n = typeof v === "number" ? v : Number(v);
  return Number.isFinite(n) ? n : 0;
}
