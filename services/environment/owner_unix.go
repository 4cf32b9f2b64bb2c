//go:build unix

package environment

import (
	"io/fs"
	"syscall"
)

// ownerUID is the uid that owns the file, when the system tells.
func ownerUID(info fs.FileInfo) (int, bool) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), true
	}
	return 0, false
}
