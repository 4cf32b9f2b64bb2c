package command

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"

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

// Process is the first process of a started command, which the Manager
// waits for.
type Process interface {
	// Pid is its process id (also its process group and session id), or
	// 0 when it was gone before it could be known.
	Pid() int
	// Wait blocks until it exits and returns its exit code (128+N when
	// signal N ended it), or -1 and why when that cannot be known.
	Wait() (int, error)
}

// Starter is a Launcher that can also start commands itself: a confined
// environment's, whose init starts them from a thread confined once
// rather than through a trampoline process per command.
type Starter interface {
	Launcher
	// Start starts cmd, whose standard files are *os.File, and returns
	// its first process and the Tracker of everything it starts. cmd
	// itself is not started.
	Start(cmd *exec.Cmd) (Process, Tracker, error)
}

// start starts cmd with l: from a Starter's own starter, else prepared
// by Launch and started here, by spawn when it is set (a pseudo console
// on Windows, where no environment has a starter of its own) or by
// cmd.Start.
func start(l Launcher, cmd *exec.Cmd, spawn func(*exec.Cmd) (Process, error)) (Process, Tracker, error) {
	if s, ok := l.(Starter); ok && spawn == nil {
		return s.Start(cmd)
	}
	tracker, err := l.Launch(cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("applying the sandbox: %w", err)
	}
	if spawn != nil {
		proc, err := spawn(cmd)
		if err != nil {
			_ = tracker.Release()
			return nil, nil, fmt.Errorf("starting the command: %w", err)
		}
		return proc, tracker, nil
	}
	if err := cmd.Start(); err != nil {
		_ = tracker.Release()
		return nil, nil, fmt.Errorf("starting the command: %w", err)
	}
	return execProcess{cmd}, tracker, nil
}

// execProcess is a command the service started itself, its child.
type execProcess struct{ cmd *exec.Cmd }

func (p execProcess) Pid() int { return p.cmd.Process.Pid }

func (p execProcess) Wait() (int, error) {
	sandbox.AwaitExit(p.cmd.Process.Pid)
	err := p.cmd.Wait()
	if err == nil {
		return 0, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok {
			return exitCode(ws), nil
		}
		return exitErr.ExitCode(), nil
	}
	return -1, err
}

// startedProcess is a command the environment's init started.
type startedProcess struct{ p *sandbox.Process }

func (p startedProcess) Pid() int { return p.p.Pid() }

func (p startedProcess) Wait() (int, error) {
	ws, err := p.p.Wait()
	if err != nil {
		return -1, err
	}
	return exitCode(ws), nil
}

// exitCode is a wait status as a shell reports it.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
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

// Sandboxed launches commands into the sandbox of their environment; in a
// confined one, the Manager's commands start from its resident starter.
func Sandboxed(env *sandbox.Env) Launcher { return sandboxed{env: env, cgroups: true} }

// SandboxedByGroup is Sandboxed without a per-command cgroup: commands are
// tracked by process group, session and their descendants only. Starting
// is cheaper (no cgroup to create and clone into), but a daemon that
// double-forked out of the session cannot be found.
func SandboxedByGroup(env *sandbox.Env) Launcher { return sandboxed{env: env} }

// sandboxed is the Launcher, and where the environment has a starter the
// Starter, of a sandboxed environment.
type sandboxed struct {
	env     *sandbox.Env
	cgroups bool // a cgroup per command where the host offers them
}

// Launch implements Launcher.
func (l sandboxed) Launch(cmd *exec.Cmd) (Tracker, error) {
	if l.cgroups {
		return l.env.Apply(cmd)
	}
	if err := l.env.Confine(cmd); err != nil {
		return nil, err
	}
	return &groupTracker{cmd: cmd}, nil
}

// Start implements Starter.
func (l sandboxed) Start(cmd *exec.Cmd) (Process, Tracker, error) {
	if !l.env.CanStart() {
		return start(LauncherFunc(l.Launch), cmd, nil)
	}
	p, g, err := l.env.Start(cmd, l.cgroups)
	if err != nil {
		return nil, nil, fmt.Errorf("starting the command: %w", err)
	}
	return startedProcess{p}, g, nil
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
