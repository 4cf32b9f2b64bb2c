package ignore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/services/environment/workspace"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		pat, path string
		want      bool
	}{
		{"**/*.go", "a/b/c.go", true},
		{"**/*.go", "c.go", true},
		{"*.go", "a/c.go", false},
		{"*.go", "c.go", true},
		{"src/**", "src/a/b", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"*.{go,md}", "x.md", true},
		{"*.{go,md}", "x.txt", false},
		{"?.txt", "a.txt", true},
		{"[ab].txt", "c.txt", false},
	}
	for _, c := range cases {
		g, err := CompileGlob(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Match(c.path); got != c.want {
			t.Errorf("%q ~ %q = %v, want %v", c.pat, c.path, got, c.want)
		}
	}
	if _, err := CompileGlob("[a"); err == nil {
		t.Error("malformed class accepted")
	}
}

func TestWalkRespectsGitignore(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		".gitignore":          "*.log\n/build/\nnode_modules\n!keep.log\ndocs/*.tmp\n# comment\n",
		"a.go":                "",
		"debug.log":           "",
		"keep.log":            "",
		"build/out":           "",
		"src/build/x.go":      "",
		"node_modules/m/i.js": "",
		"src/node_modules/y":  "",
		"docs/a.tmp":          "",
		"docs/sub/b.tmp":      "",
		"src/.gitignore":      "gen/\n!important.log\n",
		"src/gen/z.go":        "",
		"src/important.log":   "",
		"src/other.log":       "",
		".git/config":         "",
		".git/info/exclude":   "secret.txt\n",
		"secret.txt":          "",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var got []string
	err = Walk(context.Background(), ws.Workspace(), ".", func(e Entry) error {
		if !e.Entry.IsDir() {
			got = append(got, e.Rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "a.go", "docs/sub/b.tmp", "keep.log", "src/.gitignore", "src/build/x.go", "src/important.log"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("walk found\n%v\nwant\n%v", got, want)
	}
	got = nil
	_ = Walk(context.Background(), ws.Workspace(), "src", func(e Entry) error {
		got = append(got, e.Rel)
		return nil
	})
	if strings.Join(got, " ") != "src/.gitignore src/build src/build/x.go src/important.log" {
		t.Fatalf("walk from src found %v", got)
	}
}

// TestWalkFoldsCase checks the matching git does with core.ignorecase,
// as on Windows and macOS: rules and names compare without case, in the
// root's ignore file and a deeper one alike. Without it (Linux) case
// matters.
func TestWalkFoldsCase(t *testing.T) {
	root := t.TempDir()
	for p, c := range map[string]string{
		".gitignore":          "node_modules/\n*.LOG\r\n",
		"Node_Modules/m/i.js": "",
		"a.log":               "",
		"B.Log":               "",
		"keep.txt":            "",
		"Src/.gitignore":      "Gen/\n",
		"Src/gen/z.go":        "",
		"Src/GEN/y.go":        "",
		"src2/gen/x.go":       "",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	files := func(fold bool) string {
		var got []string
		err := walk(context.Background(), ws.Workspace(), ".", fold, func(e Entry) error {
			if !e.Entry.IsDir() {
				got = append(got, e.Rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	if got, want := files(true), ".gitignore Src/.gitignore keep.txt src2/gen/x.go"; got != want {
		t.Errorf("folding case, the walk found\n%s\nwant\n%s", got, want)
	}
	if got, want := files(false), ".gitignore B.Log Node_Modules/m/i.js Src/.gitignore Src/GEN/y.go Src/gen/z.go a.log keep.txt src2/gen/x.go"; got != want {
		t.Errorf("with case, the walk found\n%s\nwant\n%s", got, want)
	}
}

// readsCounted is a walk's tree that records the files read from it.
type readsCounted struct {
	FS
	read []string
}

func (r *readsCounted) ReadFile(name string, limit int64) ([]byte, error) {
	r.read = append(r.read, name)
	return r.FS.ReadFile(name, limit)
}

// TestWalkReadsListedIgnoreFiles checks that a walk reads the ignore
// files the directories' listings name, and looks for no other: before,
// it tried .git/info/exclude and every directory's .gitignore, an open or
// a stat each at every checkpoint. The exclusions still rank below every
// .gitignore.
func TestWalkReadsListedIgnoreFiles(t *testing.T) {
	root := t.TempDir()
	for p, c := range map[string]string{
		"a.txt":             "",
		"keep.txt":          "",
		"sub/deeper/b.txt":  "",
		"sub/c.log":         "",
		"other/d.txt":       "",
		"other/.gitignore":  "*.txt\n",
		".gitignore":        "!keep.txt\n",
		".git/info/exclude": "*.txt\n",
	} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	walkFiles := func(start string) (files, read string) {
		fsys := &readsCounted{FS: ws.Workspace()}
		var got []string
		err := Walk(context.Background(), fsys, start, func(e Entry) error {
			if !e.Entry.IsDir() {
				got = append(got, e.Rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " "), strings.Join(fsys.read, " ")
	}
	files, read := walkFiles(".")
	if want := ".gitignore keep.txt other/.gitignore sub/c.log"; files != want {
		t.Errorf("the walk found\n%s\nwant\n%s", files, want)
	}
	if want := ".git/info/exclude .gitignore other/.gitignore"; read != want {
		t.Errorf("the walk read %q, want %q", read, want)
	}
	// From a directory, those above it are not listed: theirs are
	// looked for.
	if files, read := walkFiles("other"); files != "other/.gitignore" || read != ".git/info/exclude .gitignore other/.gitignore" {
		t.Errorf("from other, the walk found %q and read %q", files, read)
	}
	if err := os.RemoveAll(filepath.Join(root, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, ".gitignore")); err != nil {
		t.Fatal(err)
	}
	if _, read := walkFiles("."); read != "other/.gitignore" {
		t.Errorf("without .git and a top .gitignore, the walk read %q, want only other/.gitignore", read)
	}
}
