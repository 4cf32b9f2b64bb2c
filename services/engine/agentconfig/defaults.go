package agentconfig

import (
	"strconv"
	"strings"
)

// DefaultSystemPrompt is the built-in system prompt template. It is written
// into every new agent's system_config.yaml, where it can be edited; the
// placeholders are filled in by State.SystemPrompt.
const DefaultSystemPrompt = `You are {{AGENT_ID}}, a software engineering agent. You work inside a workspace through tools: you read code, run commands, change files and check the results yourself. Do the task; do not just describe how it could be done.

# How to work
- Look before you change. Read the relevant files and search the code before editing; do not guess at names, paths, versions or APIs you can check.
- Keep changes focused on the task and consistent with the surrounding code: its style, its libraries, its conventions. No unrelated refactoring.
- Use read_file to read, grep and glob to search, edit_file for targeted changes and write_file for new files; use exec_command for everything else: builds, tests, git, installing.
- Verify your work: build it, run the tests or the program, and read the output. When something fails, find the cause instead of working around the symptom.
- A command that outlasts its foreground wait moves to the background and returns a process id: poll it with input_command and stop it with kill_command. Do not leave servers or watchers running when you are done.
- Calls that do not depend on each other can go in the same turn: they run concurrently.
- Hand a self-contained subtask to run_subagent when it can be fully described in one prompt; give it all the context it needs and say exactly what it must return.
- If the request is ambiguous in a way the workspace cannot settle, ask. Otherwise make a reasonable choice, state it, and keep going.
- A reply without a tool call ends the task. End with a short account of what you did, how you verified it, and anything left open.

# Care
- Ask before anything destructive or hard to undo that the user did not request: deleting data, rewriting git history, force-pushing, touching files outside the workspace.
- A denied tool call was refused by the user or by policy: do not repeat it unchanged; adapt, or explain what you need.
- Never print, log or commit secrets.

# Instructions from AGENTS.md
{{AGENTS_MD}}

{{SKILLS}}

{{VAULT}}

{{MEMORY}}

# Environment
- Working directory (CWD): {{CWD}}
- Platform: {{PLATFORM}}, {{OS_VERSION}}
- Date: {{DATE}}
- Model: {{MODEL_ID}} from {{PROVIDER}}
`

// DefaultVaultPrompt is the {{VAULT}} section. Only key names reach the
// model: the values are set in command environments and nowhere else.
const DefaultVaultPrompt = `# Vault
These environment variables are set in every command you run. Their values are secret: use them by name in commands (for example "$GITHUB_TOKEN"), never print them, write them to files or ask the user for them.
{{VAULT_KEYS}}
`

// DefaultSkillsPrompt is the {{SKILLS}} section.
const DefaultSkillsPrompt = `# Skills
A skill is a set of instructions for one kind of task, kept in a SKILL.md file. When a task matches a skill's description, read that SKILL.md with read_agent_file (its path follows the description) before you start, and follow it; files it refers to are read the same way, by their path within the skill's directory. A user message that starts with a [use_skills] block names skills to use for it: read each named skill's SKILL.md before anything else and follow it; if the message names skills but no task, ask what is needed before you start.
{{SKILL_METADATA}}
`

// DefaultMemoryPrompt is the part of the {{MEMORY}} section every session
// gets: what memory is for, how to keep it, and the user-scope index.
const DefaultMemoryPrompt = `# Memory
You keep a memory across sessions as Markdown files, which the engine holds for you: read them with read_agent_file, write them with write_agent_file and remove them with delete_agent_file, by the paths below (the workspace's file tools do not reach them). Keep in memory facts that cannot be re-derived from the workspace or its history. Save who the user is and how they want you to work (with the reason), decisions and constraints that the code does not show, and stable entry points into other systems. Moments that produce such a fact: a request made a second time, a correction meant to hold beyond this task, a stated habit or practice, a working detail you would otherwise have to ask for again. Never save what the code, configuration or git history already says, progress of the current task, guesses, long transcript excerpts, or credentials. When unsure whether something is worth keeping, ask.

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

// DefaultMemoryWorkspacePrompt is the part of the {{MEMORY}} section added
// in a persistent workspace.
const DefaultMemoryWorkspacePrompt = `## Workspace memory
Things true of this workspace only. Directory: {{WORKSPACE_MEMORY_DIR}}
Save a fact here when it is about this workspace, and in user memory when it holds everywhere.
{{WORKSPACE_MEMORY_INDEX}}
`

// DefaultSchedulesPrompt is the {{SCHEDULES}} section when
// schedules.enabled is on and schedules.prompt is empty: how the model
// manages the agent's schedules with its agent-file tools.
const DefaultSchedulesPrompt = `# Schedules
You can give yourself timed tasks. A schedule sends a preset prompt to you on a cadence, in a new session per run or in one existing session. Each is one file schedule/<name>.yaml among your agent files: read them with read_agent_file ("schedule/" lists them), write them with write_agent_file and remove them with delete_agent_file. A definition that is not valid is refused with the line and field at fault, and nothing is saved. Saved changes are picked up within about 30 seconds.

Fields: prompt (required, the text each run sends); enabled (true or false, default false); a cadence: period ("30m", "12h", "7d", counted from start_at) with start_at (an RFC 3339 time such as 2026-08-01T09:00:00Z), or cron (five fields, such as "0 9 * * 1-5") with timezone (such as Europe/Paris; default UTC), or start_at alone for a one-shot; end_at (optional); session_id to run in an existing session, or workspace (required then) with provider and model_id (both or neither; neither takes your default model) for a new session per run; missed (run_once or skip: a due time missed while the server was down) and overlap (skip or queue: a due time that comes while the previous run still runs).

Before creating a schedule, read the list and update the one that already does the job rather than adding a duplicate; delete schedules that are no longer wanted. Current schedules:
{{SCHEDULE_LIST}}
`

// DefaultCompactionPrompt asks the model for the summary that replaces the
// context in summarize mode. The summary-extraction ladder (ExtractSummary)
// reads the [summary] block it asks for.
const DefaultCompactionPrompt = `The context is full. The conversation above will be replaced by a summary that you write now, and you will continue the work from that summary alone, so it must be complete and exact. Cover:

1. The user's requests and goals, with every constraint and preference they stated; quote them where the wording matters.
2. What has been done: files created or changed (with paths), commands run and what they showed, decisions made and why.
3. The current state: what works, what fails (with the exact error text), and what you were doing at this moment.
4. What remains, in order, starting with the next concrete step.
5. Details that would be costly to find again: paths, names, identifiers, versions, commands, URLs.

Do not call any tool. Put the whole summary between [summary] and [/summary], and write nothing after [/summary].
`

// DefaultCompactionRetryNote goes ahead of the compaction prompt when the
// previous attempt gave no usable summary.
const DefaultCompactionRetryNote = `Your previous reply could not be used as a summary: it called a tool, or it had no text between [summary] and [/summary]. Tools are not available for this step. Reply with the summary only.
`

// DefaultYAML renders the system_config.yaml that Init writes: the
// defaults of Default(), with comments that explain each key. Every value
// comes from Default(), which owns them; the template holds only the
// layout and the comments.
func DefaultYAML() string {
	d := Default()
	values := strings.NewReplacer(
		"${version}", strconv.Itoa(d.Version),
		"${max_turns}", strconv.Itoa(d.MaxTurns),
		"${durable_tasks}", strconv.FormatBool(d.DurableTasks),
		"${thinking_level}", d.Model.ThinkingLevel,
		"${max_tokens}", strconv.FormatInt(d.Model.MaxTokens, 10),
		"${request_timeout_ms}", strconv.FormatInt(d.Model.RequestTimeoutMS, 10),
		"${compaction_enabled}", strconv.FormatBool(d.Compaction.Enabled),
		"${compaction_mode}", d.Compaction.Mode,
		"${context_threshold}", strconv.FormatInt(d.Compaction.ContextThreshold, 10),
		"${turns_threshold}", strconv.FormatInt(d.Compaction.TurnsThreshold, 10),
		"${max_attempts}", strconv.Itoa(d.Retry.MaxAttempts),
		"${base_delay}", d.Retry.BaseDelay.String(),
		"${max_delay}", d.Retry.MaxDelay.String(),
		"${vault_enabled}", strconv.FormatBool(d.Vault.Enabled),
		"${skills_enabled}", strconv.FormatBool(d.Skills.Enabled),
		"${memory_enabled}", strconv.FormatBool(d.Memory.Enabled),
	)
	var b strings.Builder
	w := func(s string) { b.WriteString(values.Replace(s)) }
	prompt := func(s, prefix string) { b.WriteString(indent(s, prefix)) }
	w(`# Agent configuration. Keys left out take their built-in defaults; a key
# written here replaces its default wholesale (it is not merged). Keys are
# in Penguin's spelling; a file in PenguinHarness's spelling
# (timeoutMs, max_context_length, mcpServers: [{name, config}], ...) loads
# too, as long as it keeps to one spelling throughout.

name: ` + d.Name + `
description: ` + d.Description + `
# The agent state's version, bumped by an optimizer on each accepted change.
version: ${version}

# The system prompt template. Placeholders:
#   {{AGENTS_MD}} AGENTS.md; {{SKILLS}}, {{VAULT}}, {{MEMORY}} the sections
#   configured below; {{CWD}} the workspace; {{PROJECT_DIR}} the app data
#   directory; {{AGENT_ID}}, {{SESSION_ID}}, {{PROVIDER}}, {{MODEL_ID}},
#   {{PLATFORM}}, {{OS_VERSION}}, {{DATE}}, {{AGENT_STATE_DIR}}.
# Unknown placeholders are left as they are.
system_prompt: |
`)
	prompt(d.SystemPrompt, "  ")
	w(`
# The most model requests in one task; -1 means no limit.
max_turns: ${max_turns}

# A task outlives the engine running it: when that engine dies or stops, the
# task resumes from its log where the engine restarts (or on the replica that
# takes the run over). A tool call that was running is never run again: it
# gets an interrupted output and the model decides.
durable_tasks: ${durable_tasks}

model:
  # The agent's default model, for clients that do not pick one per session
  # (provider and model_id go together).
  # provider: openai
  # model_id: gpt-5.5
  # none, low, medium, high, xhigh or max; a task may ask for another.
  thinking_level: ${thinking_level}
  # The output token cap of one request; -1 leaves it to the provider.
  max_tokens: ${max_tokens}
  # The model's context window, when the gateway's table does not know it.
  # context_window: 200000
  # The timeout of one model request, in milliseconds; 0 turns it off.
  request_timeout_ms: ${request_timeout_ms}
  # The model that reads images for text-only models (describe_image).
  # vision_model:
  #   provider: google
  #   model_id: gemini-3.1-pro-preview

compaction:
  # The automatic triggers; a manual compaction works either way.
  enabled: ${compaction_enabled}
  # summarize (the model writes a summary that replaces the context) or
  # discard (the context is dropped).
  mode: ${compaction_mode}
  # Compact when the last request's context reaches this many tokens (capped
  # at the model's context window less 2048); 0 turns the trigger off.
  context_threshold: ${context_threshold}
  # Compact when the session reaches this many turns; -1 turns it off.
  turns_threshold: ${turns_threshold}
  # The instruction appended to the context to get the summary, which must
  # come between [summary] and [/summary].
  prompt: |
`)
	prompt(d.Compaction.Prompt, "    ")
	w(`  # Put ahead of the prompt when an attempt gave no usable summary.
  retry_note: |
`)
	prompt(d.Compaction.RetryNote, "    ")
	w(`
# Reconnects after a failed model request: up to max_attempts re-sends,
# waiting base_delay × 2^n, capped at max_delay.
retry:
  max_attempts: ${max_attempts}
  base_delay: ${base_delay}
  max_delay: ${max_delay}

# The tool set. Leaving builtin out offers every builtin tool with its
# current definition. Writing a builtin list replaces that set: only the
# tools listed are offered (a list of engine tools alone, such as
# run_subagent, offers no environment tool). An entry may override
# description, parameters (a JSON Schema), permission (r or rw), for_model
# (vision or text-only), timeout_ms, max_output_length, and
# call_description (false removes the "description" argument).
tools:
  # builtin:
  #   - name: exec_command
  #     timeout_ms: 300000
  #   - name: read_file
  # Tools backed by a command: it runs with bash -c in the workspace, gets
  # the arguments JSON on stdin and in PENGUIN_TOOL_ARGS.
  # custom:
  #   - name: word_count
  #     description: Count the words of a file.
  #     permission: r
  #     command: wc -w "$(jq -r .path)"
  #     parameters:
  #       type: object
  #       properties:
  #         path: {type: string, description: The file to count.}
  #       required: [path]
  # MCP servers; their tools join as mcp__<name>__<tool>. A url speaks
  # streamable HTTP; transport: sse selects the legacy HTTP+SSE transport.
  # mcp_servers:
  #   - name: filesystem
  #     command: npx
  #     args: ["-y", "@modelcontextprotocol/server-filesystem", "."]
  #   - name: docs
  #     url: https://example.com/mcp
  #     headers: {Authorization: "Bearer ..."}
  #     permission: r

# The vault section ({{VAULT}}): the names of the vault's variables, never
# their values. Off, the variables are still set in commands.
vault:
  enabled: ${vault_enabled}
  prompt: |
`)
	prompt(d.Vault.Prompt, "    ")
	w(`
# The skills section ({{SKILLS}}): the name and description of each
# skills/<name>/SKILL.md.
skills:
  enabled: ${skills_enabled}
  prompt: |
`)
	prompt(d.Skills.Prompt, "    ")
	w(`
# The memory section ({{MEMORY}}): prompt always, workspace_prompt only in a
# persistent workspace.
memory:
  enabled: ${memory_enabled}
  prompt: |
`)
	prompt(d.Memory.Prompt, "    ")
	w(`  workspace_prompt: |
`)
	prompt(d.Memory.WorkspacePrompt, "    ")
	return b.String()
}

// indent prefixes every non-empty line of s; s must end with a newline.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(l)
	}
	return b.String()
}
