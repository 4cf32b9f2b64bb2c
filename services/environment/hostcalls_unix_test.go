//go:build unix

package environment_test

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// ptraceAttach attaches to pid, as an attack from inside a sandbox tries.
func ptraceAttach(pid int) error { return unix.PtraceAttach(pid) }

// fileUID returns the user that owns path.
func fileUID(path string) (uint32, error) {
	var st unix.Stat_t
	err := unix.Stat(path, &st)
	return st.Uid, err
}

// mknodChar makes the character device node major:minor at path (Linux's
// numbering: 1:3 is /dev/null, 1:5 /dev/zero).
func mknodChar(path string, major, minor uint32) error {
	return syscall.Mknod(path, syscall.S_IFCHR|0o666, int(uint64(major)<<8|uint64(minor)))
}
