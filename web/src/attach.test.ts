import { describe, expect, it } from "vitest";
import { fileBlock, read, size, withFiles } from "./attach";

const limits = { max_image_bytes: "100", max_images: 1, image_types: ["image/png", "image/jpeg"], max_file_bytes: "50" };

describe("attach", () => {
  it("writes sizes as the CLI does", () => {
    expect(size(900)).toBe("900 B");
    expect(size(256 << 10)).toBe("256 KiB");
    expect(size(5 << 20)).toBe("5 MiB");
    expect(size(1536)).toBe("1.5 KiB");
  });

  it("fences a file longer than any fence inside it", () => {
    expect(fileBlock("a.md", "x\n```\ny\n")).toBe("Attached file a.md:\n````\nx\n```\ny\n````");
    expect(withFiles("look", [{ name: "a", kind: "file", content: "F", size: 1 }, { name: "i", kind: "image", content: "data:", size: 1 }])).toBe("look\n\nF");
  });

  it("refuses what the server would, saying why", async () => {
    const png = new File([new Uint8Array(10)], "a.png", { type: "image/png" });
    const img = await read(png, limits, []);
    expect(img.kind).toBe("image");
    expect(img.content).toMatch(/^data:image\/png;base64,/);
    await expect(read(png, limits, [img])).rejects.toThrow("at most 1 images");
    await expect(read(new File([new Uint8Array(200)], "big.png", { type: "image/png" }), limits, [])).rejects.toThrow("big.png is 200 B; an image may be at most 100 B.");
    await expect(read(new File(["x"], "a.svg", { type: "image/svg+xml" }), limits, [])).rejects.toThrow("the models take PNG, JPEG images");
    await expect(read(new File([new Uint8Array([0xff, 0xfe, 0])], "a.bin"), limits, [])).rejects.toThrow("a.bin is not text");
    await expect(read(new File(["y".repeat(60)], "long.txt"), limits, [])).rejects.toThrow("long.txt is 60 B; a file may be at most 50 B.");
    const txt = await read(new File(["hello\n"], "n.txt", { type: "text/plain" }), limits, []);
    expect(txt.content).toBe("Attached file n.txt:\n```\nhello\n```");
  });
});
