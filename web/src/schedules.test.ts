import { describe, expect, it } from "vitest";
import { template, withEnabled } from "./schedules";

describe("withEnabled", () => {
  it("replaces the enabled line", () => {
    expect(withEnabled("prompt: p\nenabled: true\nperiod: 1h\n", false)).toBe("prompt: p\nenabled: false\nperiod: 1h\n");
  });
  it("adds one when the file has none", () => {
    expect(withEnabled("prompt: p", true)).toBe("prompt: p\nenabled: true\n");
  });
});

describe("template", () => {
  it("starts on a whole minute at least a minute ahead", () => {
    expect(template(new Date("2026-08-01T09:00:30.500Z"))).toContain("start_at: 2026-08-01T09:02:00Z");
  });
});
