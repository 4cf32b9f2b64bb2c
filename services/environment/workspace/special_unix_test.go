//go:build unix

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	f := newFixture(t)
	ws := f.root.Workspace()
	must(t, syscall.Mkfifo(filepath.Join(f.ws, "fifo"), 0o644))
	must(t, os.Symlink("/dev/zero", filepath.Join(f.ws, "zero")))
	if _, _, err := ws.Open("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(fifo) = %v", err)
	}
	if _, _, _, err := ws.OpenWrite("fifo", true); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenWrite(fifo) = %v", err)
	}
	if _, _, err := ws.Open("sub"); !errors.Is(err, ErrIsDir) {
		t.Errorf("Open(dir) = %v", err)
	}
	if _, _, err := ws.Open("zero"); !errors.Is(err, ErrOutside) {
		t.Errorf("Open(link to /dev/zero) = %v", err)
	}
	if _, err := ws.ReadFile("sub/in.txt", 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over its limit = %v", err)
	}
}

// TestCreatedEntriesBelongToTheOwner proves that, for a service running as
// root, what the file tools and MkdirAll create in a directory another
// user owns belongs to that user (so a sandbox user that owns its
// workspace can change what the service wrote), while an existing file
// keeps its owner. On the code before, the new file and directories were
// root's.
func TestCreatedEntriesBelongToTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	const uid, gid = 65532, 65533
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.Chown(ws, uid, gid))
	must(t, os.WriteFile(filepath.Join(ws, "root.txt"), []byte("root's"), 0o644))
	r, err := New(ws)
	must(t, err)
	defer r.Close()
	f, _, created, err := r.Workspace().OpenWrite("a/b/new.txt", true)
	must(t, err)
	f.Close()
	if !created {
		t.Fatal("OpenWrite did not create a/b/new.txt")
	}
	f, _, _, err = r.Workspace().OpenWrite("root.txt", true)
	must(t, err)
	f.Close()
	must(t, MkdirAll(ws, "c/d"))
	owners := map[string][2]uint32{
		"a": {uid, gid}, "a/b": {uid, gid}, "a/b/new.txt": {uid, gid}, "c": {uid, gid}, "c/d": {uid, gid}, "root.txt": {0, 0},
	}
	for name, want := range owners {
		info, err := os.Lstat(filepath.Join(ws, name))
		must(t, err)
		st := info.Sys().(*syscall.Stat_t)
		if got := [2]uint32{st.Uid, st.Gid}; got != want {
			t.Errorf("%s belongs to %d:%d, want %d:%d", name, got[0], got[1], want[0], want[1])
		}
	}
	// A directory root owns gives nothing away.
	must(t, MkdirAll(base, "rootdir/e"))
	if info, err := os.Stat(filepath.Join(base, "rootdir/e")); err != nil || info.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("a directory made beneath root's own: %v, %v; want it root's", info, err)
	}
}

// TestOwnerAskedAtFirstCreate proves that a tree asks its directory's
// owner when it first creates an entry, not when it is opened (a stat
// that most handles, which only read, never need): a workspace given to
// its user after the handle was opened still has what the tree creates
// given to that user. On the code before, which asked at the open, the
// new file was root's.
func TestOwnerAskedAtFirstCreate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	const uid, gid = 65532, 65533
	ws := t.TempDir()
	r, err := NewResolved(ws)
	must(t, err)
	defer r.Close()
	must(t, os.Chown(ws, uid, gid))
	f, _, _, err := r.Workspace().OpenWrite("new.txt", true)
	must(t, err)
	f.Close()
	info, err := os.Lstat(filepath.Join(ws, "new.txt"))
	must(t, err)
	if st := info.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
		t.Errorf("new.txt belongs to %d:%d, want %d:%d", st.Uid, st.Gid, uid, gid)
	}
}
