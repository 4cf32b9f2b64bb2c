//go:build unix

package command

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// newSession makes cmd start as the leader of a new session, with the
// terminal its standard input names as its controlling terminal when
// ctty is set. It keeps the other process attributes already set.
func newSession(cmd *exec.Cmd, ctty bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = ctty
	cmd.SysProcAttr.Ctty = 0
}

// signalGroup sends sig to the process group pgid; a group already gone
// is no error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if err := unix.Kill(-pgid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// readNow reads what the non-blocking file behind rc holds now, without
// waiting: n and err are the read's, cerr says the file was closed.
func readNow(rc syscall.RawConn, p []byte) (n int, cerr, err error) {
	cerr = rc.Control(func(fd uintptr) { n, err = unix.Read(int(fd), p) })
	return n, cerr, err
}

// setCmdLine does nothing: only Windows passes a program its command line
// as one string.
func setCmdLine(*exec.Cmd, string) {}
