package dirstamp

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// settle waits out the racy window, so that the tree's times are old
// enough for a stamp to be trusted.
func settle() { time.Sleep(racyWindow + 10*time.Millisecond) }

func take(t *testing.T, dir string) Stamp {
	t.Helper()
	s, ok := Take(dir)
	if !ok {
		t.Fatalf("stamp of %s not trusted", dir)
	}
	return s
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestStampSeesEveryChange(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("stamps are trusted on Linux only")
	}
	for name, change := range map[string]func(t *testing.T, dir string){
		"a file rewritten in place, same size": func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "a.md"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("X"), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
		},
		"a file rewritten with its times put back": func(t *testing.T, dir string) {
			p := filepath.Join(dir, "sub", "b.md")
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			write(t, p, "bbbB")
			if err := os.Chtimes(p, info.ModTime(), info.ModTime()); err != nil {
				t.Fatal(err)
			}
		},
		"a file created deep down": func(t *testing.T, dir string) { write(t, filepath.Join(dir, "sub", "deeper", "c.md"), "c") },
		"a file removed":           func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "sub", "b.md")) },
		"a file replaced by rename": func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, ".a.md.tmp"), "aaaa")
			if err := os.Rename(filepath.Join(dir, ".a.md.tmp"), filepath.Join(dir, "a.md")); err != nil {
				t.Fatal(err)
			}
		},
		"a mode changed": func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "a.md"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "a.md"), "aaaa")
			write(t, filepath.Join(dir, "sub", "b.md"), "bbbb")
			settle()
			before := take(t, dir)
			if !before.Holds(dir) {
				t.Fatal("an unchanged tree's stamp does not hold")
			}
			change(t, dir)
			if _, ok := Take(dir); ok {
				t.Error("a stamp taken right after a change is trusted; a second change in the same clock tick could go unseen")
			}
			if before.Holds(dir) {
				t.Error("the change is not seen")
			}
		})
	}
}

func TestStampNotTrusted(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.md"), "a")
	if err := os.Symlink(filepath.Join(dir, "a.md"), filepath.Join(dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, ok := Take(dir); ok {
		t.Error("a tree with a symbolic link is trusted; an edit of the link's target would go unseen")
	}
	if _, ok := Take(filepath.Join(dir, "missing")); ok {
		t.Error("a missing directory's stamp is trusted")
	}
	if (Stamp{}).Holds(dir) {
		t.Error("a zero stamp holds")
	}
}
