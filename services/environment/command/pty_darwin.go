package command

import (
	"fmt"
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair through creack/pty, which knows
// macOS's ioctls for granting, unlocking and naming the terminal side.
// As on Linux, output post-processing is turned off (a program's "\n"
// reaches the model as "\n") and the controller side goes behind Go's
// poller, non-blocking, so that reads take deadlines and a Close wakes a
// blocked reader.
func openPTY(rows, cols uint16) (controller, terminal *os.File, err error) {
	p, t, err := pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		_ = p.Close()
		_ = t.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := pty.Setsize(t, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return fail("sizing the pseudo-terminal", err)
	}
	tfd := int(t.Fd())
	termios, err := unix.IoctlGetTermios(tfd, unix.TIOCGETA)
	if err != nil {
		return fail("reading terminal attributes", err)
	}
	termios.Oflag &^= unix.ONLCR
	if err := unix.IoctlSetTermios(tfd, unix.TIOCSETA, termios); err != nil {
		return fail("setting terminal attributes", err)
	}
	// A duplicate of the controller, made non-blocking before os.NewFile
	// sees it, is what the poller takes.
	cfd, err := unix.Dup(int(p.Fd()))
	if err != nil {
		return fail("duplicating the pseudo-terminal", err)
	}
	unix.CloseOnExec(cfd)
	if err := unix.SetNonblock(cfd, true); err != nil {
		_ = unix.Close(cfd)
		return fail("making the pseudo-terminal non-blocking", err)
	}
	_ = p.Close()
	return os.NewFile(uintptr(cfd), "/dev/ptmx"), t, nil
}

// havePTY says that commands can have a pseudo-terminal here.
const havePTY = true
