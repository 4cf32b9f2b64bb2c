//go:build unix

package filestamp

import (
	"os"
	"syscall"
)

// inode is the file's inode number: a file replaced by another (deleted
// and made again) is a change even with the same size and time.
func inode(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino) //nolint:unconvert // a narrower type on some systems
	}
	return 0
}
