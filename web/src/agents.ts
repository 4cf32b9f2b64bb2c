// The agent routes of the gateway (/api/projects/{p}/agents/…): one
// function per route, in the project the switcher chose (the default
// project when it shows every project).
import { currentProject, request } from "./api";

const e = encodeURIComponent;
const projectBase = () => `/api/projects/${e(currentProject())}`;
const base = (agent = "") => `${projectBase()}/agents${agent ? "/" + e(agent) : ""}`;

export interface AgentInfo { name: string; version?: string; updated_at?: string }
export interface SkillInfo { name: string; description?: string; enabled?: boolean; files?: number }
export interface MemoryScope { key: string; workspace?: string; files?: number }
export interface MemoryFile { name: string; front_matter?: Record<string, string>; bytes?: string; version?: string }
export interface MCPServer { name: string; transport?: string; command?: string; args?: string[]; url?: string; permission?: string; env?: Record<string, string>; headers?: Record<string, string> }
export interface AgentTool { name: string; description?: string; kind?: string; permission?: string; enabled?: boolean; for_model?: string }
export interface ModelPrice { input?: number; output?: number; cache_read?: number; cache_write?: number }
export interface ModelSettings { model: { provider: string; model_id: string }; context_window?: string | number; price?: ModelPrice }
export interface TestResult { ok?: boolean; tools?: string[]; latency_ms?: string; message?: string }

/** toBase64 encodes an uploaded file for a JSON body (proto bytes). */
export async function toBase64(f: Blob): Promise<string> {
  const bytes = new Uint8Array(await f.arrayBuffer());
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export const agents = {
  list: () => request<{ agents?: AgentInfo[] }>("GET", base()),
  create: (name: string, from_agent = "") => request<unknown>("POST", base(), { name, from_agent }),
  rename: (a: string, new_name: string) => request<unknown>("PATCH", base(a), { new_name }),
  remove: (a: string) => request<unknown>("DELETE", base(a)),
  exportURL: (a: string) => base(a) + "/export",
  importAgent: (a: string, archive: string, replace: boolean) => request<{ files?: number }>("POST", `${base(a)}/import`, { archive, replace }),
  getConfig: (a: string, file: string) => request<{ content?: string; version?: string }>("GET", `${base(a)}/config/${e(file)}`),
  putConfig: (a: string, file: string, content: string, version: string) => request<{ version?: string }>("PUT", `${base(a)}/config/${e(file)}`, { content, version }),
  skills: (a: string) => request<{ skills?: SkillInfo[] }>("GET", `${base(a)}/skills`),
  /** The skills of a session's agent, in the session's project (which
   * need not be the switcher's). */
  skillsOf: (project: string, a: string) => request<{ skills?: SkillInfo[] }>("GET", `/api/projects/${e(project)}/agents/${e(a)}/skills`),
  installSkill: (a: string, archive: string) => request<unknown>("POST", `${base(a)}/skills`, { archive, replace: true }),
  installLibrarySkill: (a: string, server_dir: string) => request<unknown>("POST", `${base(a)}/skills`, { server_dir, replace: true }),
  enableSkill: (a: string, name: string, enabled: boolean) => request<unknown>("PUT", `${base(a)}/skills/${e(name)}/enabled`, { enabled }),
  removeSkill: (a: string, name: string) => request<unknown>("DELETE", `${base(a)}/skills/${e(name)}`),
  scopes: (a: string) => request<{ enabled?: boolean; scopes?: MemoryScope[] }>("GET", `${base(a)}/memory`),
  memoryFiles: (a: string, scope: string) => request<{ files?: MemoryFile[] }>("GET", `${base(a)}/memory/${e(scope)}/files`),
  memoryFile: (a: string, scope: string, name: string) => request<{ content?: string; version?: string }>("GET", `${base(a)}/memory/${e(scope)}/files/${e(name)}`),
  putMemoryFile: (a: string, scope: string, name: string, content: string, version: string) => request<unknown>("PUT", `${base(a)}/memory/${e(scope)}/files/${e(name)}`, { content, version }),
  deleteMemoryFile: (a: string, scope: string, name: string) => request<unknown>("DELETE", `${base(a)}/memory/${e(scope)}/files/${e(name)}`),
  exportMemory: (a: string, scope: string) => request<{ document?: string }>("GET", `${base(a)}/memory/${e(scope)}/export`),
  importMemory: (a: string, scope: string, document: string, mode: string, confirm: boolean) => request<{ written?: number; skipped?: number; deleted?: number }>("POST", `${base(a)}/memory/${e(scope)}/import`, { document, mode, confirm }),
  vault: (a: string) => request<{ names?: string[] }>("GET", `${base(a)}/vault`),
  setVault: (a: string, name: string, value: string) => request<unknown>("PUT", `${base(a)}/vault/${e(name)}`, { value }),
  deleteVault: (a: string, name: string) => request<unknown>("DELETE", `${base(a)}/vault/${e(name)}`),
  tools: (a: string) => request<{ tools?: AgentTool[] }>("GET", `${base(a)}/tools`),
  enableTool: (a: string, name: string, enabled: boolean) => request<unknown>("PUT", `${base(a)}/tools/${e(name)}/enabled`, { enabled }),
  mcp: (a: string) => request<{ servers?: MCPServer[] }>("GET", `${base(a)}/mcp`),
  putMCP: (a: string, server: MCPServer) => request<unknown>("POST", `${base(a)}/mcp`, { server }),
  deleteMCP: (a: string, name: string) => request<unknown>("DELETE", `${base(a)}/mcp/${e(name)}`),
  testMCP: (a: string, name: string) => request<TestResult>("POST", `${base(a)}/mcp/${e(name)}/test`),
  model: (a: string) => request<{ model?: { provider?: string; model_id?: string } }>("GET", `${base(a)}/model`),
  setModel: (a: string, provider: string, model_id: string) => request<unknown>("PUT", `${base(a)}/model`, { model: { provider, model_id } }),
  /** A project's settings of models (an empty project: the default one). */
  modelSettings: (project: string) => request<{ settings?: ModelSettings[] }>("GET", `/api/projects/${e(project || "default")}/models/settings`),
  setModelSettings: (project: string, settings: ModelSettings) =>
    request<{ settings?: ModelSettings }>("PUT", `/api/projects/${e(project || "default")}/models/settings`, { settings }),
  testModel: (provider: string, model_id: string) => request<TestResult>("POST", `${projectBase()}/models/test`, { model: { provider, model_id } }),
};
