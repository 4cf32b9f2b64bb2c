package agentstate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSkillsDiscovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pdf := writeSkill(t, dir, "pdf", "---\nname: pdf-tools\ndescription: >\n  Fill, merge and split\n  PDF files.\nlicense: MIT\nallowed-tools: [exec_command]\n---\n# PDF\nBody text.\n")
	plain := writeSkill(t, dir, "plain", "# No front matter\nJust instructions.\n")
	crlf := writeSkill(t, dir, "crlf", "\ufeff---\r\nname: windows\r\ndescription: Written on Windows.\r\n---\r\nbody\r\n")
	empty := writeSkill(t, dir, "empty-fm", "---\n---\nbody\n")
	// Not skills: a directory without SKILL.md, a hidden directory, a file.
	if err := os.MkdirAll(filepath.Join(dir, SkillsDir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, dir, ".hidden", "---\nname: hidden\n---\n")
	if err := os.WriteFile(filepath.Join(dir, SkillsDir, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Skill{
		{Name: "empty-fm", Dir: "empty-fm", Path: empty},
		{Name: "pdf-tools", Dir: "pdf", Description: "Fill, merge and split PDF files.", Path: pdf},
		{Name: "plain", Dir: "plain", Path: plain},
		{Name: "windows", Dir: "crlf", Description: "Written on Windows.", Path: crlf},
	}
	if !reflect.DeepEqual(st.Skills, want) {
		t.Errorf("skills:\n got %+v\nwant %+v", st.Skills, want)
	}
	meta := skillMetadata(st.Skills)
	if !strings.Contains(meta, "- pdf-tools: Fill, merge and split PDF files. (skills/pdf/SKILL.md)") ||
		!strings.Contains(meta, "- plain (skills/plain/SKILL.md)") {
		t.Errorf("metadata lines:\n%s", meta)
	}
	if strings.Contains(meta, "Body text") {
		t.Error("a skill's body reached the metadata")
	}
}

func TestSkillsSymlinkedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lib := t.TempDir()
	if err := os.MkdirAll(filepath.Join(lib, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "shared", SkillFile), []byte("---\nname: shared\ndescription: From a library.\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, SkillsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(lib, "shared"), filepath.Join(dir, SkillsDir, "shared")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	st, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Skills) != 1 || st.Skills[0].Description != "From a library." {
		t.Errorf("symlinked skill not found: %+v", st.Skills)
	}
}

func TestSkillsDuplicateName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSkill(t, dir, "a", "---\nname: same\n---\n")
	writeSkill(t, dir, "b", "---\nname: same\n---\n")
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), `skill name "same" is also used by`) {
		t.Errorf("duplicate skill names: %v", err)
	}
}
