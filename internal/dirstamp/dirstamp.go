// Package dirstamp tells cheaply whether a directory tree changed since
// it was last looked at: a [Stamp] is what lstat says of every file and
// directory under it (size, modification and change times, inode, mode),
// and two equal stamps mean nothing in the tree was written, created,
// removed, renamed or replaced in between. Taking one reads the
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
// Its zero value matches no tree.
type Stamp struct {
	entries []entry
}

// entry is one file or directory of the tree, by its path relative to
// the root.
type entry struct {
	path         string
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino          uint64
	mode         fs.FileMode
}

// Take stamps the tree under dir. ok is false when the stamp cannot be
// trusted to notice every change (see the package comment) or dir cannot
// be read; the stamp is then of no use.
func Take(dir string) (_ Stamp, ok bool) {
	now := time.Now().UnixNano()
	var s Stamp
	root, err := os.Lstat(dir)
	if err != nil || !root.IsDir() {
		return Stamp{}, false
	}
	if !s.add("", root, now) || !s.walk(dir, "", now) {
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
	// Readdir's order is the file system's; sorted, two stamps of one
	// tree compare entry by entry.
	slices.Sort(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		info, err := os.Lstat(p)
		if err != nil {
			return false // removed while we looked: changing, not stamped
		}
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		if !s.add(r, info, now) {
			return false
		}
		if info.IsDir() && !s.walk(p, r, now) {
			return false
		}
	}
	return true
}

// add records one entry; false when it makes the stamp untrustworthy.
func (s *Stamp) add(rel string, info fs.FileInfo, now int64) bool {
	if info.Mode()&fs.ModeSymlink != 0 {
		return false
	}
	e := entry{path: rel, size: info.Size(), mtime: info.ModTime().UnixNano(), mode: info.Mode()}
	var ok bool
	if e.ctime, e.ino, ok = changeTime(info); !ok {
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

// Equal reports whether two stamps describe the same tree, unchanged.
// A zero stamp equals none.
func (s Stamp) Equal(o Stamp) bool {
	return len(s.entries) > 0 && slices.Equal(s.entries, o.entries)
}
