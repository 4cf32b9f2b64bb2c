package environment

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestResolvePath checks resolvePath against filepath.EvalSymlinks: a
// path without links, through a link to a directory, through a link to a
// link, one that leads to a file, and ones that do not exist or pass
// through a file.
func TestResolvePath(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"l": "a", "a/b/up": "../../c", "ll": "l"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, rel := range []string{"a/b", "l/b", "a/b/up", "ll/b/up", "a/f", "missing", "a/f/x", "l/missing", "."} {
		p := filepath.Clean(filepath.Join(dir, rel))
		want, wantErr := filepath.EvalSymlinks(p)
		got, isDir, err := resolvePath(p)
		if (err == nil) != (wantErr == nil) || got != want {
			t.Errorf("resolvePath(%s) = %q, %v; EvalSymlinks: %q, %v", rel, got, err, want, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		st, err := os.Stat(want)
		if err != nil || isDir != st.IsDir() {
			t.Errorf("resolvePath(%s) says directory %v, stat %v", rel, isDir, st)
		}
	}
}

// TestResolvePathWithoutStats checks that on Linux a directory reached
// through no link is resolved without a stat of each of its directories
// (one openat2 tells), and that a path through a link still is.
func TestResolvePathWithoutStats(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("openat2 is Linux's")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "a", "b", "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	stats := 0
	lstat = func(p string) (fs.FileInfo, error) {
		stats++
		return os.Lstat(p)
	}
	defer func() { lstat = os.Lstat }()
	if got, isDir, err := resolvePath(ws); err != nil || got != ws || !isDir {
		t.Fatalf("resolvePath(%s) = %q, %v, %v", ws, got, isDir, err)
	}
	if stats != 0 {
		t.Errorf("resolving a path without links stated %d directories, want none", stats)
	}
	if got, _, err := resolvePath(filepath.Join(dir, "l")); err != nil || got != ws || stats == 0 {
		t.Errorf("resolvePath through a link = %q, %v after %d stats", got, err, stats)
	}
}
