// Attachments of the composer: images go to the model as data URLs in the
// task's images; a text file's content goes into the prompt, named and
// fenced, as the CLI does (internal/attach.FileText); anything else is
// refused. The limits are the server's (GET /api/defaults), checked here
// first so that a person learns at once, and again by the engine.

/** The limits as GET /api/defaults sends them (protojson: int64 as strings). */
export interface AttachmentLimits {
  max_image_bytes?: string;
  max_images?: number;
  image_types?: string[];
  max_file_bytes?: string;
}

export interface Attachment {
  name: string;
  kind: "image" | "file";
  /** A data URL for an image; the fenced block for a file. */
  content: string;
  size: number;
}

/** size writes n bytes for a person, as the CLI does: 5 MiB, 256 KiB, 900 B. */
export function size(n: number): string {
  const one = (x: number) => (Math.round(x * 10) / 10).toString();
  if (n >= 1 << 20) return `${one(n / (1 << 20))} MiB`;
  if (n >= 1 << 10) return `${one(n / (1 << 10))} KiB`;
  return `${n} B`;
}

/** fileBlock is how a text file goes into the prompt. */
export function fileBlock(name: string, text: string): string {
  let fence = "```";
  while (text.includes(fence)) fence += "`";
  return `Attached file ${name}:\n${fence}\n${text.replace(/\n$/, "")}\n${fence}`;
}

/** withFiles is the prompt followed by the attached text files. */
export function withFiles(prompt: string, att: Attachment[]): string {
  return [prompt, ...att.filter((a) => a.kind === "file").map((a) => a.content)].join("\n\n").trim();
}

/** read turns a picked, pasted or dropped file into an attachment, or
 * throws the reason it cannot be one. have is what is attached already. */
export async function read(file: File, limits: AttachmentLimits, have: Attachment[]): Promise<Attachment> {
  const name = file.name || "pasted";
  const types = limits.image_types ?? [];
  if (file.type.startsWith("image/")) {
    if (!types.includes(file.type)) throw new Error(`${name} is ${file.type}; the models take ${types.map((t) => t.slice(6).toUpperCase()).join(", ")} images.`);
    const max = Number(limits.max_image_bytes ?? 0);
    if (max && file.size > max) throw new Error(`${name} is ${size(file.size)}; an image may be at most ${size(max)}.`);
    const most = limits.max_images ?? 0;
    if (most && have.filter((a) => a.kind === "image").length >= most) throw new Error(`A message takes at most ${most} images.`);
    return { name, kind: "image", content: await dataURL(file), size: file.size };
  }
  const max = Number(limits.max_file_bytes ?? 0);
  if (max && file.size > max) throw new Error(`${name} is ${size(file.size)}; a file may be at most ${size(max)}.`);
  const bytes = new Uint8Array(await file.arrayBuffer());
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new Error(`${name} is not text; only images and text files can be attached.`);
  }
  if (text.includes("\0")) throw new Error(`${name} is not text; only images and text files can be attached.`);
  return { name, kind: "file", content: fileBlock(name, text), size: file.size };
}

async function dataURL(file: File): Promise<string> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return `data:${file.type};base64,${btoa(bin)}`;
}
