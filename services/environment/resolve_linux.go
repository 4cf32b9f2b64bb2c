package environment

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 turned out to be missing (a kernel
// before 5.6) or refused (a seccomp filter), so it is not tried again.
var noOpenat2 atomic.Bool

// linkFreeDir reports whether the absolute path p leads to a directory
// through no symbolic link, in two system calls: an openat2 that refuses
// every link on the way and anything but a directory, and the close of
// what it opened (O_PATH: no permission on the directory is needed, as
// for a stat). An lstat of each directory of the path took one call
// each. False means only that it could not tell: the caller resolves p
// the long way, which also words the errors.
func linkFreeDir(p string) bool {
	if noOpenat2.Load() {
		return false
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			noOpenat2.Store(true)
		}
		return false
	}
	_ = unix.Close(fd)
	return true
}
