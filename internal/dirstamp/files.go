package dirstamp

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"
)

// Files watches a few files for a poller that need not look at what they
// hold while they are unchanged: a server polls its SQLite database this
// way, since every commit, by this process or another on the same file,
// writes the database's write-ahead log. Each file is stamped as a tree's
// entries are (StampFile), so a stamp that cannot be trusted (a time too
// recent, a symbolic link, a platform without the change time) counts as
// a change, as a poll without stamps would. It is not safe for concurrent
// use: give each poller its own.
type Files struct {
	paths []string
	// last is the files' stamps at the last look, the zero File for one
	// absent then; nil when some stamp could not be trusted.
	last []File
}

// NewFiles returns a watch of paths; its first look reports a change.
func NewFiles(paths ...string) *Files {
	return &Files{paths: paths}
}

// Changed reports whether any of the files may have changed since the
// previous call: a file written, replaced, made or removed, or one whose
// stamp cannot be trusted. Call it before reading what the files hold, so
// that a change made during the read shows at the next call.
func (f *Files) Changed() bool {
	now := time.Now()
	stamps := make([]File, len(f.paths))
	trusted := true
	for i, p := range f.paths {
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Absent: the zero File.
		case err != nil:
			trusted = false
		default:
			var ok bool
			if stamps[i], ok = StampFile(info, now); !ok {
				trusted = false
			}
		}
	}
	changed := f.last == nil || !trusted || !slices.Equal(stamps, f.last)
	f.last = nil
	if trusted {
		f.last = stamps
	}
	return changed
}
