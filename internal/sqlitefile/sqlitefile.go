// Package sqlitefile makes a new SQLite database file for Penguin's
// stores, whole or not at all, without SQLite's rollback journal.
//
// Left to SQLite, a store opened in WAL mode on a path where no file is
// makes an empty file and then turns it into a WAL database: it writes the
// database's first page (whose header says "WAL") in a transaction of the
// rollback journal, which costs four fsyncs (the journal, its directory,
// the journal's header, the database) and the journal's creation and
// removal, on every new home's first start. Here the same first page,
// byte for byte what SQLite writes, goes into a file of another name,
// which is synced once and then linked under the database's name: a crash
// leaves either no database (the next start makes it again) or a whole
// one, as the journal did, for one fsync instead of four.
// (docs/performance.md, eleventh round.)
package sqlitefile

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"

	"github.com/penguin-agent/penguin/internal/newfile"
)

// PageSize is the page size of a database made here: the engine store's
// (see its package), which a database keeps from its creation on.
const PageSize = 1024

// sqliteVersion is the SQLite version that wrote a database made here,
// as SQLite records it in the header (3.54.1, the one linked when this
// was written). SQLite reads it only as information.
const sqliteVersion = 3054001

// Ensure makes path an empty SQLite database in WAL mode with PageSize
// pages, unless a file (or anything else) is there already. It is best
// effort: when it cannot make the file, it leaves the path as it was, and
// SQLite makes the file as before or reports why it cannot.
//
// The file is made whole under another name and linked (package
// newfile), which fails rather than replace a database another process
// made meanwhile. The directory is not synced here: SQLite syncs it when
// it first syncs the database's WAL, before any checkpoint writes to the
// database, and until then a crash may lose the new name, which the next
// start makes again.
func Ensure(path string) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	// 0644 before the umask, as SQLite creates its files; a database
	// made meanwhile stays.
	_ = newfile.Write(path, EmptyWAL(), 0o644)
}

// EmptyWAL is the whole of an empty database in WAL mode with PageSize
// pages, as SQLite writes it when `PRAGMA journal_mode=WAL` is run on an
// empty file: the 100-byte header, then the rest of page 1, the empty
// root of the schema table.
func EmptyWAL() []byte {
	b := make([]byte, PageSize)
	copy(b, "SQLite format 3\x00")
	binary.BigEndian.PutUint16(b[16:], PageSize)
	b[18], b[19] = 2, 2                   // file format write and read versions: WAL
	b[21], b[22], b[23] = 64, 32, 32      // payload fractions, fixed by the format
	binary.BigEndian.PutUint32(b[24:], 1) // file change counter
	binary.BigEndian.PutUint32(b[28:], 1) // size in pages
	binary.BigEndian.PutUint32(b[92:], 1) // the change counter the size is valid for
	binary.BigEndian.PutUint32(b[96:], sqliteVersion)
	b[100] = 0x0d                                 // page 1 is a leaf of a table b-tree,
	binary.BigEndian.PutUint16(b[105:], PageSize) // with no cells: its content starts at the page's end
	return b
}
