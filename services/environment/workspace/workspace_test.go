package workspace

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a workspace beside an outside directory and a readable
// archive directory.
type fixture struct {
	ws, outside, archive string
	root                 *Root
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside"), archive: filepath.Join(base, "archive")}
	for _, d := range []string{f.ws, f.outside, f.archive, filepath.Join(f.ws, "sub")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(f.outside, "secret"), []byte("outside secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.archive, "a.txt"), []byte("archived"), 0o600))
	must(t, os.WriteFile(filepath.Join(f.ws, "sub", "in.txt"), []byte("inside"), 0o644))
	must(t, os.Symlink(f.outside, filepath.Join(f.ws, "out-link")))
	must(t, os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.ws, "file-link")))
	must(t, os.Symlink("../outside/secret", filepath.Join(f.ws, "rel-out-link")))
	must(t, os.Symlink(filepath.Join(f.outside, "new"), filepath.Join(f.ws, "dangling")))
	must(t, os.Symlink("sub", filepath.Join(f.ws, "in-link")))
	must(t, os.Symlink("/proc/self/root/etc", filepath.Join(f.ws, "proc-link")))
	archive, err := os.OpenRoot(f.archive)
	must(t, err)
	t.Cleanup(func() { archive.Close() })
	f.root, err = New(f.ws, Readable{Dir: f.archive, Open: func() (*os.Root, error) { return archive, nil }})
	must(t, err)
	t.Cleanup(func() { f.root.Close() })
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLocate(t *testing.T) {
	f := newFixture(t)
	ok := map[string]string{
		"a.txt":                  "a.txt",
		"sub/new/deep.txt":       "sub/new/deep.txt",
		"./sub/../b":             "b",
		filepath.Join(f.ws, "d"): "d",
		".":                      ".",
		f.ws:                     ".",
	}
	for in, want := range ok {
		tree, got, err := f.root.Locate(in, true)
		if err != nil || got != want || tree != f.root.Workspace() {
			t.Errorf("Locate(%q) = %q, %v; want %q in the workspace", in, got, err, want)
		}
	}
	for _, in := range []string{"../outside/secret", "/etc/passwd", "sub/../../outside/x", filepath.Join(f.archive, "a.txt")} {
		if _, _, err := f.root.Locate(in, true); !errors.Is(err, ErrOutside) {
			t.Errorf("Locate(%q, write) = %v; want ErrOutside", in, err)
		}
	}
	tree, name, err := f.root.Locate(filepath.Join(f.archive, "a.txt"), false)
	if err != nil || name != "a.txt" || tree.Show(name) != filepath.Join(f.archive, "a.txt") {
		t.Fatalf("the archive is not readable: %v %q", err, name)
	}
	if _, _, err := f.root.Locate("", false); err == nil {
		t.Error("empty path accepted")
	}
	if _, _, err := f.root.Locate("a\x00b", false); err == nil {
		t.Error("NUL accepted")
	}
}

// TestSymlinkOutIsOutside follows every kind of link that leads out: each
// is refused as ErrOutside by reads and writes alike, and nothing outside
// changes. It also pins the text by which os.Root's escape error is
// recognized.
func TestSymlinkOutIsOutside(t *testing.T) {
	f := newFixture(t)
	ws := f.root.Workspace()
	for _, name := range []string{"out-link/secret", "file-link", "rel-out-link", "dangling", "proc-link/hostname", "out-link/new/deep"} {
		if _, _, err := ws.Open(name); !errors.Is(err, ErrOutside) {
			t.Errorf("Open(%q) = %v; want ErrOutside", name, err)
		}
		if fh, _, _, err := ws.OpenWrite(name, true); !errors.Is(err, ErrOutside) {
			if fh != nil {
				fh.Close()
			}
			t.Errorf("OpenWrite(%q) = %v; want ErrOutside", name, err)
		}
		if _, err := ws.Stat(name); !errors.Is(err, ErrOutside) {
			t.Errorf("Stat(%q) = %v; want ErrOutside", name, err)
		}
	}
	if _, err := ws.ReadDir("out-link"); !errors.Is(err, ErrOutside) {
		t.Errorf("ReadDir through a link out = %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(f.outside, "secret")); string(data) != "outside secret" {
		t.Fatalf("the outside file changed: %q", data)
	}
	if entries, _ := os.ReadDir(f.outside); len(entries) != 1 {
		t.Fatalf("something was created outside: %v", entries)
	}
	// A link that stays inside is followed.
	fh, _, err := ws.Open("in-link/in.txt")
	must(t, err)
	fh.Close()
}

func TestOpenWrite(t *testing.T) {
	f := newFixture(t)
	ws := f.root.Workspace()
	fh, _, created, err := ws.OpenWrite("new/dir/file.txt", true)
	must(t, err)
	must(t, Replace(fh, []byte("one")))
	fh.Close()
	if !created {
		t.Fatal("a new file was not reported created")
	}
	must(t, os.Chmod(filepath.Join(f.ws, "new/dir/file.txt"), 0o640))
	fh, info, created, err := ws.OpenWrite("new/dir/file.txt", true)
	must(t, err)
	old, _ := io.ReadAll(fh)
	must(t, Replace(fh, []byte("two")))
	fh.Close()
	if created || string(old) != "one" || info.Mode().Perm() != 0o640 {
		t.Fatalf("overwrite: created=%v old=%q mode=%v", created, old, info.Mode())
	}
	if data, _ := os.ReadFile(filepath.Join(f.ws, "new/dir/file.txt")); string(data) != "two" {
		t.Fatalf("content %q", data)
	}
	if _, _, _, err := ws.OpenWrite("missing.txt", false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenWrite without create of a missing file = %v", err)
	}
	// A hard link to a file elsewhere (here the archive directory, on the
	// same file system) is not written through.
	must(t, os.Link(filepath.Join(f.archive, "a.txt"), filepath.Join(f.ws, "hard.txt")))
	if _, _, _, err := ws.OpenWrite("hard.txt", true); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("OpenWrite through a hard link = %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(f.archive, "a.txt")); string(data) != "archived" {
		t.Fatalf("the linked file changed: %q", data)
	}
}

// TestHandleSurvivesAReplacedWorkspace moves the workspace away and puts a
// link to the outside directory in its place: the handle still works on
// the original directory.
func TestHandleSurvivesAReplacedWorkspace(t *testing.T) {
	f := newFixture(t)
	moved := f.ws + ".moved"
	must(t, os.Rename(f.ws, moved))
	must(t, os.Symlink(f.outside, f.ws))
	fh, _, _, err := f.root.Workspace().OpenWrite("planted.txt", true)
	must(t, err)
	fh.Close()
	if _, err := os.Stat(filepath.Join(f.outside, "planted.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the write followed the replaced workspace out: %v", err)
	}
	if _, err := os.Stat(filepath.Join(moved, "planted.txt")); err != nil {
		t.Fatalf("the write did not land in the original directory: %v", err)
	}
}
