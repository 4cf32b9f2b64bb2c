package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	archive := filepath.Join(base, "archive")
	for _, d := range []string{ws, outside, archive, filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644))
	must(os.Symlink(outside, filepath.Join(ws, "out-link")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "file-link")))
	must(os.Symlink(filepath.Join(outside, "new"), filepath.Join(ws, "dangling")))
	must(os.Symlink("sub", filepath.Join(ws, "in-link")))
	r, err := New(ws, archive)
	must(err)
	realWS := r.Dir()

	ok := map[string]string{
		"a.txt":                filepath.Join(realWS, "a.txt"),
		"sub/new/deep.txt":     filepath.Join(realWS, "sub/new/deep.txt"),
		"./sub/../b":           filepath.Join(realWS, "b"),
		"in-link/c":            filepath.Join(realWS, "sub/c"),
		filepath.Join(ws, "d"): filepath.Join(realWS, "d"),
		".":                    realWS,
	}
	for in, want := range ok {
		got, err := r.ResolveWrite(in)
		if err != nil || got != want {
			t.Errorf("ResolveWrite(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"../outside/secret", "/etc/passwd", "out-link/secret", "file-link", "dangling", "sub/../../outside/x", filepath.Join(archive, "f")} {
		if _, err := r.ResolveWrite(in); !errors.Is(err, ErrOutside) {
			t.Errorf("ResolveWrite(%q) = %v; want ErrOutside", in, err)
		}
	}
	if _, err := r.ResolveRead(filepath.Join(archive, "f")); err != nil {
		t.Errorf("ResolveRead of the archive: %v", err)
	}
	if _, err := r.ResolveRead(""); err == nil {
		t.Error("empty path accepted")
	}
}
