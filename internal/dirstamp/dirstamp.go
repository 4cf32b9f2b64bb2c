// Package dirstamp tells cheaply whether a directory tree changed since
// it was last looked at: a [Stamp] is what lstat says of every file and
// directory under it (size, modification and change times, inode, mode),
// and a stamp that still holds means nothing in the tree was written,
// created, removed, renamed or replaced since it was taken. Taking one reads the
// directories and stats their entries, but opens and reads no file, which
// is what lets a caller keep what it derived from the files (a parsed
// agent state, a sync record) and read them again only when they change,
// whoever changes them: this process, another replica on a shared
// volume, or a person with an editor.
//
// A stamp is only trusted when it can be exact. On a platform without the
// change time and inode in lstat's answer (anything but Linux today), with
// a symbolic link in the tree (whose target a stat of the link does not
// describe), or with a time too recent to tell a later write in the same
// clock tick apart ("racy", as git calls its index's same problem), Take
// says so and the caller reads the files as it would without a stamp.
package dirstamp

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// racyWindow is how recent a file's change time may be, relative to the
// moment a stamp is taken, before the stamp stops being trusted. A file
// system stamps writes with a clock that advances in ticks (the kernel's
// coarse clock: one jiffy, at most 10 ms); a write in the tick the stamp
// was taken in could leave every field as it was. Twice the longest tick
// is enough. File systems whose times are whole seconds (FAT, HFS+, some
// network ones) are recognised by their times and get coarseWindow.
const (
	racyWindow   = 20 * time.Millisecond
	coarseWindow = 2 * time.Second
)

// Stamp is what a directory tree's entries looked like at one moment.
// Its zero value holds for no tree.
type Stamp struct {
	entries []entry
}

// entry is one file or directory of the tree, by its path relative to
// the root: what lstat says of it.
type entry struct {
	path         string
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino          uint64
	mode         uint32 // st_mode: the type and the permissions
}

// The type bits of st_mode, the same on every Unix.
const (
	modeType    = 0o170000
	modeDir     = 0o040000
	modeSymlink = 0o120000
)

// Take stamps the tree under dir. ok is false when the stamp cannot be
// trusted to notice every change (see the package comment) or dir cannot
// be read; the stamp is then of no use.
func Take(dir string) (_ Stamp, ok bool) {
	now := time.Now().UnixNano()
	var s Stamp
	root, ok := lstat(dir, "")
	if !ok || root.mode&modeType != modeDir {
		return Stamp{}, false
	}
	if !s.add(root, now) || !s.walk(dir, "", now) {
		return Stamp{}, false
	}
	return s, true
}

// walk adds the entries under the directory rel (dir on disk), depth
// first.
func (s *Stamp) walk(dir, rel string, now int64) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return false
	}
	// Readdir's order is the file system's; sorted, a stamp's entries
	// come in one order whatever the file system's.
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		e, ok := lstat(p, r)
		if !ok || !s.add(e, now) {
			return false // removed while we looked (changing), or not trusted
		}
		if e.mode&modeType == modeDir && !s.walk(p, r, now) {
			return false
		}
	}
	return true
}

// add records one entry; false when it makes the stamp untrustworthy.
func (s *Stamp) add(e entry, now int64) bool {
	if e.mode&modeType == modeSymlink {
		return false
	}
	window := racyWindow.Nanoseconds()
	if e.ctime%int64(time.Second) == 0 && e.mtime%int64(time.Second) == 0 {
		window = coarseWindow.Nanoseconds()
	}
	if e.ctime > now-window || e.mtime > now-window {
		return false
	}
	s.entries = append(s.entries, e)
	return true
}

// Holds reports whether the tree under dir is still as s describes it,
// what a new stamp of it would say, found at less cost: each entry s
// holds is stated again, but no directory is opened and listed. That is
// enough because an entry added to a directory, removed or renamed
// changes the directory's modification and change times, which s holds
// too. A zero stamp holds for no tree.
func (s Stamp) Holds(dir string) bool {
	if len(s.entries) == 0 {
		return false
	}
	for _, e := range s.entries {
		p := dir
		if e.path != "" {
			p = filepath.Join(dir, filepath.FromSlash(e.path))
		}
		if now, ok := lstat(p, e.path); !ok || now != e {
			return false
		}
	}
	return true
}

// Equal reports whether s and o describe the tree alike, entry for
// entry; a zero stamp equals none. Of two stamps of one tree, the later
// equal to the earlier means nothing changed between them: a caller that
// has just found o to hold need not check s.
func (s Stamp) Equal(o Stamp) bool {
	return len(s.entries) > 0 && slices.Equal(s.entries, o.entries)
}

// File is what lstat said of one file, as a stamp records it; two Files
// of the same path are equal only when nothing wrote, replaced or
// renamed the file between the two lstats. Its zero value equals no
// File taken.
type File struct {
	e entry
}

// StampFile stamps the file that info (what lstat said of it at now)
// describes. ok is false when the stamp cannot be trusted, as for a tree:
// a symbolic link, a time too recent, a platform without the change time.
func StampFile(info fs.FileInfo, now time.Time) (_ File, ok bool) {
	e, ok := entryOf(info)
	if !ok {
		return File{}, false
	}
	var s Stamp
	if !s.add(e, now.UnixNano()) {
		return File{}, false
	}
	return File{e: e}, true
}
