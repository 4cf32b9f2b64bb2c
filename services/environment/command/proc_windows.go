package command

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/windows"
)

// newSession starts cmd in a process group of its own, keeping the other
// process attributes already set (the raw command line of cmd.exe). There
// are no sessions or controlling terminals on Windows.
func newSession(cmd *exec.Cmd, _ bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// signalGroup interrupts the process group pgid with Ctrl-Break, the one
// console event a process group of its own receives: Windows has no
// other signals, so SIGINT and SIGTERM both become it.
func signalGroup(pgid int, _ syscall.Signal) error {
	return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(pgid))
}

// readNow reads nothing: Windows pipes are not non-blocking here, and a
// blocked read would hang the session; what is left after the drain
// deadline is dropped.
func readNow(syscall.RawConn, []byte) (int, error, error) { return 0, nil, nil }

// setCmdLine makes cmd start with line as its whole command line, as
// written, for cmd.exe (see cmdLine).
func setCmdLine(cmd *exec.Cmd, line string) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CmdLine = line
}
