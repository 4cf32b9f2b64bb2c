package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// storeSize is the bytes of the store's files, its list of collected ids
// apart (bounded by maxTombstones on its own).
func storeSize(t *testing.T, dir string) (total, tombstones int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Name() == "collected" {
			tombstones += info.Size()
		} else {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, tombstones
}

// TestCollectBounded runs many turns that each change a few KiB of files
// and checks that the store stays within its retention: the last turns
// can still be undone, the oldest ones were collected first and say so,
// and an age bound leaves only the newest checkpoint.
func TestCollectBounded(t *testing.T) {
	f := newFixture(t)
	ret := Retention{MaxCheckpoints: 12, MaxBytes: 64 << 10, MaxAge: time.Hour}
	dir := f.store.root.Name()
	f.write("steady.txt", strings.Repeat("the same in every turn\n", 100))
	type turn struct{ before, after string }
	var turns []turn
	const count = 120
	collected := 0
	for i := range count {
		before, _ := f.snap(DefaultLimits)
		if n, err := f.store.Collect(ret, time.Now()); err != nil {
			t.Fatal(err)
		} else {
			collected += n
		}
		f.write("data.txt", fmt.Sprintf("turn %d\n%s", i, strings.Repeat(fmt.Sprintf("%08d", i), 512)))
		f.write(fmt.Sprintf("notes/%d.txt", i%5), fmt.Sprintf("note of turn %d\n", i))
		after, _ := f.snap(DefaultLimits)
		if n, err := f.store.Collect(ret, time.Now()); err != nil {
			t.Fatal(err)
		} else {
			collected += n
		}
		turns = append(turns, turn{before, after})
		list, err := f.store.manifests()
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > ret.MaxCheckpoints {
			t.Fatalf("turn %d: %d checkpoints kept, more than %d", i, len(list), ret.MaxCheckpoints)
		}
		if size, tomb := storeSize(t, dir); size > ret.MaxBytes || tomb > maxTombstones*65 {
			t.Fatalf("turn %d: the store holds %d bytes (and %d of collected ids), more than %d", i, size, tomb, ret.MaxBytes)
		}
	}
	if collected < count-ret.MaxCheckpoints {
		t.Fatalf("%d checkpoints collected in %d turns", collected, count)
	}

	// The last turn is whole: undo restores its exact bytes.
	last := turns[count-1]
	after, err := f.store.Load(last.after)
	if err != nil {
		t.Fatal(err)
	}
	before, err := f.store.Load(last.before)
	if err != nil {
		t.Fatalf("the last turn's start was collected: %v", err)
	}
	if _, err := f.store.Restore(f.tree, after, before, false, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if got := f.read("data.txt"); !strings.HasPrefix(got, fmt.Sprintf("turn %d\n", count-2)) {
		t.Fatalf("after undo data.txt starts %q", got[:10])
	}
	// The oldest went first, and say so; an id never taken does not.
	if _, err := f.store.Load(turns[0].before); !errors.Is(err, ErrCollected) {
		t.Fatalf("the first turn's checkpoint: %v, want ErrCollected", err)
	}
	if _, err := f.store.Load(strings.Repeat("ab", 32)); !errors.Is(err, ErrUnknown) || errors.Is(err, ErrCollected) {
		t.Fatalf("an id never taken: %v, want ErrUnknown only", err)
	}

	// Past the age bound, only the newest checkpoint stays.
	old := time.Now().Add(-2 * ret.MaxAge)
	list, _ := f.store.manifests()
	for _, m := range list {
		if err := os.Chtimes(filepath.Join(dir, manifestName(m.id)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	f.write("data.txt", "after a long pause\n")
	newest, _ := f.snap(DefaultLimits)
	if _, err := f.store.Collect(ret, time.Now()); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.store.manifests(); len(list) != 1 || list[0].id != newest {
		t.Fatalf("after the age bound %d checkpoints are left, want the newest only", len(list))
	}
	if _, err := f.store.Load(last.after); !errors.Is(err, ErrCollected) {
		t.Fatalf("a checkpoint past the age bound: %v, want ErrCollected", err)
	}
}

// TestRetentionDefaults fills a retention's zero fields from
// DefaultRetention and refuses bounds that cannot undo a turn.
func TestRetentionDefaults(t *testing.T) {
	if r, err := (Retention{MaxCheckpoints: 4}).WithDefaults(); err != nil || r.MaxCheckpoints != 4 || r.MaxBytes != DefaultRetention.MaxBytes || r.MaxAge != DefaultRetention.MaxAge {
		t.Fatalf("WithDefaults = %+v, %v", r, err)
	}
	for _, bad := range []Retention{{MaxCheckpoints: 1}, {MaxBytes: -1}, {MaxAge: -time.Second}} {
		if _, err := bad.WithDefaults(); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	if got := DefaultRetention.String(); got != "a workspace's last 200 checkpoints, at most 1024 MiB of them, for 30 days" {
		t.Errorf("String = %q", got)
	}
}
