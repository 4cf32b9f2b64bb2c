/** Goal mode in the composer: the budget a person writes, and the
 * `/goal[:budget] objective` command, as the CLI reads them. */

/** parseBudget reads a token budget: empty or -1 for none (0), a whole
 * number, or a number with k or m ("500k", "2m"). It throws, with the
 * reason, on anything else. */
export function parseBudget(s: string): number {
  let t = s.trim().toLowerCase();
  if (t === "" || t === "-1") return 0;
  let mult = 1;
  if (t.endsWith("k")) { mult = 1e3; t = t.slice(0, -1); }
  else if (t.endsWith("m")) { mult = 1e6; t = t.slice(0, -1); }
  const n = /^\d+(\.\d+)?$/.test(t) ? Math.round(Number(t) * mult) : NaN;
  if (!Number.isFinite(n) || n < 1) throw new Error(`"${s}" is not a token budget: write a number such as 200000, 500k or 2m, or leave it empty for none`);
  return n;
}

/** goalCommand reads `/goal[:budget] objective`; null when text is no
 * such command. */
export function goalCommand(text: string): { objective: string; budget: number } | null {
  const m = /^\/goal(?::(\S*))?(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!m) return null;
  const objective = (m[2] ?? "").trim();
  if (!objective) throw new Error("/goal needs an objective: /goal[:budget] objective, for example /goal:500k make all tests pass");
  return { objective, budget: parseBudget(m[1] ?? "") };
}
