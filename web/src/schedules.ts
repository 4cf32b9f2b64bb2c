// The schedule routes of the gateway
// (/api/projects/{p}/agents/{a}/schedules/…): one function per route. A
// definition is sent as the YAML of the agent's schedule/<name>.yaml, which
// the engine validates, naming the line of a problem.
import { currentProject, request } from "./api";

const e = encodeURIComponent;
const base = (agent: string, name = "") =>
  `/api/projects/${e(currentProject())}/agents/${e(agent)}/schedules${name ? "/" + e(name) : ""}`;

export interface ScheduleRun {
  id?: string; name?: string; due_at?: string; state?: string; reason?: string; session_id?: string; updated_at?: string;
}
export interface Schedule {
  name: string; agent?: string; prompt?: string; enabled?: boolean; cadence?: string; next_run?: string;
  last_run?: ScheduleRun; error?: string; yaml?: string;
}

export const schedules = {
  list: (agent: string) => request<{ schedules?: Schedule[] }>("GET", base(agent)),
  create: (agent: string, name: string, yaml: string) => request<{ schedule?: Schedule }>("POST", base(agent), { name, yaml }),
  update: (agent: string, name: string, yaml: string) => request<{ schedule?: Schedule }>("PUT", base(agent, name), { yaml }),
  remove: (agent: string, name: string) => request<unknown>("DELETE", base(agent, name)),
  runNow: (agent: string, name: string) => request<{ run?: ScheduleRun }>("POST", base(agent, name) + "/run"),
  runs: (agent: string, name: string) => request<{ runs?: ScheduleRun[] }>("GET", base(agent, name) + "/runs"),
};

/** withEnabled returns a definition's YAML with its enabled line set,
 * added when the file has none. */
export function withEnabled(yaml: string, on: boolean): string {
  const line = `enabled: ${on}`;
  if (/^enabled:.*$/m.test(yaml)) return yaml.replace(/^enabled:.*$/m, line);
  return yaml.replace(/\n?$/, "\n") + line + "\n";
}

/** template is the definition a new schedule starts from: hourly from a
 * minute from now, in a new session per run. */
export function template(now = new Date()): string {
  const start = new Date(Math.ceil(now.getTime() / 60000) * 60000 + 60000).toISOString().replace(/\.\d+Z$/, "Z");
  return `prompt: Check the build and summarize any failures.
enabled: true
start_at: ${start}
period: 1h
workspace: .
`;
}
