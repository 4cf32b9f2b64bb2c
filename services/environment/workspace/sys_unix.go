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
