//go:build unix && !linux

package sandbox

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// newGroup makes cmd the leader of a new session and process group,
// keeping the attributes already set (a pseudo-terminal's Setctty).
func newGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setpgid {
		cmd.SysProcAttr.Setsid = true
	}
}

// KillGroup sends SIGKILL to the process group led by pid. Without
// Linux's /proc walk, a process that left the group is not found.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	if err := unix.Kill(-pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// GroupAlive reports whether the process group pgid has a member left.
func GroupAlive(pgid int) bool {
	if pgid <= 0 {
		return false
	}
	err := unix.Kill(-pgid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
