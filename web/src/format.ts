import { num, type TokenCounts } from "./api";

export function tokens(n: number): string {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return Math.round(n / 1e3) + "k";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}

export function cost(usd: number | undefined): string {
  if (usd === undefined || usd === null) return "";
  if (usd < 0.01) return "$" + usd.toFixed(4);
  return "$" + usd.toFixed(2);
}

/** usageLine summarizes token counts: total, output, cache reads, cost. */
export function usageLine(u: TokenCounts | undefined): string {
  if (!u) return "";
  const parts = [`${tokens(num(u.total))} tokens`, `${tokens(num(u.output))} out`];
  if (num(u.cache_read)) parts.push(`${tokens(num(u.cache_read))} cached`);
  if (u.cost_usd !== undefined) parts.push(cost(u.cost_usd));
  return parts.join(" · ");
}

/** stateWord names a session state for people; the enum name or the
 * stream's word both work. */
export function stateWord(state: string | undefined, lastStatus?: string): string {
  const s = (state ?? "").replace(/^SESSION_STATE_/, "").toLowerCase();
  const last = (lastStatus ?? "").replace(/^STOP_REASON_/, "").toLowerCase();
  if ((s === "idle" || s === "") && last && last !== "completed") return last === "aborted" ? "aborted" : "failed";
  return s.replace("_", " ") || "idle";
}

export function ago(iso: string | undefined): string {
  if (!iso) return "";
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (s < 60) return "now";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}
