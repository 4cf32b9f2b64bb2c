import { describe, expect, it } from "vitest";
import { cost, price, stateWord, tokens, usageData, usageLine } from "./format";

describe("format", () => {
  it("states costs to the precision a request needs", () => {
    expect(cost(undefined)).toBe("");
    expect(cost(0)).toBe("$0.00");
    expect(cost(0.00053)).toBe("$0.00053");
    expect(cost(0.0049)).toBe("$0.0049");
    expect(cost(0.0123)).toBe("$0.012");
    expect(cost(3.456)).toBe("$3.46");
    expect(cost(1e-8)).toBe("<$0.000001");
  });

  it("counts tokens in k and M", () => {
    expect(tokens(999)).toBe("999");
    expect(tokens(1840)).toBe("1.8k");
    expect(tokens(25000)).toBe("25k");
    expect(tokens(1_500_000)).toBe("1.5M");
  });

  it("summarizes usage, saying what was not reported", () => {
    expect(usageLine({ total: "1852", output: "52", reasoning: "12", cache_read: "0", cost_usd: 0.00055 }))
      .toBe("1.9k tokens · 52 out · 12 reasoning · $0.00055");
    expect(usageLine({ total: 0, unreported: true })).toBe("usage not reported by the provider");
    expect(usageLine({ total: 100, output: 10, unreported: true })).toBe("100 tokens · 10 out · some usage not reported");
    expect(usageLine({ total: 100, output: 10 })).toBe("100 tokens · 10 out");
    expect(usageData({ total: "1852", output: 52, cost_usd: 0.00055 })).toEqual({ "data-total": "1852", "data-output": "52", "data-cost": "0.00055" });
    expect(usageData({ total: 5 })["data-cost"]).toBe("");
  });

  it("states a model's price per million tokens", () => {
    expect(price({ input: 0.25, output: 2 })).toBe("$0.25 in, $2.00 out per M tokens");
    expect(price(undefined)).toBe("");
  });

  it("names session states", () => {
    expect(stateWord("SESSION_STATE_AWAITING_APPROVAL")).toBe("awaiting approval");
    expect(stateWord("SESSION_STATE_IDLE", "STOP_REASON_ABORTED")).toBe("aborted");
    expect(stateWord("idle", "failed")).toBe("failed");
    expect(stateWord("idle", "completed")).toBe("idle");
  });
});
