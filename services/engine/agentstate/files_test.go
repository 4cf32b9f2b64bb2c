package agentstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// filesState is an agent with a skill that has a reference file, an
// AGENTS.md, a vault, and a workspace.
func filesState(t *testing.T) (*State, *Files, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	writeSkill(t, dir, "pdf", "---\nname: pdf-tools\ndescription: Fill PDF forms.\n---\nRead reference/forms.md first.\n")
	if err := os.MkdirAll(filepath.Join(dir, SkillsDir, "pdf", "reference"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SkillsDir, "pdf", "reference", "forms.md"), []byte("forms body"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, AgentsFile), []byte("Always run go vet.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, VaultFile), []byte("GITHUB_TOKEN: ghp_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	return st, st.Files(ws), ws
}

func TestAgentFilesRead(t *testing.T) {
	t.Parallel()
	_, f, _ := filesState(t)
	cases := []struct{ path, want string }{
		{"", "- skills/"},
		{"AGENTS.md", "Always run go vet."},
		{"skills", "- pdf-tools: Fill PDF forms. (skills/pdf/SKILL.md)"},
		{"skills/pdf/SKILL.md", "Read reference/forms.md first."},
		{"./skills//pdf/reference/forms.md", "forms body"},
		{"skills/pdf", "- reference/"},
		{"memory", "- memory/workspace/"},
		{"memory/user", "(nothing saved yet)"},
		{"memory/user/MEMORY.md", "(nothing saved yet)"},
	}
	for _, tc := range cases {
		got, err := f.Read(tc.path)
		if err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("Read(%q) = %q, %v; want it to contain %q", tc.path, got, err, tc.want)
		}
	}
}

// Nothing outside the agent files is reachable: not the vault, not the
// configuration, not the engine's disk, not another workspace's memory.
func TestAgentFilesRefuseEscapes(t *testing.T) {
	t.Parallel()
	st, f, _ := filesState(t)
	outside := filepath.Join(t.TempDir(), "secret.md")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another workspace's memory, under its own key.
	other := st.Files(t.TempDir())
	if err := other.Write("memory/workspace/theirs.md", "other workspace"); err != nil {
		t.Fatal(err)
	}
	if err := f.Write("memory/user/MEMORY.md", "- [x](x.md)\n"); err != nil {
		t.Fatal(err)
	}
	// A link planted in the memory scope and in a skill, both leading out.
	if err := os.Symlink(outside, filepath.Join(st.UserMemoryDir(), "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(st.Dir, SkillsDir, "pdf", "link.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(st.Dir, VaultFile), filepath.Join(st.UserMemoryDir(), "vault.md")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"../agent/.vault.yaml", ".vault.yaml", "system_config.yaml", outside, "/etc/passwd",
		"memory/user/../../.vault.yaml", "skills/pdf/../../.vault.yaml", "skills/../.vault.yaml",
		"memory/" + MemoryKey(other.workspace) + "/theirs.md", "memory/user/link.md", "skills/pdf/link.md",
		"skills/nope/SKILL.md", `memory\user\MEMORY.md`, "memory/user/.workspace",
	} {
		got, err := f.Read(p)
		if err == nil || strings.Contains(got, "outside") || strings.Contains(got, "ghp_") || strings.Contains(got, "other workspace") {
			t.Errorf("Read(%q) = %q, %v; want a refusal", p, got, err)
		}
	}
	// A link inside the scope that stays inside the agent directory but
	// leads to the vault is refused too: the scope is the root, not the
	// agent directory.
	if got, err := f.Read("memory/user/vault.md"); err == nil {
		t.Errorf("a link from memory to the vault was followed: %q", got)
	}
	for _, p := range []string{
		"../x.md", "/tmp/x.md", outside, "memory/user/../../AGENTS.md", "AGENTS.md", "skills/pdf/SKILL.md",
		"system_config.yaml", ".vault.yaml", "memory/user/.workspace", "memory/user/sub/x.md", "memory/user/x.txt",
		"memory/other/x.md", "memory/" + MemoryKey(other.workspace) + "/theirs.md",
	} {
		if err := f.Write(p, "pwned"); err == nil || !errors.Is(err, ErrAgentFile) {
			t.Errorf("Write(%q) = %v; want a refusal", p, err)
		}
		if err := f.Delete(p); err == nil {
			t.Errorf("Delete(%q) succeeded", p)
		}
	}
	// Writing through a planted link replaces the link, never its target.
	if err := f.Write("memory/user/link.md", "replaced"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "outside" {
		t.Errorf("a write followed a link out of the memory scope: the target now holds %q", data)
	}
	for _, file := range []string{filepath.Join(st.Dir, VaultFile), filepath.Join(st.Dir, ConfigFile), filepath.Join(st.Dir, AgentsFile)} {
		data, _ := os.ReadFile(file)
		if strings.Contains(string(data), "pwned") {
			t.Errorf("%s was written", file)
		}
	}
}

// A memory scope that is itself a link out of the agent directory is not
// followed.
func TestAgentFilesScopeLink(t *testing.T) {
	t.Parallel()
	st, f, _ := filesState(t)
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(st.Dir, MemoryDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, st.UserMemoryDir()); err != nil {
		t.Fatal(err)
	}
	if err := f.Write("memory/user/x.md", "escaped"); err == nil {
		t.Error("a write went through a linked memory scope")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the write landed outside: %v", entries)
	}
}

func TestAgentFilesWriteDelete(t *testing.T) {
	t.Parallel()
	st, f, ws := filesState(t)
	if err := f.Write("memory/user/prefers-pnpm.md", "---\nname: prefers-pnpm\n---\nUse pnpm.\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Write("memory/workspace/MEMORY.md", "- [Tests](tests.md) — real db\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read("memory/user/prefers-pnpm.md"); err != nil || !strings.Contains(got, "Use pnpm.") {
		t.Errorf("read back = %q, %v", got, err)
	}
	// The files are where the prompt reads them, and the workspace scope
	// records the path it stands for.
	if data, err := os.ReadFile(filepath.Join(st.WorkspaceMemoryDir(ws), MemoryIndexFile)); err != nil || !strings.Contains(string(data), "real db") {
		t.Errorf("workspace index = %q, %v", data, err)
	}
	if marker, err := os.ReadFile(filepath.Join(st.WorkspaceMemoryDir(ws), memoryMarkerFile)); err != nil || strings.TrimSpace(string(marker)) != realPath(ws) {
		t.Errorf("marker = %q, %v", marker, err)
	}
	if got := st.SystemPrompt(PromptVars{Workspace: ws}); !strings.Contains(got, "real db") {
		t.Error("the written index does not reach the prompt")
	}
	if err := f.Delete("memory/user/prefers-pnpm.md"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.UserMemoryDir(), "prefers-pnpm.md")); !os.IsNotExist(err) {
		t.Error("the deleted file is still there")
	}
	if err := f.Delete("memory/user/prefers-pnpm.md"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("deleting twice = %v", err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(st.UserMemoryDir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left over: %s", e.Name())
		}
	}
	// A temporary workspace has no workspace memory.
	tmp := st.Files("")
	if err := tmp.Write("memory/workspace/x.md", "x"); err == nil || !strings.Contains(err.Error(), "temporary") {
		t.Errorf("workspace memory in a temporary workspace = %v", err)
	}
	// Memory off: nothing is written.
	off := *st
	off.Config.Memory.Enabled = false
	if err := off.Files(ws).Write("memory/user/x.md", "x"); err == nil {
		t.Error("a write with memory off succeeded")
	}
}

// Writes are bounded per file and per scope; a refused write loses
// nothing already saved.
func TestAgentFilesBounds(t *testing.T) {
	t.Parallel()
	_, f, _ := filesState(t)
	if err := f.Write("memory/user/big.md", strings.Repeat("x", MaxMemoryFileBytes+1)); err == nil {
		t.Error("a file over the bound was written")
	}
	if err := f.Write("memory/user/bad.md", "\xff\xfe"); err == nil {
		t.Error("invalid UTF-8 was written")
	}
	chunk := strings.Repeat("y", MaxMemoryFileBytes)
	n := MaxMemoryScopeBytes / MaxMemoryFileBytes
	for i := range n {
		if err := f.Write(fmt.Sprintf("memory/user/t%d.md", i), chunk); err != nil {
			t.Fatalf("write %d of %d: %v", i, n, err)
		}
	}
	err := f.Write("memory/user/one-more.md", "z")
	if err == nil || !strings.Contains(err.Error(), "bound") {
		t.Errorf("a write past the scope's bound = %v", err)
	}
	// Replacing a file counts its new size, not both.
	if err := f.Write("memory/user/t0.md", "short"); err != nil {
		t.Errorf("replacing a file in a full scope: %v", err)
	}
	if got, _ := f.Read("memory/user/t1.md"); got != chunk {
		t.Error("a refused write changed a saved file")
	}
	// The file count is bounded too.
	_, g, _ := filesState(t)
	for i := range MaxMemoryScopeFiles {
		if err := g.Write(fmt.Sprintf("memory/workspace/f%d.md", i), "x"); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	if err := g.Write("memory/workspace/last.md", "x"); err == nil || !strings.Contains(err.Error(), "files") {
		t.Errorf("a file past the count bound = %v", err)
	}
}

func TestAgentsMDWithWorkspaceFiles(t *testing.T) {
	t.Parallel()
	st := testState(t)
	s := *st
	s.Config.SystemPrompt = "# Instructions\n{{AGENTS_MD}}\n# End"
	v := testVars
	v.WorkspaceInstructions = []*penguinv1.InstructionFile{
		{Path: "/repo/AGENTS.md", Content: "Use {{CWD}} literally.\n"},
		{Path: "/repo/sub/AGENTS.md", Content: "Deep rule", Truncated: true},
	}
	got := s.SystemPrompt(v)
	for _, want := range []string{
		"Always run go vet.\n\nThe workspace's AGENTS.md files follow",
		"## /repo/AGENTS.md\nUse {{CWD}} literally.\n\n## /repo/sub/AGENTS.md\nDeep rule\n[cut by the size bound",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "/repo/AGENTS.md") > strings.Index(got, "/repo/sub/AGENTS.md") {
		t.Error("the files are not in order from the root down")
	}
	s.AgentsMD = ""
	v.WorkspaceInstructions = nil
	if got := s.SystemPrompt(v); got != "# Instructions\n# End" {
		t.Errorf("no instructions at all = %q", got)
	}
}
