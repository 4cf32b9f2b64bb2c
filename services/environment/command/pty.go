package command

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair. The terminal side has output
// post-processing turned off, so a program's "\n" reaches the model as
// "\n" rather than "\r\n". The controller side is returned in non-blocking
// mode behind Go's poller, so reads and writes take deadlines and a Close
// wakes a blocked reader.
func openPTY(rows, cols uint16) (controller, terminal *os.File, err error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	fail := func(err error) (*os.File, *os.File, error) {
		_ = ptmx.Close()
		_ = tty.Close()
		return nil, nil, err
	}
	if err := pty.Setsize(tty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return fail(fmt.Errorf("sizing the pseudo-terminal: %w", err))
	}
	tfd := int(tty.Fd())
	termios, err := unix.IoctlGetTermios(tfd, unix.TCGETS)
	if err != nil {
		return fail(fmt.Errorf("reading terminal attributes: %w", err))
	}
	termios.Oflag &^= unix.ONLCR
	if err := unix.IoctlSetTermios(tfd, unix.TCSETS, termios); err != nil {
		return fail(fmt.Errorf("setting terminal attributes: %w", err))
	}
	// pty.Open has put the controller into blocking mode (it called Fd);
	// a non-blocking duplicate is registered with the poller instead.
	fd, err := unix.FcntlInt(ptmx.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("duplicating the pseudo-terminal: %w", err))
	}
	_ = ptmx.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		_ = tty.Close()
		return nil, nil, fmt.Errorf("setting the pseudo-terminal non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}
