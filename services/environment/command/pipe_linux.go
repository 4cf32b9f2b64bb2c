package command

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for each output pipe, the most an
// unprivileged process may set by default (fs.pipe-max-size); fewer,
// larger reads move output faster.
const pipeSize = 1 << 20

// growPipe asks for a pipe of pipeSize. A smaller pipe still works, only
// more slowly: the error is ignored.
func growPipe(w *os.File) {
	if rc, err := w.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize) })
	}
}
