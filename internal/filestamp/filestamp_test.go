package filestamp

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestChanged checks that a look reports a change while a file is newer
// than Settle and when a settled file is written, removed or made, and
// none when nothing moved.
func TestChanged(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	old := time.Now().Add(-time.Hour)
	write := func(path, data string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "one", old)
	c := New(a, b)
	for i, want := range []bool{true, false, false} {
		if got := c.Changed(); got != want {
			t.Fatalf("look %d with settled files: Changed() = %v, want %v", i, got, want)
		}
	}
	// A file removed, and made again with the same size and time.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if !c.Changed() {
		t.Fatal("a removed file is no change")
	}
	write(a, "two", old)
	if !c.Changed() {
		t.Fatal("a file made again is no change")
	}
	write(b, "new", old.Add(time.Minute))
	if !c.Changed() || c.Changed() {
		t.Fatal("a file that appeared shows once")
	}
	write(a, "three", time.Now())
	for i := range 3 {
		if !c.Changed() {
			t.Fatalf("look %d: a file written just now is not trusted to be still", i)
		}
	}
	write(a, "three", old)
	if !c.Changed() || c.Changed() {
		t.Fatal("a file settled again shows once, then no more")
	}
}
