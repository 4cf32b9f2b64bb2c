package workspace

import "io/fs"

// oDirectory is 0: Windows has no open flag that refuses a file that is
// not a directory; ReadDir fails on one instead.
const oDirectory = 0

// hardLinks is 0 (unknown): os.Stat on Windows does not report hard links,
// so the check of a file's links is left out there.
func hardLinks(fs.FileInfo) uint64 { return 0 }

// fileOwner reports no owner: Windows files have no uid and gid.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
