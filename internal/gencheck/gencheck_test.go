package gencheck

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// moduleRoot walks up from the test's directory to the directory that
// holds go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// readTree returns every file under root, by slash-separated relative path.
func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", root, err)
	}
	return files
}

// TestGeneratedCodeIsUpToDate runs the same buf generate as `make generate`,
// into a temporary directory, and compares the result with gen/ byte for
// byte.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH, so buf cannot be run: the gen/ drift check did not run")
	}
	root := moduleRoot(t)
	out := t.TempDir()
	// buf reads these in its own process, out of sight of go test's result
	// cache. Reading them here too makes a change to any of them rerun the
	// test instead of replaying a cached pass.
	readTree(t, filepath.Join(root, "proto"))
	for _, f := range []string{"buf.yaml", "buf.gen.yaml", "tools/go.mod", "tools/go.sum"} {
		if _, err := os.ReadFile(filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "tool", "-modfile=tools/go.mod", "buf", "generate", "-o", out)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, output)
	}

	want := readTree(t, filepath.Join(out, "gen"))
	got := readTree(t, filepath.Join(root, "gen"))
	if len(want) == 0 {
		t.Fatal("buf generate wrote nothing under gen/")
	}
	var problems []string
	for name, data := range want {
		switch have, ok := got[name]; {
		case !ok:
			problems = append(problems, "missing:  gen/"+name)
		case !bytes.Equal(have, data):
			problems = append(problems, "differs:  gen/"+name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			problems = append(problems, "stale:    gen/"+name+" (buf no longer writes it)")
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Fatalf("gen/ is out of date with proto/; run `make generate` and commit the result:\n  %s",
			strings.Join(problems, "\n  "))
	}
}
