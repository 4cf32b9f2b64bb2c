//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
)

// Apply prepares cmd (built by exec.Command or exec.CommandContext, not yet
// started) to run unconfined, and returns the Group that tracks everything
// it will start:
//   - the command starts as the leader of a new session and process group
//     (Setsid; this also suits a pseudo-terminal, which needs Setsid and
//     Setctty: pty.Start and pty.StartWithSize keep Apply's settings);
//   - it gets SIGKILL when the thread that started it dies (Pdeathsig), so
//     a crashed service does not leave its direct children running;
//   - when a cgroup v2 hierarchy is writable, it is born into a fresh
//     cgroup of its own (clone3 CLONE_INTO_CGROUP), which nothing it starts
//     can leave without the privileges of a mode None command.
//
// It is Env.Apply for an environment that isolates nothing. Do not replace
// cmd.SysProcAttr afterwards (with pty.StartWithAttrs, pass
// cmd.SysProcAttr itself): the settings above live there.
func Apply(cmd *exec.Cmd) (*Group, error) { return (&Env{}).Apply(cmd) }

// Group tracks everything one command started. With a cgroup it sees every
// descendant, daemons included; without one it falls back to the process
// group and session of the command's first process and their descendants
// (see KillGroup for what that misses).
//
// Kill, Alive and Wait may be called from any goroutine once cmd.Start has
// returned. Call Release when done with the command (after cmd.Wait), also
// when it never started: it gives back the cgroup.
type Group struct {
	cmd     *exec.Cmd // nil for a command the environment's init started
	started *Process  // such a command

	mu       sync.Mutex
	cg       *cgroup
	cgParent string // where cg goes back to the pool
	// late says the command was moved into cg after it started (Env.Start),
	// so what it forked at once may be outside cg, in its process group.
	late     bool
	released bool
	gone     bool // the process group was seen empty; its pid may be reused
}

// Pid returns the pid of the command's first process (also its process
// group and session id), or 0 before it started.
func (g *Group) Pid() int {
	if g.started != nil {
		return g.started.Pid()
	}
	if g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// settle waits, for a command the environment's init started, until the
// init has answered (Env.Start does not wait for it): by then the command
// is in its cgroup, or known not to have started, so that a look at the
// cgroup, or a kill through it, sees the command.
func (g *Group) settle() {
	if g.started != nil {
		g.started.Pid()
	}
}

// Cgroup returns the directory of the command's cgroup, or "" when it is
// tracked by process group only.
func (g *Group) Cgroup() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg == nil {
		return ""
	}
	return g.cg.dir
}

// Kill sends SIGKILL to every process of the command. It is a no-op when
// the command never started or is already known to be gone.
func (g *Group) Kill() error {
	g.settle()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg != nil {
		err := g.cg.kill()
		if g.late && !g.gone && g.Pid() != 0 && GroupAlive(g.Pid()) {
			err = errors.Join(err, KillGroup(g.Pid()))
		}
		return err
	}
	pid := g.Pid()
	if pid == 0 || g.gone {
		return nil
	}
	return KillGroup(pid)
}

// Alive reports whether any live (non-zombie) process of the command
// remains.
func (g *Group) Alive() bool {
	g.settle()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.aliveLocked()
}

func (g *Group) aliveLocked() bool {
	if g.cg != nil {
		pop, err := g.cg.populated()
		return err != nil || pop // unreadable: assume the worst
	}
	pid := g.Pid()
	if pid == 0 || g.gone {
		return false
	}
	if !GroupAlive(pid) {
		g.gone = true
		return false
	}
	return true
}

// Wait polls until no live process of the command remains, or ctx ends.
func (g *Group) Wait(ctx context.Context) error {
	return poll(ctx, func() (bool, string) {
		return !g.Alive(), fmt.Sprintf("processes of command %d", g.Pid())
	})
}

// Release kills what is left of the command, waits a few seconds at most
// for it to end, and gives back its cgroup: kept empty for the next command
// (see DrainCgroupPool), or removed. It is idempotent.
func (g *Group) Release() error {
	g.settle()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return nil
	}
	g.released = true
	if g.cg == nil {
		if g.aliveLocked() {
			return KillGroup(g.Pid())
		}
		return nil
	}
	cg := g.cg
	g.cg = nil
	g.gone = true // the cgroup held everything; without it, never guess by pid
	return pool.put(g.cgParent, cg)
}
