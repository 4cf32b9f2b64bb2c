package credentials

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFile(t *testing.T) {
	f := At(filepath.Join(t.TempDir(), "penguin", "credentials.json"))
	if _, ok, err := f.Get("a:1"); ok || err != nil {
		t.Fatalf("a missing file: %v %v", ok, err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := f.Put("a:1", Entry{Secret: "pgn_ses_one", User: "ann", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	if err := f.Put("b:2", Entry{Secret: "pgn_pat_two"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(f.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode is %v (%v); want 0600", fi.Mode().Perm(), err)
	}
	if di, _ := os.Stat(filepath.Dir(f.Path())); di.Mode().Perm() != 0o700 {
		t.Fatalf("the directory's mode is %v; want 0700", di.Mode().Perm())
	}
	e, ok, err := f.Get("a:1")
	if !ok || err != nil || e.Secret != "pgn_ses_one" || e.User != "ann" || !e.ExpiresAt.Equal(exp) {
		t.Fatalf("Get a:1 = %+v %v %v", e, ok, err)
	}
	if err := f.Delete("a:1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.Get("a:1"); ok {
		t.Fatal("a:1 is still there after Delete")
	}
	if e, ok, _ := f.Get("b:2"); !ok || e.Secret != "pgn_pat_two" {
		t.Fatalf("b:2 lost by the delete of a:1: %+v", e)
	}
	if err := f.Delete("never"); err != nil {
		t.Fatalf("deleting what is not there: %v", err)
	}
	// A file others may read is refused, not used.
	if err := os.Chmod(f.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Get("b:2"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 file: %v; want a refusal that says how to fix it", err)
	}
	// Garbage is reported with the file's path.
	if err := os.WriteFile(f.Path(), []byte("{nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Get("b:2"); err == nil || !strings.Contains(err.Error(), f.Path()) {
		t.Fatalf("a garbled file: %v", err)
	}
}
