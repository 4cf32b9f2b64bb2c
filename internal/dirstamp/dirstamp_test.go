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

// TestEqualAndStampFile checks that two stamps of an unchanged tree are
// equal and a zero one equals none, and that a file's stamp is trusted
// once settled, differs after a rewrite of the same size, and is not
// trusted for a link or a file just written.
func TestEqualAndStampFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("stamps are trusted on Linux only")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "head")
	write(t, file, "one")
	if err := os.Symlink("head", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	stampFile := func(name string) (File, bool) {
		t.Helper()
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return StampFile(info, time.Now())
	}
	if _, ok := stampFile("head"); ok {
		t.Error("a file written a moment ago has a trusted stamp")
	}
	settle()
	a, ok := stampFile("head")
	if b, _ := stampFile("head"); !ok || a != b {
		t.Fatalf("an unchanged file's stamps: %v, %v (trusted %v)", a, b, ok)
	}
	if _, ok := stampFile("link"); ok {
		t.Error("a symbolic link has a trusted stamp")
	}
	write(t, file, "two")
	settle()
	if b, _ := stampFile("head"); a == b {
		t.Error("a file rewritten with its size kept has the same stamp")
	}
	if err := os.Remove(filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	settle()
	s := take(t, dir)
	if !s.Equal(take(t, dir)) {
		t.Error("two stamps of an unchanged tree are not equal")
	}
	if (Stamp{}).Equal(Stamp{}) || s.Equal(Stamp{}) {
		t.Error("a zero stamp equals a stamp")
	}
}
