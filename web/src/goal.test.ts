import { describe, expect, it } from "vitest";
import { goalCommand, parseBudget } from "./goal";

describe("goal", () => {
  it("reads budgets", () => {
    expect(parseBudget("")).toBe(0);
    expect(parseBudget("-1")).toBe(0);
    expect(parseBudget("500k")).toBe(500000);
    expect(parseBudget("2M")).toBe(2000000);
    expect(parseBudget("1500")).toBe(1500);
    expect(() => parseBudget("lots")).toThrow(/not a token budget/);
    expect(() => parseBudget("0")).toThrow(/not a token budget/);
  });
  it("reads /goal commands", () => {
    expect(goalCommand("/goal:500k make all tests pass")).toEqual({ objective: "make all tests pass", budget: 500000 });
    expect(goalCommand("/goal fix it")).toEqual({ objective: "fix it", budget: 0 });
    expect(goalCommand("fix it")).toBeNull();
    expect(() => goalCommand("/goal:2m")).toThrow(/needs an objective/);
  });
});
