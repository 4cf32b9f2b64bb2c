package agentstate

import (
	"cmp"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

// PromptVars are the facts of one session that the system prompt may
// mention. Zero fields take a default where one exists (Now: the current
// time, Platform and OSVersion: this host, AgentID: the directory's name).
type PromptVars struct {
	// Workspace is the session's working directory ({{CWD}}).
	Workspace string
	// TemporaryWorkspace marks a workspace allocated for this session
	// only; it gets no workspace memory.
	TemporaryWorkspace bool
	// Provider and ModelID are the session's model.
	Provider string
	ModelID  string
	// SessionID is the session's id.
	SessionID string
	// AgentID overrides the agent's id.
	AgentID string
	// WorkspaceInstructions are the workspace's AGENTS.md files, from its
	// project root down to the workspace, as the environment read them;
	// they follow the agent's own AGENTS.md in {{AGENTS_MD}}.
	WorkspaceInstructions []*penguinv1.InstructionFile
	// AppDataDir is Penguin's data root ({{PROJECT_DIR}}), presented to the
	// model as the app data directory so it is not mistaken for the task's.
	AppDataDir string
	// Now is the time {{DATE}} shows.
	Now time.Time
	// Platform and OSVersion describe the host commands run on.
	Platform  string
	OSVersion string
}

// SystemPrompt assembles the system prompt from the template in
// agentconfig.Config.SystemPrompt. Placeholders:
//
//	{{AGENTS_MD}}               the text of the agent's AGENTS.md, then the
//	                            workspace's AGENTS.md files, each under its path
//	{{SKILLS}}                  the skills section (agentconfig.Config.Skills), or nothing when off
//	{{VAULT}}                   the vault section (agentconfig.Config.Vault), or nothing when off
//	{{MEMORY}}                  the memory section (agentconfig.Config.Memory), or nothing when off
//	{{SKILL_METADATA}}          one "- name: description (path)" line per skill
//	{{VAULT_KEYS}}              one "- NAME" line per vault key; never a value
//	{{USER_MEMORY_INDEX}}       the user scope's MEMORY.md, capped
//	{{USER_MEMORY_DIR}}         the user scope's directory
//	{{WORKSPACE_MEMORY_INDEX}}  the workspace scope's MEMORY.md, capped
//	{{WORKSPACE_MEMORY_DIR}}    the workspace scope's directory
//	{{CWD}}                     the workspace
//	{{PROJECT_DIR}}             the app data directory
//	{{AGENT_ID}}, {{AGENT_STATE_DIR}}, {{SESSION_ID}}, {{PROVIDER}}, {{MODEL_ID}},
//	{{PLATFORM}}, {{OS_VERSION}}, {{DATE}}
//
// SKILL_METADATA and VAULT_KEYS belong in the section templates but also
// work in the main one (older templates put them there), and honour the
// section's toggle either way. Every substitution is a single pass: text
// that comes in through a placeholder (AGENTS.md, a memory index, a skill
// description) is never scanned again, so placeholder-like text in it
// stays as written. Unknown placeholders are left as they are. Paths are
// written with forward slashes on every platform.
//
// A State that Load kept (its directory's stamp held) builds each distinct
// prompt once: the engine builds one at every session's creation, and the
// sessions of one agent, workspace and model on one day get the same text
// (the default template does not name the session). What the prompt is
// made of is its key (the templates and toggles, AGENTS.md, the skills',
// vault's and session's facts); the memory indexes and the schedule files,
// read from the directory, are not, so a kept prompt shows them as they
// were at its build: a change to them changes the directory's stamp, and
// the next Load reads the directory again, with prompts of its own.
func (s *State) SystemPrompt(v PromptVars) string {
	k := s.promptKey(v)
	if s.prompts == nil {
		return s.buildPrompt(k)
	}
	return s.prompts.get(k, s.buildPrompt)
}

// promptKey is everything a system prompt is built from but the files
// the directory's stamp covers (the memory indexes, the schedule files).
type promptKey struct {
	// The templates, as agentconfig.Config has them, and the toggles.
	main, vault, skills, memory, workspaceMemory, schedules string
	vaultOn, skillsOn, memoryOn, schedulesOn                bool
	agentsMD, vaultKeys, skillMeta                          string
	cwd, projectDir, agentID, agentDir, sessionID           string
	provider, modelID, platform, osVersion, date            string
	// workspaceMemoryDir is the workspace's memory directory when the
	// memory section shows it (see memorySection).
	workspaceMemoryDir string
}

// promptKey returns the key of the prompt of v. The session's id is in it
// only when a template names it: it would make every session's key
// different.
func (s *State) promptKey(v PromptVars) promptKey {
	c := &s.Config
	k := promptKey{
		main: c.SystemPrompt, vaultOn: c.Vault.Enabled, skillsOn: c.Skills.Enabled,
		memoryOn: c.Memory.Enabled, schedulesOn: c.Schedules.Enabled,
		agentsMD:   agentsMD(s.AgentsMD, v.WorkspaceInstructions),
		projectDir: filepath.ToSlash(v.AppDataDir), agentID: cmp.Or(v.AgentID, s.AgentID()),
		agentDir: filepath.ToSlash(s.Dir), provider: v.Provider, modelID: v.ModelID,
		platform: cmp.Or(v.Platform, runtime.GOOS+"/"+runtime.GOARCH), osVersion: cmp.Or(v.OSVersion, hostOSVersion()),
	}
	if v.Workspace != "" {
		k.cwd = filepath.ToSlash(v.Workspace)
	}
	now := v.Now
	if now.IsZero() {
		now = time.Now()
	}
	k.date = now.Format("2006-01-02 (Monday)")
	if k.vaultOn {
		k.vault, k.vaultKeys = c.Vault.Prompt, s.vaultKeyLines()
	}
	if k.skillsOn {
		k.skills, k.skillMeta = c.Skills.Prompt, skillMetadata(s.Skills)
	}
	if k.schedulesOn {
		k.schedules = cmp.Or(c.Schedules.Prompt, agentconfig.DefaultSchedulesPrompt)
	}
	if k.memoryOn {
		k.memory = c.Memory.Prompt
		if v.Workspace != "" && !v.TemporaryWorkspace && strings.TrimSpace(c.Memory.WorkspacePrompt) != "" {
			k.workspaceMemory, k.workspaceMemoryDir = c.Memory.WorkspacePrompt, s.WorkspaceMemoryDir(v.Workspace)
		}
	}
	for _, t := range []string{k.main, k.vault, k.skills, k.memory, k.workspaceMemory, k.schedules} {
		if strings.Contains(t, "{{SESSION_ID}}") {
			k.sessionID = v.SessionID
			break
		}
	}
	return k
}

// buildPrompt builds the prompt of k.
func (s *State) buildPrompt(k promptKey) string {
	simple := map[string]string{
		"CWD":             k.cwd,
		"PROJECT_DIR":     k.projectDir,
		"AGENT_ID":        k.agentID,
		"AGENT_STATE_DIR": k.agentDir,
		"SESSION_ID":      k.sessionID,
		"PROVIDER":        k.provider,
		"MODEL_ID":        k.modelID,
		"PLATFORM":        k.platform,
		"OS_VERSION":      k.osVersion,
		"DATE":            k.date,
	}
	lookup := func(extra map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if val, ok := extra[name]; ok {
				return val, true
			}
			val, ok := simple[name]
			return val, ok
		}
	}

	inner := map[string]string{"VAULT_KEYS": k.vaultKeys, "SKILL_METADATA": k.skillMeta}
	sections := map[string]string{
		"AGENTS_MD":      k.agentsMD,
		"VAULT_KEYS":     k.vaultKeys,
		"SKILL_METADATA": k.skillMeta,
		"VAULT":          "",
		"SKILLS":         "",
		"MEMORY":         "",
		"SCHEDULES":      "",
		"SCHEDULE_LIST":  "",
	}
	if k.schedulesOn {
		list := scheduleLines(s.Schedules(), "(none yet)")
		sections["SCHEDULE_LIST"] = list
		sections["SCHEDULES"] = strings.TrimRight(expand(k.schedules, lookup(map[string]string{"SCHEDULE_LIST": list})), "\n")
	}
	if k.vaultOn {
		sections["VAULT"] = strings.TrimRight(expand(k.vault, lookup(inner)), "\n")
	}
	if k.skillsOn {
		sections["SKILLS"] = strings.TrimRight(expand(k.skills, lookup(inner)), "\n")
	}
	if k.memoryOn {
		sections["MEMORY"] = s.memorySection(k, lookup)
	}
	return expand(k.main, lookup(sections))
}

// promptCache holds the prompts a kept State built (see SystemPrompt),
// shared by the copies Load hands out of it, at most maxPrompts: an
// agent's sessions differ by workspace and model, few at a time.
type promptCache struct {
	mu sync.Mutex
	m  map[promptKey]string
}

// maxPrompts bounds a promptCache; a full one is emptied.
const maxPrompts = 32

// get returns the prompt of k, built by build when it is not kept.
func (c *promptCache) get(k promptKey, build func(promptKey) string) string {
	c.mu.Lock()
	p, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return p
	}
	p = build(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxPrompts {
		c.m = make(map[promptKey]string)
	}
	c.m[k] = p
	return p
}

// agentsMD joins the agent's own instructions and the workspace's
// AGENTS.md files. Each workspace file is named by its path, so the model
// knows where a rule comes from, and one that the environment's size bound
// cut says so (the model can read the rest with the workspace's tools).
func agentsMD(own string, files []*penguinv1.InstructionFile) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(own, "\n"))
	if len(files) == 0 {
		return b.String()
	}
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString("The workspace's AGENTS.md files follow, from the project root down to the working directory; where they disagree, the deeper file wins.")
	for _, f := range files {
		b.WriteString("\n\n## ")
		b.WriteString(filepath.ToSlash(f.GetPath()))
		if text := strings.TrimRight(f.GetContent(), "\n"); text != "" {
			b.WriteString("\n")
			b.WriteString(text)
		}
		if f.GetTruncated() {
			b.WriteString("\n[cut by the size bound on workspace instructions: read the file for the rest]")
		}
	}
	return b.String()
}

// memorySection renders the user part, plus the workspace part in a
// persistent workspace (k.workspaceMemory is set).
func (s *State) memorySection(k promptKey, lookup func(map[string]string) func(string) (string, bool)) string {
	user := s.UserMemoryDir()
	vars := map[string]string{
		"USER_MEMORY_DIR":   UserMemoryPath,
		"USER_MEMORY_INDEX": memoryIndex(user, UserMemoryPath),
	}
	out := expand(k.memory, lookup(vars))
	if k.workspaceMemory != "" {
		vars["WORKSPACE_MEMORY_DIR"] = WorkspaceMemoryPath
		vars["WORKSPACE_MEMORY_INDEX"] = memoryIndex(k.workspaceMemoryDir, WorkspaceMemoryPath)
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += "\n" + expand(k.workspaceMemory, lookup(vars))
	}
	return strings.TrimRight(out, "\n")
}

// vaultKeyLines lists the vault's names, one "- NAME" line each.
func (s *State) vaultKeyLines() string {
	keys := s.VaultKeys()
	if len(keys) == 0 {
		return "(the vault is empty)"
	}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(k)
	}
	return b.String()
}

// expand substitutes the placeholders lookup knows, in one pass, leaving
// the others as they are. A line that holds nothing but a placeholder that
// expands to nothing (a disabled section, an empty AGENTS.md) is dropped
// with one of the blank lines around it, so no gap is left behind.
//
// The prompt is built at every session's creation: the placeholders are
// found by hand rather than with regular expressions, and the result is
// sized first and written once (it was a tenth of a task's allocations).
func expand(tmpl string, lookup func(string) (string, bool)) string {
	size := len(tmpl)
	for i, j, name, ok := nextPlaceholder(tmpl, 0); ok; i, j, name, ok = nextPlaceholder(tmpl, j) {
		if val, ok := lookup(name); ok {
			size += len(val) - (j - i)
		}
	}
	var b strings.Builder
	b.Grow(size)
	lastBlank, dropped := true, false
	for line := range strings.Lines(tmpl) {
		var blank bool
		if !strings.Contains(line, "{{") {
			blank = strings.TrimSpace(line) == ""
		} else {
			if name, ok := wholeLine(line); ok {
				if val, ok := lookup(name); ok && val == "" {
					dropped = true
					continue
				}
			}
			blank = substitute(nil, line, lookup)
		}
		if blank && dropped && lastBlank {
			continue
		}
		dropped = false
		lastBlank = blank
		if strings.Contains(line, "{{") {
			substitute(&b, line, lookup)
		} else {
			b.WriteString(line)
		}
	}
	return b.String()
}

// substitute writes line to b (when b is not nil) with the placeholders
// lookup knows substituted, and reports whether what it writes is blank.
func substitute(b *strings.Builder, line string, lookup func(string) (string, bool)) bool {
	blank := true
	piece := func(s string) {
		if b != nil {
			b.WriteString(s)
		}
		blank = blank && strings.TrimSpace(s) == ""
	}
	from := 0
	for i, j, name, ok := nextPlaceholder(line, 0); ok; i, j, name, ok = nextPlaceholder(line, j) {
		piece(line[from:i])
		if val, ok := lookup(name); ok {
			piece(val)
		} else {
			piece(line[i:j])
		}
		from = j
	}
	piece(line[from:])
	return blank
}

// nextPlaceholder finds the first placeholder of s at or after from,
// {{NAME}} with NAME an upper-case letter followed by upper-case letters,
// digits and underscores: it is s[i:j].
func nextPlaceholder(s string, from int) (i, j int, name string, ok bool) {
	for {
		k := strings.Index(s[from:], "{{")
		if k < 0 {
			return 0, 0, "", false
		}
		i = from + k
		n := i + 2
		if n < len(s) && s[n] >= 'A' && s[n] <= 'Z' {
			for n++; n < len(s) && (s[n] >= 'A' && s[n] <= 'Z' || s[n] >= '0' && s[n] <= '9' || s[n] == '_'); n++ {
			}
			if strings.HasPrefix(s[n:], "}}") {
				return i, n + 2, s[i+2 : n], true
			}
		}
		from = i + 1
	}
}

// wholeLine returns the name of the placeholder that line holds and
// nothing else but spaces and tabs around it (and its newline).
func wholeLine(line string) (string, bool) {
	t := strings.TrimLeft(line, " \t")
	i, j, name, ok := nextPlaceholder(t, 0)
	if !ok || i != 0 || strings.Trim(strings.TrimSuffix(t[j:], "\n"), " \t") != "" {
		return "", false
	}
	return name, true
}

// hostOSVersion describes this host's operating system as well as it can
// be found without running a program: the distribution and the kernel on
// Linux, the platform name elsewhere. It is read once per process, not
// for every session's prompt: neither changes without a restart.
var hostOSVersion = sync.OnceValue(readHostOSVersion)

func readHostOSVersion() string {
	var parts []string
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				if p := strings.Trim(v, `"'`); p != "" {
					parts = append(parts, p)
				}
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		if k := strings.TrimSpace(string(data)); k != "" {
			parts = append(parts, "kernel "+k)
		}
	}
	if len(parts) == 0 {
		return runtime.GOOS
	}
	return strings.Join(parts, ", ")
}
