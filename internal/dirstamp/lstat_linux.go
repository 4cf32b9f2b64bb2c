package dirstamp

import (
	"io/fs"
	"syscall"
)

// lstat describes the file at path (rel in the tree) as a stamp records
// it. It calls lstat itself, into a Stat_t on the stack: os.Lstat's
// FileInfo is an allocation per entry, and Holds states every entry of a
// tree at every check.
func lstat(path, rel string) (entry, bool) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(path, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return entry{}, false
		}
		break
	}
	return entry{path: rel, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: st.Mode}, true
}

// entryOf is what info, an lstat's answer, says of a file, as a stamp
// records it.
func entryOf(info fs.FileInfo) (entry, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return entry{}, false
	}
	return entry{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino, mode: st.Mode}, true
}
