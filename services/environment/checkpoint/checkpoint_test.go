package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// fixture is a workspace and a store beside it.
type fixture struct {
	t     *testing.T
	dir   string
	tree  *workspace.Tree
	store *Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	root, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	scratch, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scratch.Close() })
	st, err := Open(scratch, root.Dir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, dir: root.Dir(), tree: root.Workspace(), store: st}
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) snap(lim Limits) (string, *Manifest) {
	f.t.Helper()
	id, m, err := f.store.Snapshot(f.t.Context(), f.tree, lim)
	if err != nil {
		f.t.Fatal(err)
	}
	return id, m
}

// reopen opens the store again, as the service does at a checkpoint of
// a workspace no environment works in (or of a kept store that is no
// longer Reusable): the fixture's had to make its directories.
func (f *fixture) reopen() {
	f.t.Helper()
	parent, err := os.OpenRoot(filepath.Dir(filepath.Dir(f.store.root.Name())))
	if err != nil {
		f.t.Fatal(err)
	}
	defer parent.Close()
	st, err := Open(parent, f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { st.Close() })
	f.store = st
}

// TestReusable checks that a store kept open is reusable while its
// directory holds its directories, known by the directory's stamp once
// that is trusted, and not once they, or it, were removed.
func TestReusable(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	f.snap(DefaultLimits)
	now := time.Now()
	if !f.store.Reusable(now) {
		t.Fatal("an untouched store is not reusable")
	}
	later := now.Add(time.Minute)
	if !f.store.Reusable(later) || f.store.checked == (dirstamp.File{}) || !f.store.Reusable(later) {
		t.Fatal("an untouched store, its stamp trusted, is not reusable, or not known by its stamp")
	}
	dir := f.store.root.Name()
	if err := os.RemoveAll(filepath.Join(dir, "objects")); err != nil {
		t.Fatal(err)
	}
	if f.store.Reusable(time.Now().Add(time.Minute)) {
		t.Fatal("a store whose objects were removed is reusable")
	}
	f.reopen()
	if !f.store.Reusable(time.Now()) {
		t.Fatal("a store opened again is not reusable")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if f.store.Reusable(time.Now().Add(time.Minute)) {
		t.Fatal("a removed store is reusable")
	}
}

func paths(cs []Change) string {
	var out []string
	for _, c := range cs {
		if !c.IsDir() {
			out = append(out, c.Path)
		}
	}
	return strings.Join(out, " ")
}

// TestUndoRedo records a change of edited, created, deleted and ignored
// files, undoes it to the exact bytes, and redoes it.
func TestUndoRedo(t *testing.T) {
	f := newFixture(t)
	f.write(".gitignore", "build/\n")
	f.write("a.txt", "one\ntwo\n")
	f.write("gone.txt", "bye\n")
	f.write("build/out.bin", "ignored before")
	beforeID, before := f.snap(DefaultLimits)
	if again, _ := f.snap(DefaultLimits); again != beforeID {
		t.Fatalf("same files, new id: %s then %s", beforeID, again)
	}

	f.write("a.txt", "one\nTWO\n")
	f.write("src/new.go", "package x\n\x00binary-ish")
	if err := os.Remove(filepath.Join(f.dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	f.write("build/out.bin", "ignored after")
	_, after := f.snap(DefaultLimits)
	if got := paths(Changes(before, after)); got != "a.txt gone.txt src/new.go" {
		t.Fatalf("changes = %q", got)
	}

	if _, err := f.store.Restore(f.tree, after, before, false, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "one\ntwo\n", "gone.txt": "bye\n", "src/new.go": "<missing>", "build/out.bin": "ignored after"} {
		if got := f.read(name); got != want {
			t.Errorf("after undo %s = %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "src")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory the change made is still there: %v", err)
	}
	if _, err := f.store.Restore(f.tree, before, after, false, DefaultLimits); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "one\nTWO\n", "gone.txt": "<missing>", "src/new.go": "package x\n\x00binary-ish"} {
		if got := f.read(name); got != want {
			t.Errorf("after redo %s = %q, want %q", name, got, want)
		}
	}
}

// TestConflict refuses to undo over a file changed since, changing
// nothing, and overwrites it when forced.
func TestConflict(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "v1\n")
	f.write("b.txt", "b1\n")
	_, before := f.snap(DefaultLimits)
	f.write("a.txt", "v2\n")
	f.write("b.txt", "b2\n")
	_, after := f.snap(DefaultLimits)
	f.write("a.txt", "edited by the user\n")

	_, err := f.store.Restore(f.tree, after, before, false, DefaultLimits)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || strings.Join(conflict.Paths, ",") != "a.txt" {
		t.Fatalf("undo over a changed file: %v", err)
	}
	if f.read("a.txt") != "edited by the user\n" || f.read("b.txt") != "b2\n" {
		t.Fatalf("a refused undo changed files: a=%q b=%q", f.read("a.txt"), f.read("b.txt"))
	}
	over, err := f.store.Restore(f.tree, after, before, true, DefaultLimits)
	if err != nil || strings.Join(over, ",") != "a.txt" {
		t.Fatalf("forced undo: %v, %v", over, err)
	}
	if f.read("a.txt") != "v1\n" || f.read("b.txt") != "b1\n" {
		t.Fatalf("forced undo left a=%q b=%q", f.read("a.txt"), f.read("b.txt"))
	}
}

// TestBounds marks a checkpoint past its bounds incomplete, and a large
// file's change as one that cannot be undone.
func TestBounds(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "a")
	f.write("b.txt", "b")
	f.write("c.txt", "c")
	if _, m := f.snap(Limits{MaxEntries: 2, MaxBytes: 1 << 20, MaxFileBytes: 1 << 20}); !strings.Contains(m.Incomplete, "more than 2 files") {
		t.Errorf("incomplete = %q", m.Incomplete)
	}
	lim := Limits{MaxEntries: 100, MaxBytes: 1 << 20, MaxFileBytes: 4}
	f.write("big.txt", "0123456789")
	_, before := f.snap(lim)
	f.write("big.txt", "9876543210!")
	_, after := f.snap(lim)
	if got := paths(Changes(before, after)); got != "big.txt" {
		t.Fatalf("changes = %q", got)
	}
	if _, err := f.store.Restore(f.tree, after, before, true, lim); !errors.Is(err, ErrCannotRestore) {
		t.Fatalf("undo of a large file: %v", err)
	}
	if f.read("big.txt") != "9876543210!" {
		t.Fatal("a refused undo changed the file")
	}
}

// TestLoadReusesItsDecompressor checks that loading a small checkpoint
// allocates about what the manifest needs, not a new gzip decompressor
// (some 70 KiB) each time.
func TestLoadReusesItsDecompressor(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "one\n")
	id, _ := f.snap(DefaultLimits)
	const loads = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range loads {
		if _, err := f.store.Load(id); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// A new decompressor per load costs some 47 KiB of allocations. The
	// bound leaves room for what the race detector adds and for the pool
	// emptied by a collection during the loop (seen: 17 KiB a load under
	// make test's load).
	if per := (after.TotalAlloc - before.TotalAlloc) / loads; per > 32<<10 {
		t.Errorf("Load allocated %d bytes per call, want under 32 KiB", per)
	}
}

// TestSnapshotKeepsItsLastManifest checks that the checkpoint Snapshot
// made is kept for the next one to compare with (not read from its file
// again), that a change is recorded all the same, that a store whose
// manifest is not the head kept reads the head's file, and that what is
// kept stays within its bound.
func TestSnapshotKeepsItsLastManifest(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "one\n")
	id, m := f.snap(DefaultLimits)
	if kept := lastManifests.get(f.store.root.Name(), id); kept.m != m {
		t.Fatal("the checkpoint just made is not kept: the next Snapshot reads its file again")
	}
	if again, _ := f.snap(DefaultLimits); again != id {
		t.Errorf("an unchanged workspace's checkpoint is %s, then %s", id, again)
	}
	f.write("a.txt", "two\n")
	changed, _ := f.snap(DefaultLimits)
	if changed == id {
		t.Fatal("a file edited between two checkpoints is not recorded")
	}
	old, err := f.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	now, err := f.store.Load(changed)
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(Changes(old, now)); got != "a.txt" {
		t.Errorf("changes between the two checkpoints: %q", got)
	}
	// Another process moved the head back: the head's file is read.
	if err := f.store.root.WriteFile("head", []byte(id), 0o600); err != nil {
		t.Fatal(err)
	}
	if lastManifests.get(f.store.root.Name(), id).m != nil {
		t.Fatal("a manifest that is not the one kept is found")
	}
	if again, _ := f.snap(DefaultLimits); again != changed {
		t.Errorf("the workspace as it is checkpointed as %s, want %s", again, changed)
	}

	k := &keptManifests{m: map[string]keptManifest{}}
	big := &Manifest{Entries: map[string]*Entry{}}
	for i := range maxKeptEntries / 2 {
		big.Entries[strconv.Itoa(i)] = &Entry{Kind: kindDir}
	}
	for _, dir := range []string{"a", "b", "c", "d"} {
		k.put(dir, keptManifest{id: "id", m: big})
		if k.entries > maxKeptEntries {
			t.Fatalf("after %s, %d entries kept, over the bound of %d", dir, k.entries, maxKeptEntries)
		}
		if k.get(dir, "id").m == nil {
			t.Fatalf("the manifest just put for %s is not kept", dir)
		}
	}
}

// TestOpenRemakesAMissingDirectory: a store is opened without making its
// directories when it has them, and one that lost a directory (a scratch
// area cleared in part) gets it back.
func TestOpenRemakesAMissingDirectory(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "one\n")
	f.snap(DefaultLimits)
	if err := f.store.root.RemoveAll("manifests"); err != nil {
		t.Fatal(err)
	}
	parent, err := os.OpenRoot(filepath.Dir(filepath.Dir(f.store.root.Name())))
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	st, err := Open(parent, f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.root.Name() != f.store.root.Name() {
		t.Fatalf("opened %s, want %s", st.root.Name(), f.store.root.Name())
	}
	if !hasStoreDirs(st.root) {
		t.Fatal("the store's manifests directory is not made again")
	}
	if _, _, err := st.Snapshot(t.Context(), f.tree, DefaultLimits); err != nil {
		t.Fatal(err)
	}
}

// TestUnchangedCheckpointWritesNothing checks that the checkpoint of a
// workspace as the kept head found it, taken again within touchEvery,
// neither touches the head's manifest nor lists the store to collect it,
// and that a change is recorded and the store listed again.
func TestUnchangedCheckpointWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.write("a.txt", "one\n")
	hour := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(f.dir, "a.txt"), hour, hour); err != nil {
		t.Fatal(err)
	}
	id, _ := f.snap(DefaultLimits)
	if _, err := f.store.Collect(DefaultRetention, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	// What a touch or a listing would change: the manifest's time, and
	// the usage on record (a listing that finds none remakes it).
	if err := f.store.root.Chtimes(manifestName(id), hour, hour); err != nil {
		t.Fatal(err)
	}
	if err := f.store.root.Remove("usage"); err != nil {
		t.Fatal(err)
	}
	if again, _ := f.snap(DefaultLimits); again != id {
		t.Fatalf("an unchanged workspace's checkpoint is %s, then %s", id, again)
	}
	if _, err := f.store.Collect(DefaultRetention, time.Now()); err != nil {
		t.Fatal(err)
	}
	if info, err := f.store.root.Stat(manifestName(id)); err != nil || !info.ModTime().Equal(hour) {
		t.Errorf("the head's manifest was written again (%v, %v)", info, err)
	}
	if _, err := f.store.root.Stat("usage"); err == nil {
		t.Error("the store was listed again though nothing was added to it")
	}
	// Another retention is applied whatever the last listing found.
	if _, err := f.store.Collect(Retention{MaxCheckpoints: 2, MaxBytes: 1 << 20, MaxAge: time.Hour}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.root.Stat("usage"); err != nil {
		t.Errorf("a new retention was not applied: %v", err)
	}
	f.write("b.txt", "two\n")
	changed, m := f.snap(DefaultLimits)
	if changed == id || m.Entries["b.txt"] == nil {
		t.Fatal("a file added between two checkpoints is not recorded")
	}
	if err := f.store.root.Remove("usage"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Collect(DefaultRetention, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.root.Stat("usage"); err != nil {
		t.Errorf("a store that was added to is not listed: %v", err)
	}
}

// TestHeadStamped checks that a head file read once is known by its
// stamp at the next checkpoint, and read again when another process
// rewrites it.
func TestHeadStamped(t *testing.T) {
	f := newFixture(t)
	f.reopen()
	f.write("a.txt", "one\n")
	first, _ := f.snap(DefaultLimits)
	f.write("b.txt", "two\n")
	second, _ := f.snap(DefaultLimits)
	time.Sleep(50 * time.Millisecond) // past the racy window of the head's write
	if again, _ := f.snap(DefaultLimits); again != second {
		t.Fatalf("an unchanged workspace's checkpoint is %s, then %s", second, again)
	}
	dir := f.store.root.Name()
	if lastManifests.m[dir].head == (dirstamp.File{}) {
		t.Fatal("the head read is not stamped")
	}
	if id, _ := f.store.head(); id != second {
		t.Fatalf("head %s, want %s", id, second)
	}
	// Another process moves the head back.
	if err := f.store.root.WriteFile("head", []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	if id, _ := f.store.head(); id != first {
		t.Fatalf("a head rewritten by another process reads %s, want %s", id, first)
	}
}
