package agentstate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

func TestInit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "agents", "default")
	st, err := Init(dir)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if !reflect.DeepEqual(st.Config, agentconfig.Default()) {
		t.Errorf("a new agent's config differs from agentconfig.Default()")
	}
	if st.Dir != dir || st.AgentID() != "default" {
		t.Errorf("Dir = %q, AgentID = %q", st.Dir, st.AgentID())
	}
	if st.AgentsMD != "" || len(st.Skills) != 0 || len(st.Vault) != 0 {
		t.Errorf("a new agent has instructions, skills or secrets: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, AgentsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Init created AGENTS.md (err %v)", err)
	}
	if m := fileMode(t, filepath.Join(dir, SkillsDir)); !m.IsDir() {
		t.Errorf("skills is not a directory: %v", m)
	}
	if runtime.GOOS != "windows" {
		if m := fileMode(t, filepath.Join(dir, VaultFile)).Perm(); m != 0o600 {
			t.Errorf("vault mode = %04o, want 0600", m)
		}
		if m := fileMode(t, filepath.Join(dir, ConfigFile)).Perm(); m&0o022 != 0 {
			t.Errorf("config is writable by others: %04o", m)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "# ") || !strings.Contains(string(data), "system_prompt: |") {
		t.Errorf("the written config is not the commented template:\n%s", data)
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	custom := "system_prompt: mine\nmax_turns: 3\n"
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetVault("TOKEN", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AgentsFile), []byte("be brief"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		st, err = Init(dir)
		if err != nil {
			t.Fatalf("Init #%d: %v", i+3, err)
		}
	}
	if st.Config.SystemPrompt != "mine" || st.Config.MaxTurns != 3 {
		t.Errorf("Init overwrote the config: %+v", st.Config)
	}
	if st.Vault["TOKEN"] != "abc" || st.AgentsMD != "be brief" {
		t.Errorf("Init lost the vault or AGENTS.md: %v %q", st.VaultKeys(), st.AgentsMD)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ConfigFile)); string(got) != custom {
		t.Errorf("config file changed: %q", got)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("a temporary file was left behind: %s", e.Name())
		}
	}
}

func TestLoadMissingDirectoryIsDefaults(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nowhere")
	st, err := Load(dir)
	if err != nil {
		t.Fatalf("Load of a missing directory: %v", err)
	}
	if !reflect.DeepEqual(st.Config, agentconfig.Default()) || st.AgentsMD != "" || st.Skills != nil || len(st.Vault) != 0 {
		t.Errorf("not the defaults: %+v", st)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Error("Load created the directory")
	}
}

func TestLoadRelativeDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if _, err := Init("agent"); err != nil {
		t.Fatal(err)
	}
	st, err := Load("agent")
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(st.Dir) {
		t.Errorf("Dir %q is not absolute", st.Dir)
	}
}

func TestLoadMalformedFiles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(dir string) error
		file  string // the file the error must name
		want  string
	}{
		{"config syntax", func(d string) error {
			return os.WriteFile(filepath.Join(d, ConfigFile), []byte("model:\n\tmax_tokens: 1\n"), 0o644)
		}, ConfigFile, ":2: "},
		{"config unknown key", func(d string) error {
			return os.WriteFile(filepath.Join(d, ConfigFile), []byte("max_turns: 4\nmodell: {}\n"), 0o644)
		}, ConfigFile, `:2: unknown key "modell"`},
		{"vault syntax", func(d string) error {
			return os.WriteFile(filepath.Join(d, VaultFile), []byte("A: 1\nB: [\n"), 0o600)
		}, VaultFile, ""},
		{"vault bad key", func(d string) error {
			return os.WriteFile(filepath.Join(d, VaultFile), []byte("GOOD: 1\n2BAD: x\n"), 0o600)
		}, VaultFile, `:2: invalid vault key "2BAD"`},
		{"vault nested value", func(d string) error {
			return os.WriteFile(filepath.Join(d, VaultFile), []byte("A:\n  - x\n"), 0o600)
		}, VaultFile, "must be a string"},
		{"vault not a mapping", func(d string) error {
			return os.WriteFile(filepath.Join(d, VaultFile), []byte("- A\n"), 0o600)
		}, VaultFile, "expected a mapping"},
		{"skill front matter", func(d string) error {
			p := filepath.Join(d, SkillsDir, "broken")
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, SkillFile), []byte("---\nname: broken\ndescription: [oops\n---\nbody\n"), 0o644)
		}, filepath.Join(SkillsDir, "broken", SkillFile), ""},
		{"skill unclosed front matter", func(d string) error {
			p := filepath.Join(d, SkillsDir, "open")
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, SkillFile), []byte("---\nname: open\n"), 0o644)
		}, filepath.Join(SkillsDir, "open", SkillFile), ":1: the front matter opened by \"---\" is never closed"},
		{"AGENTS.md unreadable", func(d string) error {
			return os.Mkdir(filepath.Join(d, AgentsFile), 0o755)
		}, AgentsFile, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load accepted a malformed file")
			}
			path := filepath.Join(dir, tc.file)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			if tc.want != "" && !strings.Contains(err.Error(), path+tc.want) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestSkillFrontMatterErrorLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, SkillsDir, "broken")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	// Line 4 of the file holds the bad value. yaml.v3 reports some syntax
	// errors one line early (at the 0-based line of their context), so the
	// test asks for the front matter's offset to be applied: 3 or later,
	// where the front matter's own numbering would say 2.
	if err := os.WriteFile(filepath.Join(p, SkillFile), []byte("---\nname: broken\nother: fine\ndescription: [oops\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	var ce *agentconfig.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *agentconfig.ConfigError", err)
	}
	if ce.Line < 3 {
		t.Errorf("error %q at line %d, want a file line (3 or after)", err, ce.Line)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Parallel()
	noHome := func() (string, error) { return "", errors.New("no home") }
	home := func() (string, error) { return "/home/u", nil }
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cases := []struct {
		name string
		env  map[string]string
		home func() (string, error)
		want string
	}{
		{"PENGUIN_HOME", map[string]string{"PENGUIN_HOME": "/srv/penguin", "XDG_DATA_HOME": "/x"}, home, "/srv/penguin/agents/default"},
		{"XDG_DATA_HOME", map[string]string{"XDG_DATA_HOME": "/x"}, home, "/x/penguin/agents/default"},
		{"home", nil, home, "/home/u/.local/share/penguin/agents/default"},
		{"no home", nil, noHome, ".penguin/agents/default"},
	}
	for _, tc := range cases {
		if runtime.GOOS == "windows" && tc.name == "home" {
			continue
		}
		got := defaultDir(env(tc.env), tc.home, noHome)
		if filepath.ToSlash(got) != tc.want {
			t.Errorf("%s: defaultDir = %q, want %q", tc.name, got, tc.want)
		}
	}
	if DefaultDir() == "" {
		t.Error("DefaultDir() is empty")
	}
}

func TestAgentID(t *testing.T) {
	t.Parallel()
	for dir, want := range map[string]string{
		"/data/agents/coder":             "coder",
		"/data/agents/coder/agent_state": "coder",
	} {
		if got := (&State{Dir: dir}).AgentID(); got != want {
			t.Errorf("AgentID(%s) = %q, want %q", dir, got, want)
		}
	}
}

// TestLoadReparsesAnEditedConfig checks the cache of parsed
// configurations: an edit to system_config.yaml applies to the next Load,
// a broken edit is reported rather than answered from the cache, and what
// one caller does to its configuration's lists does not reach the next.
func TestLoadReparsesAnEditedConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, ConfigFile)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *State {
		t.Helper()
		st, err := Load(dir)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return st
	}
	write("max_turns: 7\ntools:\n  mcp_servers:\n    - {name: one, command: srv, args: [a], env: {K: v}}\n")
	first := load()
	if first.Config.MaxTurns != 7 || len(first.Config.Tools.MCPServers) != 1 {
		t.Fatalf("first load: %+v", first.Config)
	}
	first.Config.Tools.MCPServers[0].Args[0] = "changed"
	first.Config.Tools.MCPServers[0].Env["K"] = "changed"
	first.Config.Tools.MCPServers = append(first.Config.Tools.MCPServers, agentconfig.MCPServer{Name: "two"})
	again := load()
	if m := again.Config.Tools.MCPServers; len(m) != 1 || m[0].Args[0] != "a" || m[0].Env["K"] != "v" {
		t.Fatalf("a caller's change reached the next load: %+v", m)
	}

	write("max_turns: 9\n")
	if got := load().Config.MaxTurns; got != 9 {
		t.Fatalf("after an edit, max_turns = %d, want 9", got)
	}
	write("max_turns: [\n")
	if _, err := Load(dir); err == nil {
		t.Fatal("a broken edit loaded without error")
	}
}

func TestWriteConfigValidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := agentconfig.Default()
	c.Compaction.Mode = "fold"
	err := WriteConfig(dir, c)
	if err == nil || !strings.Contains(err.Error(), "compaction.mode") {
		t.Fatalf("WriteConfig of an invalid config: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, ConfigFile)); !os.IsNotExist(statErr) {
		t.Error("an invalid config was written")
	}
}

// TestLoadCachedUntilChanged checks that Load keeps what it read while the
// directory's stamp holds, hands out copies of it, and still sees every
// edit at the next call: one made right before it, in place and of the
// same size, and one made after the directory had settled.
func TestLoadCachedUntilChanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("directory stamps are trusted on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "agent")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	writeFile := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agents := filepath.Join(dir, AgentsFile)
	writeFile(agents, "one")
	settle := func() { time.Sleep(50 * time.Millisecond) }
	load := func() *State {
		t.Helper()
		st, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	settle()
	first := load()
	if _, cached := loadedStates.get(dir, func(kept dirstamp.Stamp) bool { return kept.Holds(dir) }); !cached {
		t.Fatal("an unchanged directory is not kept: every Load reads it again")
	}
	first.Vault["TOKEN"] = "x"
	first.Config.Tools.Builtin = append(first.Config.Tools.Builtin[:0], agentconfig.ToolSpec{Name: "changed"})
	if again := load(); again.Vault["TOKEN"] != "" || reflect.DeepEqual(again.Config.Tools.Builtin, first.Config.Tools.Builtin) {
		t.Error("a change to one loaded State shows in the next")
	}
	// In place, the same size, right away: the stamp cannot be trusted
	// yet, and the file is read.
	overwrite := func(data string) {
		t.Helper()
		f, err := os.OpenFile(agents, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(data), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	overwrite("two")
	if got := load().AgentsMD; got != "two" {
		t.Errorf("right after an edit, AGENTS.md = %q, want two", got)
	}
	settle()
	load()
	overwrite("six")
	settle()
	if got := load().AgentsMD; got != "six" {
		t.Errorf("after a settled edit, AGENTS.md = %q, want six", got)
	}
	writeFile(filepath.Join(dir, SkillsDir, "review", SkillFile), "---\nname: review\ndescription: Reviews.\n---\n")
	settle()
	if got := load().Skills; len(got) != 1 || got[0].Name != "review" {
		t.Errorf("a skill added is not seen: %+v", got)
	}
}

// TestLoadHeld checks that LoadHeld hands out the kept State for a stamp
// equal to the one it was kept with, without checking the directory
// again (its caller just did), and checks the directory as Load does for
// any other stamp.
func TestLoadHeld(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("directory stamps are trusted on Linux only")
	}
	dir := filepath.Join(t.TempDir(), "agent")
	if _, err := Init(dir); err != nil {
		t.Fatal(err)
	}
	agents := filepath.Join(dir, AgentsFile)
	if err := os.WriteFile(agents, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	held, ok := dirstamp.Take(dir)
	if !ok {
		t.Fatal("a settled directory's stamp is not trusted")
	}
	if st, err := LoadHeld(dir, held); err != nil || st.AgentsMD != "one" {
		t.Fatalf("LoadHeld: %v, %v", st, err)
	}
	// Changed after the caller's check: what it found is what it gets.
	if err := os.WriteFile(agents, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := LoadHeld(dir, held); err != nil || st.AgentsMD != "one" {
		t.Errorf("LoadHeld with the stamp the State was kept with read the directory again: %v, %v", st, err)
	}
	if st, err := LoadHeld(dir, dirstamp.Stamp{}); err != nil || st.AgentsMD != "two" {
		t.Errorf("LoadHeld without a stamp does not see an edit: %v, %v", st, err)
	}
}
