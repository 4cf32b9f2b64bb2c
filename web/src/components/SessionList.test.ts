import { describe, expect, it } from "vitest";
import type { SessionChange } from "../api";
import { entries, NO_AGENT } from "./SessionList";

const row = (id: string, agent?: string): SessionChange => ({ session: { session_id: id, agent } }) as SessionChange;

describe("session list entries", () => {
  it("lists rows as they are without grouping", () => {
    const rows = [row("a", "coder"), row("b")];
    expect(entries(rows, "none")).toEqual(rows.map((r) => ({ kind: "row", row: r })));
  });
  it("groups rows under their agents, by name, the others last, each group in the rows' order", () => {
    const rows = [row("s1", "ops"), row("s2"), row("s3", "default"), row("s4", "ops")];
    const lines = entries(rows, "agent").map((e) => (e.kind === "group" ? `[${e.agent} ${e.count}]` : e.row.session.session_id));
    expect(lines).toEqual(["[default 1]", "s3", "[ops 2]", "s1", "s4", `[${NO_AGENT} 1]`, "s2"]);
  });
});
