// Package agentstate loads and creates an agent's state directory: the
// files that define what an agent is, kept as plain data so that a person
// and an optimizing agent edit the same things.
//
//	<dir>/
//	├── system_config.yaml   system prompt template, max_turns, model,
//	│                        compaction, tools, retry, prompt sections
//	├── AGENTS.md            the developer's instructions ({{AGENTS_MD}})
//	├── skills/<name>/SKILL.md  skills; their front matter reaches the prompt
//	├── memory/              what the agent keeps across sessions
//	└── .vault.yaml          secrets for command environments (mode 0600);
//	                         .vault.toml in a directory PenguinHarness wrote
//
// Load reads a directory (absent files take defaults, malformed ones are
// errors naming file and line; package agentconfig reads
// system_config.yaml), Init creates one without ever overwriting,
// State.SystemPrompt assembles the prompt, State.ToolConfig gives the
// environment its tool set, and ExtractSummary reads the summary out of a
// compaction reply.
package agentstate
