// Package filestamp tells whether files may have changed since the last
// look, from their stamps (size, modification time, inode) alone, without
// reading them. A server polls its SQLite database with it: every commit,
// by this process or another on the same file, writes the database's
// write-ahead log, so a look that finds the files' stamps unchanged saves
// the query (and the wake of SQLite's code) that would have found nothing
// new.
//
// A file's modification time has the granularity of the file system's
// clock, which may be coarse (a few milliseconds, or more): a write in the
// same tick as the last look could leave the stamp as it was. A stamp is
// therefore trusted only once it is older than Settle; until then every
// look reports a change, as a poll without stamps would.
package filestamp

import (
	"os"
	"slices"
	"time"
)

// Settle is how old a file's modification time must be before a look
// trusts it to show the next write: far more than any file system's clock
// tick, so that a write after the look gets a later time.
const Settle = 2 * time.Second

// Check looks at a set of files. It is not safe for concurrent use: give
// each poller its own.
type Check struct {
	paths []string
	// last is the files' stamps at the last look; nil when some stamp
	// was not settled then.
	last []stamp
}

// stamp is what a look sees of one file.
type stamp struct {
	exists bool
	size   int64
	mtime  int64 // nanoseconds
	inode  uint64
}

// New returns a Check of paths; its first look reports a change.
func New(paths ...string) *Check {
	return &Check{paths: paths}
}

// Changed reports whether any of the files may have changed since the
// previous call: its stamp (or its absence) differs, or some file was
// modified less than Settle ago. Call it before reading what the files
// hold, so that a change made during the read shows at the next call.
func (c *Check) Changed() bool {
	now := time.Now()
	stamps := make([]stamp, len(c.paths))
	settled := true
	for i, p := range c.paths {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		mt := st.ModTime()
		if now.Sub(mt) < Settle {
			settled = false
		}
		stamps[i] = stamp{exists: true, size: st.Size(), mtime: mt.UnixNano(), inode: inode(st)}
	}
	changed := !settled || !slices.Equal(stamps, c.last)
	c.last = nil
	if settled {
		c.last = stamps
	}
	return changed
}
