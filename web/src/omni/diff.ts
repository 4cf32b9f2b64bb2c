// Diffs of the file-editing tools, from their arguments: what an
// approval card and a tool card show instead of raw JSON.

export interface DiffLine {
  kind: "add" | "del" | "ctx";
  text: string;
}

export interface FileChange {
  path: string;
  lines: DiffLine[];
}

/** fileChange returns the change a tool call makes to a file, or null for
 * a tool that edits none (or arguments that do not parse yet). */
export function fileChange(name: string, args: string): FileChange | null {
  let a: Record<string, unknown>;
  try {
    a = JSON.parse(args);
  } catch {
    return null;
  }
  const path = typeof a.file_path === "string" ? a.file_path : "";
  if (name === "edit_file" && typeof a.old_string === "string" && typeof a.new_string === "string") {
    return { path, lines: lineDiff(a.old_string, a.new_string) };
  }
  if (name === "write_file" && typeof a.content === "string") {
    return { path, lines: a.content.replace(/\n$/, "").split("\n").map((text) => ({ kind: "add", text })) };
  }
  return null;
}

/** lineDiff is a line diff of two short texts: the common head and tail
 * as context, the middle as removed then added lines. Edits replace one
 * contiguous span, so this is the exact diff for them. */
export function lineDiff(before: string, after: string): DiffLine[] {
  const a = before.split("\n");
  const b = after.split("\n");
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  return [
    ...a.slice(0, head).map((text) => ({ kind: "ctx" as const, text })),
    ...a.slice(head, a.length - tail).map((text) => ({ kind: "del" as const, text })),
    ...b.slice(head, b.length - tail).map((text) => ({ kind: "add" as const, text })),
    ...a.slice(a.length - tail).map((text) => ({ kind: "ctx" as const, text })),
  ];
}
