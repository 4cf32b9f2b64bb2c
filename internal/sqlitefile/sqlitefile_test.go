package sqlitefile_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/penguin-agent/penguin/internal/sqlitefile"
)

// TestEmptyWALAsSQLiteMakesIt: the first page written here is the one
// SQLite writes when it turns an empty file with 1 KiB pages into a WAL
// database (without a journal, so that nothing else is written), but for
// the version of SQLite recorded in the header, which SQLite reads only
// as information.
func TestEmptyWALAsSQLiteMakesIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "made.db")
	db, err := sql.Open("sqlite", path+"?_pragma=page_size(1024)&_pragma=journal_mode(OFF)")
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode=WAL`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q, %v", mode, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := sqlitefile.EmptyWAL()
	copy(got[96:100], want[96:100])
	if !bytes.Equal(got, want) {
		t.Errorf("EmptyWAL differs from SQLite's empty WAL database:\ngot  %x\nwant %x", got[:112], want[:112])
	}
}

// TestEnsure: a new path becomes a WAL database with 1 KiB pages that
// SQLite opens and writes; the directory holds it alone afterwards; a
// file already there is left as it is.
func TestEnsure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "penguin.db")
	sqlitefile.Ensure(path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	var size int
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q, %v; want wal", mode, err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil || size != sqlitefile.PageSize {
		t.Errorf("page_size %d, %v; want %d", size, err, sqlitefile.PageSize)
	}
	if _, err := db.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
		t.Errorf("count %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %v, want penguin.db alone", entries)
	}

	other := filepath.Join(dir, "other.db")
	if err := os.WriteFile(other, []byte("not mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	sqlitefile.Ensure(other)
	if b, err := os.ReadFile(other); err != nil || string(b) != "not mine" {
		t.Errorf("a file already there became %q, %v", b, err)
	}
}
