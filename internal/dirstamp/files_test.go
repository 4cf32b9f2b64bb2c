package dirstamp

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestFilesChanged checks that a look reports a change while a file was
// written too recently to be trusted, and when a trusted file is
// written, removed or made, and none when nothing moved.
func TestFilesChanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("stamps are trusted on Linux only")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	old := time.Now().Add(-time.Hour)
	// write writes path with its modification time set to at; its change
	// time is now, so a look waits out the racy window first.
	write := func(path, data string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * racyWindow)
	}
	write(a, "one", old)
	f := NewFiles(a, b)
	for i, want := range []bool{true, false, false} {
		if got := f.Changed(); got != want {
			t.Fatalf("look %d with settled files: Changed() = %v, want %v", i, got, want)
		}
	}
	// A file removed, and made again with the same size and times.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if !f.Changed() {
		t.Fatal("a removed file is no change")
	}
	write(a, "one", old)
	if !f.Changed() {
		t.Fatal("a file made again is no change")
	}
	write(b, "new", old.Add(time.Minute))
	if !f.Changed() || f.Changed() {
		t.Fatal("a file that appeared shows once")
	}
	// A file whose time is too recent to be trusted (here in the future,
	// so that no pause of the machine can make it old enough).
	soon := time.Now().Add(time.Hour)
	if err := os.WriteFile(a, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(a, soon, soon); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !f.Changed() {
			t.Fatalf("look %d: a file written just now is trusted to be still", i)
		}
	}
	write(a, "two", old)
	if !f.Changed() || f.Changed() {
		t.Fatal("a file settled again shows once, then no more")
	}
}
