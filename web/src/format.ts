import { num, type ModelPrice, type TokenCounts } from "./api";

export function tokens(n: number): string {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return Math.round(n / 1e3) + "k";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}

/** cost states an amount in USD: cents from a dollar up, a tenth of a
 * cent below, and two significant digits below a cent, where a model
 * request usually lands. */
export function cost(usd: number | undefined): string {
  if (usd === undefined || usd === null) return "";
  if (usd === 0) return "$0.00";
  if (usd < 1e-6) return "<$0.000001";
  if (usd < 0.01) return "$" + usd.toPrecision(2);
  if (usd < 1) return "$" + usd.toFixed(3);
  return "$" + usd.toFixed(2);
}

/** price states a model's price per million tokens, input and output. */
export function price(p: ModelPrice | undefined): string {
  if (!p || (p.input === undefined && p.output === undefined)) return "";
  const usd = (n: number | undefined) => "$" + (n ?? 0).toFixed(2);
  return `${usd(p.input)} in, ${usd(p.output)} out per M tokens`;
}

/** usageLine summarizes token counts: total, output (and the reasoning
 * part of it), cache reads, cost. Counts a provider did not report are
 * said to be missing, not shown as zeros. */
export function usageLine(u: TokenCounts | undefined): string {
  if (!u) return "";
  if (u.unreported && !num(u.total)) return "usage not reported by the provider";
  const parts = [`${tokens(num(u.total))} tokens`, `${tokens(num(u.output))} out`];
  if (num(u.reasoning)) parts.push(`${tokens(num(u.reasoning))} reasoning`);
  if (num(u.cache_read)) parts.push(`${tokens(num(u.cache_read))} cached`);
  if (u.cost_usd !== undefined && u.cost_usd !== null) parts.push(cost(u.cost_usd));
  if (u.unreported) parts.push("some usage not reported");
  return parts.join(" · ");
}

/** usageData carries the exact counts behind a usage line as data-
 * attributes, for tools (and the browser test) that read the page. */
export function usageData(u: TokenCounts | undefined): Record<string, string> {
  return {
    "data-total": String(num(u?.total)),
    "data-output": String(num(u?.output)),
    "data-cost": u?.cost_usd === undefined || u?.cost_usd === null ? "" : String(u.cost_usd),
  };
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
