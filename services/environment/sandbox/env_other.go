//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Env is the sandbox of one environment on a system other than Linux: what
// that system offers (see Unavailable), applied to each command as it
// starts. There is no process of the environment's own, so nothing holds
// its daemons together: Close ends only the commands still tracked.
type Env struct {
	p Policy
	host

	closeOnce sync.Once
	closeErr  error
}

// NewEnv prepares the sandbox of one environment under p. self is unused
// outside Linux (there is no trampoline). It fails, with an error wrapping
// ErrUnsupported, when this system cannot enforce p.
func NewEnv(p Policy, self string) (*Env, error) {
	if err := Check(p); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	e := &Env{p: p}
	if err := e.host.start(p); err != nil {
		_ = e.host.close()
		return nil, err
	}
	return e, nil
}

// Check says whether this system can enforce p; an error wraps
// ErrUnsupported and names what is missing.
func Check(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	return check(p)
}

// Policy returns the policy the environment runs under, defaults filled
// in.
func (e *Env) Policy() Policy { return e.p }

// Apply prepares the unstarted cmd to run in the environment, in a process
// group of its own, and returns the Group that tracks it.
func (e *Env) Apply(cmd *exec.Cmd) (*Group, error) {
	if err := e.Confine(cmd); err != nil {
		return nil, err
	}
	return &Group{cmd: cmd}, nil
}

// Confine is Apply for a caller that tracks the command itself (KillGroup
// & co.).
func (e *Env) Confine(cmd *exec.Cmd) error {
	newGroup(cmd)
	return e.host.wrap(cmd)
}

// Apply is Env.Apply for an environment that isolates nothing.
func Apply(cmd *exec.Cmd) (*Group, error) { return (&Env{}).Apply(cmd) }

// Events counts how often the environment's commands ran into its limits:
// never, as no limits are enforced outside Linux.
func (e *Env) Events() LimitEvents { return LimitEvents{} }

// LimitsSince says which limits were hit since before: none outside
// Linux.
func (e *Env) LimitsSince(LimitEvents) string { return "" }

// CanStart reports whether Start can start commands itself: never outside
// Linux, where every command is prepared by Apply and started by its
// caller.
func (e *Env) CanStart() bool { return false }

// Start is not available outside Linux (CanStart is false).
func (e *Env) Start(*exec.Cmd, bool) (*Process, *Group, error) {
	return nil, nil, fmt.Errorf("%w: starting commands from the environment's own starter needs Linux", ErrUnsupported)
}

// Close releases what the environment holds (its proxy listener, its
// temporary directory).
func (e *Env) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.host.close() })
	return e.closeErr
}

// Process is a command started by an environment's starter, which exists
// on Linux only; the type lets callers compile everywhere.
type Process struct{}

// Pid returns 0: no Process is ever made outside Linux.
func (p *Process) Pid() int { return 0 }

// Wait fails: no Process is ever made outside Linux.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	return ws, fmt.Errorf("%w: no environment starter outside Linux", ErrUnsupported)
}

// Group tracks everything one command started, by its process group (its
// process tree on Windows).
type Group struct {
	cmd *exec.Cmd

	mu   sync.Mutex
	gone bool // seen gone; its pid may be reused, so never signalled again
}

// Pid returns the pid of the command's first process, or 0 before it
// started.
func (g *Group) Pid() int {
	if g.cmd == nil || g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// Cgroup returns "": cgroups are Linux only.
func (g *Group) Cgroup() string { return "" }

// Kill ends every process of the command it can find.
func (g *Group) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.Pid() == 0 || g.gone {
		return nil
	}
	return KillGroup(g.Pid())
}

// Alive reports whether a process of the command remains.
func (g *Group) Alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.aliveLocked()
}

func (g *Group) aliveLocked() bool {
	if g.Pid() == 0 || g.gone {
		return false
	}
	if !GroupAlive(g.Pid()) {
		g.gone = true
		return false
	}
	return true
}

// Wait polls until no process of the command remains, or ctx ends.
func (g *Group) Wait(ctx context.Context) error {
	return poll(ctx, func() (bool, string) {
		return !g.Alive(), fmt.Sprintf("processes of command %d", g.Pid())
	})
}

// Release kills what is left of the command. It is idempotent.
func (g *Group) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aliveLocked() {
		err := KillGroup(g.Pid())
		g.gone = true
		return err
	}
	return nil
}

// WaitGroupGone polls until no process of the group led by pgid remains,
// or ctx ends.
func WaitGroupGone(ctx context.Context, pgid int) error {
	return poll(ctx, func() (bool, string) {
		return !GroupAlive(pgid), fmt.Sprintf("processes of group %d", pgid)
	})
}

// AwaitExit returns at once: outside Linux there is no pidfd to wait on
// through the poller, and the caller's Wait blocks instead.
func AwaitExit(int) {}

// errNoCgroups is why there are no per-command cgroups.
var errNoCgroups = fmt.Errorf("%w: cgroups are Linux only (%s)", ErrUnsupported, runtime.GOOS)

// CgroupParent says why commands get no cgroup of their own.
func CgroupParent() (string, error) { return "", errNoCgroups }

// SweepCgroups has nothing to sweep outside Linux.
func SweepCgroups() (int, error) { return 0, nil }

// DrainCgroupPool has nothing to drain outside Linux.
func DrainCgroupPool() error { return nil }

// Trampoline returns "": confined commands start through no trampoline
// outside Linux.
func Trampoline() (path, reason string) {
	return "", fmt.Sprintf("no sandbox trampoline on %s: commands start directly", runtime.GOOS)
}

// SandboxExec is the Linux sandbox's trampoline, which does not exist
// elsewhere.
func SandboxExec([]string) error {
	return errors.New(SubcommandName + ": the sandbox trampoline runs on Linux only")
}
