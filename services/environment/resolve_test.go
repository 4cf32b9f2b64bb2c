package environment

import (
	"os"
	"path/filepath"
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
		got, info, err := resolvePath(p)
		if (err == nil) != (wantErr == nil) || got != want {
			t.Errorf("resolvePath(%s) = %q, %v; EvalSymlinks: %q, %v", rel, got, err, want, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		st, err := os.Stat(want)
		if err != nil || info.IsDir() != st.IsDir() || !os.SameFile(info, st) {
			t.Errorf("resolvePath(%s) describes %v, not %v", rel, info, st)
		}
	}
}
