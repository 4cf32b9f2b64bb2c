import { describe, expect, it } from "vitest";
import { parseSkillsBlock } from "./skills";

describe("skills", () => {
  it("reads the [use_skills] block the engine writes", () => {
    expect(parseSkillsBlock("[use_skills]\nskills: lint, pdf\n[/use_skills]\n\nfix it\nplease")).toEqual({ skills: ["lint", "pdf"], rest: "fix it\nplease" });
    expect(parseSkillsBlock("[use_skills]\nskills: lint\n[/use_skills]")).toEqual({ skills: ["lint"], rest: "" });
    expect(parseSkillsBlock("<use_skills>\nskills: old\n</use_skills>\n\nhi")).toEqual({ skills: ["old"], rest: "hi" });
  });
  it("leaves other text alone", () => {
    expect(parseSkillsBlock("fix it")).toBeNull();
    expect(parseSkillsBlock("see [use_skills]\nskills: lint\n[/use_skills]")).toBeNull();
    expect(parseSkillsBlock("[use_skills]\nskills: \n[/use_skills]")).toBeNull();
  });
});
