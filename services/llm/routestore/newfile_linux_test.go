package routestore_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/penguin-agent/penguin/services/llm/routestore"
)

// TestNewFileWithoutRollbackJournal: a new file is made in WAL mode
// without SQLite's rollback journal (whose creation, writes and removal
// cost four fsyncs on a new home's first start): no file but the database,
// its WAL and shared memory, and the one that becomes the database, is
// created in its directory while the store opens.
func TestNewFileWithoutRollbackJournal(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		t.Skipf("inotify: %v", err)
	}
	st, err := routestore.Open(context.Background(), filepath.Join(dir, "penguin.db"), sealer(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var created []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			nameLen := int(uint32(buf[off+12]) | uint32(buf[off+13])<<8 | uint32(buf[off+14])<<16 | uint32(buf[off+15])<<24)
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
			created = append(created, string(bytes.TrimRight(name, "\x00")))
			off += unix.SizeofInotifyEvent + nameLen
		}
	}
	for _, name := range created {
		if name != "penguin.db" && name != "penguin.db-wal" && name != "penguin.db-shm" && !strings.HasPrefix(name, "penguin.db.new-") {
			t.Errorf("created %q while opening a new store (all: %q)", name, created)
		}
	}
	if len(created) == 0 {
		t.Error("no file created seen")
	}
}
