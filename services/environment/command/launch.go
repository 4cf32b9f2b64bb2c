package command

import (
	"os/exec"
	"sync"

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
		return sandbox.Apply(cmd)
	})
}

// Sandboxed launches commands into the sandbox of their environment.
func Sandboxed(env *sandbox.Env) Launcher {
	return LauncherFunc(func(cmd *exec.Cmd) (Tracker, error) {
		return env.Apply(cmd)
	})
}

// SandboxedByGroup is Sandboxed without a per-command cgroup: commands are
// tracked by process group, session and their descendants only. Starting
// is cheaper (no cgroup to create and clone into), but a daemon that
// double-forked out of the session cannot be found.
func SandboxedByGroup(env *sandbox.Env) Launcher {
	return LauncherFunc(func(cmd *exec.Cmd) (Tracker, error) {
		if err := env.Confine(cmd); err != nil {
			return nil, err
		}
		return &groupTracker{cmd: cmd}, nil
	})
}

// groupTracker tracks a command by the process group and session it leads.
// Once the group was seen empty its id may be reused, so it is never
// signalled again.
type groupTracker struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	gone bool
}

func (g *groupTracker) pid() int {
	if g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// Kill implements Tracker.
func (g *groupTracker) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pid() == 0 || g.gone {
		return nil
	}
	return sandbox.KillGroup(g.pid())
}

// Alive implements Tracker.
func (g *groupTracker) Alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.aliveLocked()
}

func (g *groupTracker) aliveLocked() bool {
	if g.pid() == 0 || g.gone {
		return false
	}
	if !sandbox.GroupAlive(g.pid()) {
		g.gone = true
		return false
	}
	return true
}

// Release implements Tracker.
func (g *groupTracker) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aliveLocked() {
		return sandbox.KillGroup(g.pid())
	}
	return nil
}
