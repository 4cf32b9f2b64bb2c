package dirstamp

import (
	"io/fs"
	"syscall"
)

// changeTime returns a file's change time (nanoseconds since the epoch)
// and inode, which lstat gives on Linux.
func changeTime(info fs.FileInfo) (ctime int64, ino uint64, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Ctim.Nano(), st.Ino, true
}
