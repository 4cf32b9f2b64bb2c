package agentconfig

import "slices"

// The skills and memory sections as earlier versions wrote them into every
// new agent's system_config.yaml. They told the model to read skills and
// write memory by paths on the engine's disk, which the environment's file
// tools refuse (and, in a split deployment, cannot see); a file that still
// holds one of them verbatim gets today's text instead (see
// upgradeSections). A text someone edited is kept as written.
//
// The skills section has had two earlier defaults: the first named
// read_file, the second did not say what a [use_skills] block asks.
var legacySkillsPrompts = []string{`# Skills
A skill is a set of instructions for one kind of task, kept in a SKILL.md file. When a task matches a skill's description, read that SKILL.md with read_file before you start, and follow it.
{{SKILL_METADATA}}
`, `# Skills
A skill is a set of instructions for one kind of task, kept in a SKILL.md file. When a task matches a skill's description, read that SKILL.md with read_agent_file (its path follows the description) before you start, and follow it; files it refers to are read the same way, by their path within the skill's directory.
{{SKILL_METADATA}}
`}

const (
	legacyMemoryPrompt = `# Memory
You keep a memory across sessions as Markdown files: facts that cannot be re-derived from the workspace or its history. Save who the user is and how they want you to work (with the reason), decisions and constraints that the code does not show, and stable entry points into other systems. Moments that produce such a fact: a request made a second time, a correction meant to hold beyond this task, a stated habit or practice, a working detail you would otherwise have to ask for again. Never save what the code, configuration or git history already says, progress of the current task, guesses, long transcript excerpts, or credentials. When unsure whether something is worth keeping, ask.

One file per topic, with front matter:
---
name: short-topic-name
description: one line saying what the file holds
updated_at: YYYY-MM-DD
---
Each memory directory has a MEMORY.md index with one line per file, "- [Title](file.md) — hook", under 150 characters, at most 200 lines. Update the index in the same step as the file. Delete a topic that turns out wrong together with its index line. Write dates in full (YYYY-MM-DD).

## User memory
Things true wherever you work. Directory: {{USER_MEMORY_DIR}}
{{USER_MEMORY_INDEX}}
`
)

// upgradeSections replaces section texts that are an earlier version's
// defaults, word for word, with today's.
func upgradeSections(c *Config) {
	if slices.Contains(legacySkillsPrompts, c.Skills.Prompt) {
		c.Skills.Prompt = DefaultSkillsPrompt
	}
	if c.Memory.Prompt == legacyMemoryPrompt {
		c.Memory.Prompt = DefaultMemoryPrompt
	}
}
