//go:build unix

package workspace

import (
	"io/fs"
	"syscall"
)

// oDirectory makes an open fail unless it names a directory.
const oDirectory = syscall.O_DIRECTORY

// hardLinks is the file's count of hard links, 0 when unknown.
func hardLinks(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}

// fileOwner returns the user and group that own a file.
func fileOwner(info fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
