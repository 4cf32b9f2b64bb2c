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
func (s *State) SystemPrompt(v PromptVars) string {
	simple := s.simpleVars(v)
	lookup := func(extra map[string]string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			if val, ok := extra[name]; ok {
				return val, true
			}
			val, ok := simple[name]
			return val, ok
		}
	}

	vaultKeys, skillMeta := "", ""
	if s.Config.Vault.Enabled {
		vaultKeys = s.vaultKeyLines()
	}
	if s.Config.Skills.Enabled {
		skillMeta = skillMetadata(s.Skills)
	}
	inner := map[string]string{"VAULT_KEYS": vaultKeys, "SKILL_METADATA": skillMeta}

	sections := map[string]string{
		"AGENTS_MD":      agentsMD(s.AgentsMD, v.WorkspaceInstructions),
		"VAULT_KEYS":     vaultKeys,
		"SKILL_METADATA": skillMeta,
		"VAULT":          "",
		"SKILLS":         "",
		"MEMORY":         "",
		"SCHEDULES":      "",
		"SCHEDULE_LIST":  "",
	}
	if s.Config.Schedules.Enabled {
		list := scheduleLines(s.Schedules(), "(none yet)")
		prompt := cmp.Or(s.Config.Schedules.Prompt, agentconfig.DefaultSchedulesPrompt)
		sections["SCHEDULE_LIST"] = list
		sections["SCHEDULES"] = strings.TrimRight(expand(prompt, lookup(map[string]string{"SCHEDULE_LIST": list})), "\n")
	}
	if s.Config.Vault.Enabled {
		sections["VAULT"] = strings.TrimRight(expand(s.Config.Vault.Prompt, lookup(inner)), "\n")
	}
	if s.Config.Skills.Enabled {
		sections["SKILLS"] = strings.TrimRight(expand(s.Config.Skills.Prompt, lookup(inner)), "\n")
	}
	if s.Config.Memory.Enabled {
		sections["MEMORY"] = s.memorySection(v, lookup)
	}
	return expand(s.Config.SystemPrompt, lookup(sections))
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
// persistent workspace.
func (s *State) memorySection(v PromptVars, lookup func(map[string]string) func(string) (string, bool)) string {
	user := s.UserMemoryDir()
	vars := map[string]string{
		"USER_MEMORY_DIR":   UserMemoryPath,
		"USER_MEMORY_INDEX": memoryIndex(user, UserMemoryPath),
	}
	out := expand(s.Config.Memory.Prompt, lookup(vars))
	if v.Workspace != "" && !v.TemporaryWorkspace && strings.TrimSpace(s.Config.Memory.WorkspacePrompt) != "" {
		dir := s.WorkspaceMemoryDir(v.Workspace)
		vars["WORKSPACE_MEMORY_DIR"] = WorkspaceMemoryPath
		vars["WORKSPACE_MEMORY_INDEX"] = memoryIndex(dir, WorkspaceMemoryPath)
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		out += "\n" + expand(s.Config.Memory.WorkspacePrompt, lookup(vars))
	}
	return strings.TrimRight(out, "\n")
}

// simpleVars are the placeholders that are plain facts of the session.
func (s *State) simpleVars(v PromptVars) map[string]string {
	now := v.Now
	if now.IsZero() {
		now = time.Now()
	}
	platform := v.Platform
	if platform == "" {
		platform = runtime.GOOS + "/" + runtime.GOARCH
	}
	osVersion := v.OSVersion
	if osVersion == "" {
		osVersion = hostOSVersion()
	}
	agentID := v.AgentID
	if agentID == "" {
		agentID = s.AgentID()
	}
	cwd := ""
	if v.Workspace != "" {
		cwd = filepath.ToSlash(v.Workspace)
	}
	return map[string]string{
		"CWD":             cwd,
		"PROJECT_DIR":     filepath.ToSlash(v.AppDataDir),
		"AGENT_ID":        agentID,
		"AGENT_STATE_DIR": filepath.ToSlash(s.Dir),
		"SESSION_ID":      v.SessionID,
		"PROVIDER":        v.Provider,
		"MODEL_ID":        v.ModelID,
		"PLATFORM":        platform,
		"OS_VERSION":      osVersion,
		"DATE":            now.Format("2006-01-02 (Monday)"),
	}
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
