package command

import (
	"os/exec"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// Tracker ends and observes everything one command started: its process
// group, its session, and (where the host allows) its cgroup.
// *sandbox.Group implements it.
type Tracker interface {
	// Kill sends SIGKILL to every process of the command.
	Kill() error
	// Alive reports whether any live process of the command remains.
	Alive() bool
	// Release kills what is left and frees the tracking resources.
	Release() error
}

// Launcher prepares an unstarted command to run as the environment
// requires (its sandbox, a session and process group of its own) and
// returns the Tracker of what it will start. It must keep the process
// attributes it finds in cmd.SysProcAttr, such as Setctty for a
// pseudo-terminal.
type Launcher interface {
	Launch(cmd *exec.Cmd) (Tracker, error)
}

// LauncherFunc adapts a function to Launcher.
type LauncherFunc func(cmd *exec.Cmd) (Tracker, error)

// Launch implements Launcher.
func (f LauncherFunc) Launch(cmd *exec.Cmd) (Tracker, error) { return f(cmd) }

// Unconfined launches commands without a sandbox, still as session leaders
// tracked by the sandbox package (by cgroup where possible).
func Unconfined() Launcher {
	return LauncherFunc(func(cmd *exec.Cmd) (Tracker, error) {
		return sandbox.Apply(cmd, sandbox.Policy{Mode: sandbox.None}, "")
	})
}

// Sandboxed launches commands under policy p, re-executing the penguin
// binary self as the confining trampoline when p needs one.
func Sandboxed(p sandbox.Policy, self string) Launcher {
	return LauncherFunc(func(cmd *exec.Cmd) (Tracker, error) {
		return sandbox.Apply(cmd, p, self)
	})
}
