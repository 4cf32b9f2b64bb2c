import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SessionChange } from "../api";
import { entries, listOptionsKey, loadListOptions, NO_AGENT, saveListOptions, SCHEDULED, type Entry } from "./SessionList";

const row = (id: string, agent?: string, source?: string): SessionChange => ({ session: { session_id: id, agent, source } }) as SessionChange;

/** show writes lines as words: [agent n] for a group, <Scheduled n open>
 * for the folder, ids for rows, a leading ~ for what is in the folder. */
const show = (lines: Entry[]) => lines.map((e) =>
  e.kind === "folder" ? `<${SCHEDULED} ${e.count}${e.open ? " open" : ""}>` :
  (e.folder ? "~" : "") + (e.kind === "group" ? `[${e.agent} ${e.count}]` : e.row.session.session_id));

describe("session list entries", () => {
  it("lists rows as they are without grouping", () => {
    const rows = [row("a", "coder"), row("b")];
    expect(entries(rows, "none")).toEqual(rows.map((r) => ({ kind: "row", row: r })));
  });
  it("groups rows under their agents, by name, the others last, each group in the rows' order", () => {
    const rows = [row("s1", "ops"), row("s2"), row("s3", "default"), row("s4", "ops")];
    expect(show(entries(rows, "agent"))).toEqual(["[default 1]", "s3", "[ops 2]", "s1", "s4", `[${NO_AGENT} 1]`, "s2"]);
  });
  it("keeps the scheduled sessions in a folder at the end, its rows shown only while it is open", () => {
    const rows = [row("s1", "ops", "schedule"), row("s2", "ops"), row("s3", "default", "schedule"), row("s4")];
    expect(show(entries(rows, "none", { open: false }))).toEqual(["s2", "s4", `<${SCHEDULED} 2>`]);
    expect(show(entries(rows, "none", { open: true }))).toEqual(["s2", "s4", `<${SCHEDULED} 2 open>`, "~s1", "~s3"]);
  });
  it("groups the folder's sessions under their agents too", () => {
    const rows = [row("s1", "ops", "schedule"), row("s2", "ops"), row("s3", "default", "schedule"), row("s5", "ops", "schedule")];
    expect(show(entries(rows, "agent", { open: true }))).toEqual(
      ["[ops 1]", "s2", `<${SCHEDULED} 3 open>`, "~[default 1]", "~s3", "~[ops 2]", "~s1", "~s5"]);
  });
  it("shows no folder when no schedule started a session, and none on the archived shelf", () => {
    expect(show(entries([row("a"), row("b", "ops")], "none", { open: true }))).toEqual(["a", "b"]);
    expect(show(entries([row("a", "ops", "schedule"), row("b")], "none"))).toEqual(["a", "b"]);
  });
});

describe("list options", () => {
  beforeEach(() => {
    const store = new Map<string, string>();
    globalThis.localStorage = {
      getItem: (k: string) => store.get(k) ?? null, setItem: (k: string, v: string) => void store.set(k, v),
      removeItem: (k: string) => void store.delete(k), clear: () => store.clear(), key: () => null, length: 0,
    } as Storage;
  });
  afterEach(() => {
    delete (globalThis as { localStorage?: Storage }).localStorage;
  });
  it("are remembered per project, the defaults elsewhere", () => {
    saveListOptions("alpha", { grouping: "agent", scheduledOpen: true });
    expect(loadListOptions("alpha")).toEqual({ grouping: "agent", scheduledOpen: true });
    expect(loadListOptions("beta")).toEqual({ grouping: "none", scheduledOpen: false });
    expect(loadListOptions("")).toEqual({ grouping: "none", scheduledOpen: false });
    saveListOptions("", { grouping: "agent", scheduledOpen: false });
    expect(loadListOptions("")).toEqual({ grouping: "agent", scheduledOpen: false });
    expect(loadListOptions("alpha")).toEqual({ grouping: "agent", scheduledOpen: true });
  });
  it("read as the defaults when the stored value is not theirs", () => {
    localStorage.setItem(listOptionsKey("alpha"), "{not json");
    expect(loadListOptions("alpha")).toEqual({ grouping: "none", scheduledOpen: false });
    localStorage.setItem(listOptionsKey("alpha"), JSON.stringify({ grouping: "workspace", scheduledOpen: "yes" }));
    expect(loadListOptions("alpha")).toEqual({ grouping: "none", scheduledOpen: false });
  });
});
