//go:build linux

package command

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair. The terminal side has output
// post-processing turned off, so a program's "\n" reaches the model as
// "\n" rather than "\r\n". The controller side is opened non-blocking, so
// that it goes straight behind Go's poller: reads and writes take
// deadlines and a Close wakes a blocked reader.
//
// Every command in a terminal pays for this, so it takes the fewest system
// calls: the terminal side is opened through the controller (TIOCGPTPEER,
// Linux 4.13) rather than by its path under /dev/pts, which also leaves no
// moment in which that path could name another terminal.
func openPTY(rows, cols uint16) (controller, terminal *os.File, err error) {
	cfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	tfd := -1
	fail := func(what string, err error) (*os.File, *os.File, error) {
		_ = unix.Close(cfd)
		if tfd >= 0 {
			_ = unix.Close(tfd)
		}
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(cfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlocking the pseudo-terminal", err)
	}
	if tfd, err = openPeer(cfd); err != nil {
		return fail("opening the terminal side of the pseudo-terminal", err)
	}
	if err := unix.IoctlSetWinsize(tfd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		return fail("sizing the pseudo-terminal", err)
	}
	termios, err := unix.IoctlGetTermios(tfd, unix.TCGETS)
	if err != nil {
		return fail("reading terminal attributes", err)
	}
	termios.Oflag &^= unix.ONLCR
	if err := unix.IoctlSetTermios(tfd, unix.TCSETS, termios); err != nil {
		return fail("setting terminal attributes", err)
	}
	return os.NewFile(uintptr(cfd), "/dev/ptmx"), os.NewFile(uintptr(tfd), "/dev/pts"), nil
}

// openPeer opens the terminal side of the controller cfd: through the
// controller where the kernel can, else by its path.
func openPeer(cfd int) (int, error) {
	const flags = unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(cfd), unix.TIOCGPTPEER, flags)
	if errno == 0 {
		return int(fd), nil
	}
	if !errors.Is(errno, unix.ENOTTY) && !errors.Is(errno, unix.EINVAL) {
		return -1, errno
	}
	n, err := unix.IoctlGetUint32(cfd, unix.TIOCGPTN)
	if err != nil {
		return -1, err
	}
	return unix.Open("/dev/pts/"+strconv.FormatUint(uint64(n), 10), flags, 0)
}

// havePTY says that commands can have a pseudo-terminal here.
const havePTY = true
