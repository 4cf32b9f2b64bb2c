package agentstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

// testState builds a State in a temporary directory with one skill, an
// AGENTS.md and a vault.
func testState(t *testing.T) *State {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "coder")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, "pdf", "---\nname: pdf-tools\ndescription: Fill and merge PDF files.\n---\n# PDF\n")
	if err := os.WriteFile(filepath.Join(dir, AgentsFile), []byte("Always run go vet.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetVault("GITHUB_TOKEN", "ghp_SECRETVALUE123"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetVault("DB_PASSWORD", "hunter2-and-more"); err != nil {
		t.Fatal(err)
	}
	return st
}

func writeSkill(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, SkillsDir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(p, SkillFile)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var testVars = PromptVars{
	Workspace:  "/work/proj",
	Provider:   "openai",
	ModelID:    "gpt-5.5",
	SessionID:  "sess-42",
	AppDataDir: "/data/penguin",
	Now:        time.Date(2026, 8, 7, 10, 0, 0, 0, time.UTC),
	Platform:   "linux/amd64",
	OSVersion:  "Debian 13",
}

func TestSystemPromptPlaceholders(t *testing.T) {
	t.Parallel()
	st := testState(t)
	skill := SkillsDir + "/pdf/" + SkillFile
	cases := []struct {
		placeholder string
		vars        PromptVars
		want        string
	}{
		{"{{AGENTS_MD}}", testVars, "Always run go vet."},
		{"{{CWD}}", testVars, "/work/proj"},
		{"{{PROJECT_DIR}}", testVars, "/data/penguin"},
		{"{{AGENT_ID}}", testVars, "coder"},
		{"{{AGENT_ID}}", PromptVars{AgentID: "other"}, "other"},
		{"{{AGENT_STATE_DIR}}", testVars, filepath.ToSlash(st.Dir)},
		{"{{SESSION_ID}}", testVars, "sess-42"},
		{"{{PROVIDER}}", testVars, "openai"},
		{"{{MODEL_ID}}", testVars, "gpt-5.5"},
		{"{{PLATFORM}}", testVars, "linux/amd64"},
		{"{{OS_VERSION}}", testVars, "Debian 13"},
		{"{{DATE}}", testVars, "2026-08-07 (Friday)"},
		{"{{VAULT_KEYS}}", testVars, "- DB_PASSWORD\n- GITHUB_TOKEN"},
		{"{{SKILL_METADATA}}", testVars, "- pdf-tools: Fill and merge PDF files. (" + skill + ")"},
		{"{{SKILLS}}", testVars, "# Skills\nA skill is"},
		{"{{VAULT}}", testVars, "# Vault\n"},
		{"{{MEMORY}}", testVars, "# Memory\n"},
		{"{{USER_MEMORY_DIR}}", testVars, "{{USER_MEMORY_DIR}}"}, // only inside the memory section
		{"{{NOT_A_PLACEHOLDER}}", testVars, "{{NOT_A_PLACEHOLDER}}"},
		{"{{lower}}", testVars, "{{lower}}"},
	}
	for _, tc := range cases {
		s := *st
		s.Config.SystemPrompt = "<" + tc.placeholder + ">"
		got := s.SystemPrompt(tc.vars)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s expanded to %q, want it to contain %q", tc.placeholder, got, tc.want)
		}
	}
}

func TestSystemPromptDefaults(t *testing.T) {
	t.Parallel()
	st := testState(t)
	got := st.SystemPrompt(PromptVars{Workspace: "/w"})
	if !strings.Contains(got, time.Now().Format("2006-01-02")) {
		t.Error("{{DATE}} does not default to today")
	}
	if !strings.Contains(got, "Platform: ") || strings.Contains(got, "Platform: ,") {
		t.Error("{{PLATFORM}} has no default")
	}
	if strings.Contains(got, "{{") {
		t.Errorf("the default template left a placeholder:\n%s", got)
	}
}

// The default template, fully assembled: every section present, no
// placeholder left, no run of blank lines.
func TestSystemPromptDefaultTemplate(t *testing.T) {
	t.Parallel()
	st := testState(t)
	got := st.SystemPrompt(testVars)
	for _, want := range []string{
		"You are coder,", "Always run go vet.", "# Skills", "pdf-tools", "# Vault", "- GITHUB_TOKEN",
		"# Memory", "## User memory", "(nothing saved yet)", "## Workspace memory",
		"Working directory (CWD): /work/proj", "Model: gpt-5.5 from openai", "Date: 2026-08-07",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("assembled prompt lacks %q", want)
		}
	}
	if strings.Contains(got, "{{") {
		t.Errorf("a placeholder was left:\n%s", got)
	}
	if strings.Contains(got, "\n\n\n") {
		t.Errorf("the prompt has a run of blank lines:\n%s", got)
	}
}

func TestVaultValuesNeverInPrompt(t *testing.T) {
	t.Parallel()
	st := testState(t)
	templates := []string{
		agentconfig.DefaultSystemPrompt,
		"{{VAULT}}{{VAULT_KEYS}}{{AGENTS_MD}}{{SKILLS}}{{MEMORY}}",
		"{{GITHUB_TOKEN}} ${GITHUB_TOKEN} {{VAULT_GITHUB_TOKEN}}",
	}
	for _, vaultOn := range []bool{true, false} {
		for _, tmpl := range templates {
			s := *st
			s.Config.Vault.Enabled = vaultOn
			s.Config.SystemPrompt = tmpl
			s.Config.Vault.Prompt = "{{VAULT_KEYS}} {{GITHUB_TOKEN}} {{DB_PASSWORD}}\n"
			got := s.SystemPrompt(testVars)
			for name, value := range st.Vault {
				if strings.Contains(got, value) {
					t.Errorf("the value of %s reached the prompt (vault on: %v, template %q)", name, vaultOn, tmpl)
				}
			}
		}
	}
}

func TestSectionToggles(t *testing.T) {
	t.Parallel()
	st := testState(t)
	s := *st
	s.Config.Vault.Enabled = false
	s.Config.Skills.Enabled = false
	s.Config.Memory.Enabled = false
	got := s.SystemPrompt(testVars)
	for _, absent := range []string{"# Vault", "GITHUB_TOKEN", "# Skills", "pdf-tools", "# Memory"} {
		if strings.Contains(got, absent) {
			t.Errorf("a disabled section left %q in the prompt", absent)
		}
	}
	if strings.Contains(got, "\n\n\n") {
		t.Errorf("disabled sections left blank lines:\n%s", got)
	}
	// Legacy templates with inline placeholders honour the toggles too.
	s.Config.SystemPrompt = "keys: [{{VAULT_KEYS}}] skills: [{{SKILL_METADATA}}]"
	if got := s.SystemPrompt(testVars); got != "keys: [] skills: []" {
		t.Errorf("legacy inline placeholders with sections off = %q", got)
	}
	s.Config.Vault.Enabled, s.Config.Skills.Enabled = true, true
	if got := s.SystemPrompt(testVars); !strings.Contains(got, "- GITHUB_TOKEN") || !strings.Contains(got, "pdf-tools") {
		t.Errorf("legacy inline placeholders with sections on = %q", got)
	}
}

// Text that comes in through a placeholder is never expanded again.
func TestSinglePassSubstitution(t *testing.T) {
	t.Parallel()
	st := testState(t)
	s := *st
	s.AgentsMD = "literal {{CWD}} and {{VAULT}}"
	s.Skills = []Skill{{Name: "x", Dir: "x", Description: "uses {{SESSION_ID}}", Path: "/s/x/SKILL.md"}}
	s.Config.SystemPrompt = "{{AGENTS_MD}}|{{SKILLS}}"
	s.Config.Skills.Prompt = "{{SKILL_METADATA}}"
	got := s.SystemPrompt(testVars)
	want := "literal {{CWD}} and {{VAULT}}|- x: uses {{SESSION_ID}} (skills/x/SKILL.md)"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := st.PrepareMemory("", true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.UserMemoryDir(), MemoryIndexFile), []byte("- [x](x.md) — {{DATE}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Config.SystemPrompt = "{{MEMORY}}"
	s.Config.Memory.Prompt = "{{USER_MEMORY_INDEX}}"
	s.Config.Memory.WorkspacePrompt = ""
	if got := s.SystemPrompt(testVars); got != "- [x](x.md) — {{DATE}}" {
		t.Errorf("memory index was rescanned: %q", got)
	}
}

func TestEmptyCases(t *testing.T) {
	t.Parallel()
	st, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st.Config.SystemPrompt = "a\n{{AGENTS_MD}}\nb {{VAULT_KEYS}} {{SKILL_METADATA}}"
	got := st.SystemPrompt(testVars)
	if got != "a\nb (the vault is empty) (no skills installed)" {
		t.Errorf("got %q", got)
	}
}

func TestMemorySection(t *testing.T) {
	t.Parallel()
	st := testState(t)
	ws := t.TempDir()
	if err := st.PrepareMemory(ws, false); err != nil {
		t.Fatal(err)
	}
	wsDir := st.WorkspaceMemoryDir(ws)
	marker, err := os.ReadFile(filepath.Join(wsDir, ".workspace"))
	if err != nil || strings.TrimSpace(string(marker)) != realPath(ws) {
		t.Errorf(".workspace = %q, %v", marker, err)
	}
	if err := os.WriteFile(filepath.Join(st.UserMemoryDir(), MemoryIndexFile), []byte("- [Prefers pnpm](pnpm.md) — use pnpm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wsDir, MemoryIndexFile), []byte("- [Tests](tests.md) — real db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := testVars
	v.Workspace = ws
	got := st.SystemPrompt(v)
	for _, want := range []string{"use pnpm", "real db", "Directory: " + WorkspaceMemoryPath, "Directory: " + UserMemoryPath, "write_agent_file"} {
		if !strings.Contains(got, want) {
			t.Errorf("memory section lacks %q", want)
		}
	}
	// The engine holds memory: no path of its disk reaches the prompt,
	// where the environment's tools would be asked to open it.
	if strings.Contains(got, st.Dir) {
		t.Errorf("the prompt names the agent directory %s:\n%s", st.Dir, got)
	}
	v.TemporaryWorkspace = true
	got = st.SystemPrompt(v)
	if strings.Contains(got, "## Workspace memory") || strings.Contains(got, "real db") {
		t.Error("a temporary workspace got the workspace memory section")
	}
	if !strings.Contains(got, "use pnpm") {
		t.Error("a temporary workspace lost the user memory")
	}
	// A temporary workspace gets no directory.
	tmp := t.TempDir()
	if err := st.PrepareMemory(tmp, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.WorkspaceMemoryDir(tmp)); !os.IsNotExist(err) {
		t.Error("PrepareMemory created a directory for a temporary workspace")
	}
}

func TestMemoryIndexCaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 250; i++ {
		fmt.Fprintf(&b, "- [t%d](t%d.md) — hook\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, MemoryIndexFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := memoryIndex(dir, UserMemoryPath)
	if !strings.Contains(got, "[t199]") || strings.Contains(got, "[t200]") {
		t.Error("the index is not cut at 200 lines")
	}
	if !strings.Contains(got, "read "+UserMemoryPath+"/MEMORY.md for the rest") {
		t.Errorf("no truncation note naming the index by its agent path: %q", got[len(got)-120:])
	}
	long := strings.Repeat("x", 300) + "\n"
	if err := os.WriteFile(filepath.Join(dir, MemoryIndexFile), []byte(strings.Repeat(long, 150)), 0o644); err != nil {
		t.Fatal(err)
	}
	got = memoryIndex(dir, UserMemoryPath)
	body, _, _ := strings.Cut(got, "\n[the index")
	if n := len([]rune(body)); n > MemoryIndexMaxChars {
		t.Errorf("index body is %d characters, cap %d", n, MemoryIndexMaxChars)
	}
	if !strings.Contains(got, "the index is longer than shown") {
		t.Error("no truncation note after the character cap")
	}
	if data, _ := os.ReadFile(filepath.Join(dir, MemoryIndexFile)); len(data) != 150*len(long) {
		t.Error("the index file was changed")
	}
	if got := memoryIndex(t.TempDir(), UserMemoryPath); got != "(nothing saved yet)" {
		t.Errorf("missing index = %q", got)
	}
}

func TestMemoryKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws := filepath.Join(dir, "My App!")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	k := MemoryKey(ws)
	if !strings.HasPrefix(k, "My-App-") || len(k) != len("My-App-")+8 {
		t.Errorf("MemoryKey = %q", k)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(ws, link); err == nil {
		if MemoryKey(link) != k {
			t.Error("a symbolic link to the workspace has another key")
		}
	}
	if MemoryKey(filepath.Join(dir, "other")) == k {
		t.Error("two directories share a key")
	}
	if k := MemoryKey("/"); !strings.HasPrefix(k, "workspace-") {
		t.Errorf("MemoryKey(/) = %q", k)
	}
}

// The system prompts of PenguinHarness's reference agents assemble: every
// placeholder they use is filled in, the schedules section with the
// agent's schedules.
func TestReferenceTemplatesAssemble(t *testing.T) {
	t.Parallel()
	load := func(name string) *State {
		data, err := os.ReadFile(filepath.Join("..", "agentconfig", "testdata", "reference", name))
		if err != nil {
			t.Fatal(err)
		}
		// PenguinHarness's layout: <agent id>/agent_state.
		dir := filepath.Join(t.TempDir(), "default_agent", "agent_state")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := Load(dir)
		if err != nil {
			t.Fatalf("%s does not load: %v", name, err)
		}
		return st
	}
	prompt := load("partial_override.yaml").SystemPrompt(PromptVars{Workspace: "/w", Provider: "p", ModelID: "m", SessionID: "s", AppDataDir: "/data"})
	if strings.Contains(prompt, "{{") || !strings.Contains(prompt, "You are default_agent, an agent that works in /w") || !strings.Contains(prompt, "- Session: s") {
		t.Errorf("assembled prompt:\n%s", prompt)
	}
	st := load("every_key.yaml")
	if prompt := st.SystemPrompt(PromptVars{Workspace: "/w"}); !strings.Contains(prompt, "# Scheduled tasks\nFiles under schedule/ run on a cadence.\n(none yet)") || strings.Contains(prompt, "{{") {
		t.Errorf("the schedules section is not in the prompt:\n%s", prompt)
	}
	files := st.Files("/w")
	if err := files.Write("schedule/daily.yaml", "prompt: check the builds\nenabled: true\ncron: \"0 9 * * *\"\nworkspace: /w\n"); err != nil {
		t.Fatal(err)
	}
	if prompt := st.SystemPrompt(PromptVars{Workspace: "/w"}); !strings.Contains(prompt, "- schedule/daily.yaml: cron 0 9 * * *, enabled") {
		t.Errorf("the schedule is not listed:\n%s", prompt)
	}
}

// The model writes schedules with the agent-file tools; an invalid one is
// refused with its line and nothing is written.
func TestScheduleFiles(t *testing.T) {
	st, err := Init(filepath.Join(t.TempDir(), "agent"))
	if err != nil {
		t.Fatal(err)
	}
	files := st.Files("")
	err = files.Write("schedule/bad.yaml", "prompt: hi\nperiod: often\n")
	if err == nil || !strings.Contains(err.Error(), "schedule/bad.yaml:2: period:") {
		t.Fatalf("bad schedule: %v", err)
	}
	if _, err := files.Read("schedule/bad.yaml"); err == nil {
		t.Error("a refused schedule was written")
	}
	for _, p := range []string{"schedule/../x.yaml", "schedule/a/b.yaml", "schedule/x.txt"} {
		if err := files.Write(p, "prompt: p\nstart_at: 2030-01-01T00:00:00Z\nworkspace: w\n"); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if err := files.Write("schedule/once.yaml", "prompt: p\nstart_at: 2030-01-01T00:00:00Z\nworkspace: w\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := files.Read("schedule/"); err != nil || got != "- schedule/once.yaml: once, disabled" {
		t.Errorf("listing: %q, %v", got, err)
	}
	if err := files.Delete("schedule/once.yaml"); err != nil {
		t.Fatal(err)
	}
	if got, _ := files.Read("schedule"); got != "(no schedules yet)" {
		t.Errorf("after delete: %q", got)
	}
}

// A schedule the model writes names a model its session's project can
// call: one the check refuses is not written, and the refusal says why.
func TestScheduleFileModelChecked(t *testing.T) {
	st, err := Init(filepath.Join(t.TempDir(), "agent"))
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	files := st.Files("").WithModelCheck(func(provider, modelID string) error {
		asked = append(asked, provider+"/"+modelID)
		if modelID != "good" {
			return errors.New(`provider "p" has no model "bad"`)
		}
		return nil
	})
	const def = "prompt: p\nstart_at: 2030-01-01T00:00:00Z\nworkspace: w\nprovider: p\nmodel_id: %s\n"
	err = files.Write("schedule/bad.yaml", fmt.Sprintf(def, "bad"))
	if err == nil || !strings.Contains(err.Error(), `schedule/bad.yaml: model_id: provider "p" has no model "bad"`) {
		t.Fatalf("a schedule of an unknown model: %v", err)
	}
	if _, err := files.Read("schedule/bad.yaml"); err == nil {
		t.Error("a schedule of an unknown model was written")
	}
	if err := files.Write("schedule/good.yaml", fmt.Sprintf(def, "good")); err != nil {
		t.Fatal(err)
	}
	// The agent's default model (no provider) is not asked about.
	if err := files.Write("schedule/default.yaml", "prompt: p\nstart_at: 2030-01-01T00:00:00Z\nworkspace: w\n"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(asked, " ") != "p/bad p/good" {
		t.Errorf("models checked: %v", asked)
	}
}

// TestSystemPromptKeptOncePerInput checks that a State Load kept builds a
// prompt once for the sessions that get the same text, and that every
// input of the prompt, changed, gives the prompt a State that keeps
// nothing builds: the session's facts, the templates, the vault of one
// copy, and the directory's files, edited and loaded again.
func TestSystemPromptKeptOncePerInput(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("directory stamps are trusted on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "coder")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, "pdf", "---\nname: pdf-tools\ndescription: Fill and merge PDF files.\n---\n# PDF\n")
	agents := filepath.Join(dir, AgentsFile)
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(agents, "Always run go vet.\n")
	ws := t.TempDir()
	load := func() *State {
		t.Helper()
		// Past the stamp's racy window, so that Load keeps the State.
		time.Sleep(50 * time.Millisecond)
		st, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if st.prompts == nil {
			t.Fatal("Load did not keep the State")
		}
		return st
	}
	st := load()
	if err := st.PrepareMemory(ws, false); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(st.UserMemoryDir(), MemoryIndexFile), "- [Prefers pnpm](pnpm.md)\n")
	st = load()
	v := testVars
	v.Workspace = ws
	// check builds the prompt of s and v and compares it with what a State
	// that keeps nothing builds.
	check := func(what string, s *State, v PromptVars) string {
		t.Helper()
		got := s.SystemPrompt(v)
		bare := *s
		bare.prompts = nil
		if want := bare.SystemPrompt(v); got != want {
			t.Errorf("%s: the kept prompt differs from the one built:\n%s\n----\n%s", what, got, want)
		}
		return got
	}
	first := check("first", st, v)
	other := v
	other.SessionID = "sess-43"
	if again := check("another session", load(), other); unsafe.StringData(again) != unsafe.StringData(first) {
		t.Error("a second session of the same agent, workspace and model built its prompt again")
	}
	differs := func(what string, s *State, v PromptVars, want string) {
		t.Helper()
		if got := check(what, s, v); !strings.Contains(got, want) {
			t.Errorf("%s: the prompt lacks %q", what, want)
		}
	}
	m := v
	m.ModelID = "gpt-6"
	differs("another model", st, m, "gpt-6")
	w := v
	w.Workspace = t.TempDir()
	differs("another workspace", st, w, w.Workspace)
	d := v
	d.Now = d.Now.Add(24 * time.Hour)
	differs("the next day", st, d, "2026-08-08")
	named := *st
	named.Config.SystemPrompt = "Session {{SESSION_ID}}."
	differs("a template naming the session", &named, v, "sess-42")
	differs("a template naming the session, another one", &named, other, "sess-43")
	vault := *st
	vault.Config = st.Config.Clone()
	vault.Config.Vault.Enabled = true
	vault.Vault = map[string]string{"NEW_KEY": "secret"}
	differs("a copy with its own vault", &vault, v, "NEW_KEY")
	write(agents, "Never push on Fridays.\n")
	differs("AGENTS.md edited", load(), v, "Never push on Fridays.")
	write(filepath.Join(st.UserMemoryDir(), MemoryIndexFile), "- [Uses bun](bun.md)\n")
	differs("the memory index edited", load(), v, "Uses bun")
	write(filepath.Join(st.WorkspaceMemoryDir(ws), MemoryIndexFile), "- [Tests](tests.md) real db\n")
	differs("the workspace's memory index edited", load(), v, "real db")
}

// BenchmarkSystemPrompt measures a session's system prompt with the
// default template and an agent directory as Init makes it, a memory
// index in it, as the engine builds one at each CreateSession: from a
// State that Load kept (the prompt built once, then looked up by its key)
// and from one that keeps nothing (built each time, as before).
func BenchmarkSystemPrompt(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "coder")
	if _, err := Init(dir); err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	st, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.PrepareMemory(ws, false); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.UserMemoryDir(), MemoryIndexFile), []byte("- [Prefers pnpm](pnpm.md)\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if st, err = Load(dir); err != nil || st.prompts == nil {
		b.Fatalf("Load did not keep the State: %v", err)
	}
	v := PromptVars{Workspace: ws, Provider: "openai", ModelID: "gpt-5.5", AppDataDir: "/data/penguin"}
	for _, kept := range []bool{true, false} {
		b.Run(fmt.Sprintf("kept=%v", kept), func(b *testing.B) {
			s := *st
			if !kept {
				s.prompts = nil
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				v.SessionID = fmt.Sprint("sess-", i)
				_ = s.SystemPrompt(v)
			}
		})
	}
}
