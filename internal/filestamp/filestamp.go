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
	"fmt"
	"os"
	"strings"
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
	last  string // the stamps at the last look, "" when not settled
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
	var b strings.Builder
	settled := true
	for _, p := range c.paths {
		st, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:absent;", p)
			continue
		}
		mt := st.ModTime()
		if now.Sub(mt) < Settle {
			settled = false
		}
		fmt.Fprintf(&b, "%s:%d:%d:%d;", p, st.Size(), mt.UnixNano(), inode(st))
	}
	stamps := b.String()
	changed := !settled || stamps != c.last
	if settled {
		c.last = stamps
	} else {
		c.last = ""
	}
	return changed
}
