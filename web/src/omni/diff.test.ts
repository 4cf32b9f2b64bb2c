import { describe, expect, it } from "vitest";
import { fileChange, lineDiff } from "./diff";

describe("diffs", () => {
  it("of an edit keep the shared lines as context", () => {
    expect(lineDiff("a\nb\nc", "a\nB\nc")).toEqual([
      { kind: "ctx", text: "a" }, { kind: "del", text: "b" }, { kind: "add", text: "B" }, { kind: "ctx", text: "c" },
    ]);
  });
  it("come from edit_file and write_file arguments", () => {
    expect(fileChange("edit_file", '{"file_path":"add.sh","old_string":"$(( $1 - $2 ))","new_string":"$(( $1 + $2 ))"}')).toEqual({
      path: "add.sh", lines: [{ kind: "del", text: "$(( $1 - $2 ))" }, { kind: "add", text: "$(( $1 + $2 ))" }],
    });
    expect(fileChange("write_file", '{"file_path":"N.md","content":"x\\ny\\n"}')?.lines).toEqual([{ kind: "add", text: "x" }, { kind: "add", text: "y" }]);
    expect(fileChange("exec_command", '{"cmd":"ls"}')).toBeNull();
    expect(fileChange("edit_file", '{"file_path":')).toBeNull();
  });
});
