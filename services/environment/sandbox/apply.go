//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// SubcommandName is the hidden penguin subcommand that Apply re-executes
// the penguin binary as; its arguments go to SandboxExec.
const SubcommandName = "sandbox-exec"

// Apply prepares cmd (built by exec.Command or exec.CommandContext, not yet
// started) to run under p, and returns the Group that tracks everything it
// will start. self is the path of the penguin binary; "/proc/self/exe" is
// the most robust choice (it survives the binary being replaced on disk),
// os.Executable() also works. self is only used when p confines commands.
//
// After Apply:
//   - the command starts as the leader of a new session and process group
//     (Setsid; this also suits a pseudo-terminal, which needs Setsid and
//     Setctty: pty.Start and pty.StartWithSize keep Apply's settings);
//   - it gets SIGKILL when the thread that started it dies (Pdeathsig), so
//     a crashed service does not leave its direct children running;
//   - when a cgroup v2 hierarchy is writable, it is born into a fresh
//     cgroup of its own (clone3 CLONE_INTO_CGROUP), which nothing it starts
//     can leave;
//   - with NoNetwork, it starts in a new network namespace (CLONE_NEWNET);
//   - when p confines commands, cmd runs "self sandbox-exec [flags] -- path
//     args...": the trampoline brings the namespace's loopback up, applies
//     Landlock and then executes the real command in place.
//
// Do not replace cmd.SysProcAttr afterwards (with pty.StartWithAttrs, pass
// cmd.SysProcAttr itself): the settings above live there. Apply does not
// call Check; the service calls Check once, when the environment is
// created, and sandbox-exec fails loudly if the kernel cannot do what the
// policy asks.
func Apply(cmd *exec.Cmd, p Policy, self string) (*Group, error) {
	parent, err := CgroupParent()
	if err != nil {
		parent = ""
	}
	return apply(cmd, p, self, parent)
}

// Confine is Apply without a cgroup: it confines cmd and makes it a
// session leader with a parent-death signal, but leaves tracking to the
// caller (KillGroup, GroupAlive, WaitGroupGone by cmd.Process.Pid). It suits
// a launcher that has no place to keep a Group; it cannot catch a
// double-forked daemon, which Apply's cgroup does.
func Confine(cmd *exec.Cmd, p Policy, self string) error {
	_, err := apply(cmd, p, self, "")
	return err
}

// apply is Apply with the cgroup parent chosen by the caller; "" tracks
// the command by process group and session only.
func apply(cmd *exec.Cmd, p Policy, self string, cgroupParent string) (*Group, error) {
	if cmd.Process != nil {
		return nil, errors.New("sandbox: command already started")
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	if p.Mode != None {
		fi, err := os.Stat(p.Workspace)
		if err != nil {
			return nil, fmt.Errorf("sandbox workspace: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("sandbox workspace %s is not a directory", p.Workspace)
		}
	}
	if p.confined() && self == "" {
		return nil, errors.New("sandbox: the path of the penguin binary is needed to confine commands")
	}

	attr := cmd.SysProcAttr
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	if attr.Foreground || (attr.Setpgid && attr.Pgid != 0) {
		return nil, errors.New("sandbox: the command must lead its own process group (Foreground or Setpgid with a Pgid are not allowed)")
	}
	// A session leader is also the leader of its own process group, and
	// setpgid on a session leader fails, so Setsid replaces Setpgid.
	attr.Setpgid = false
	attr.Setsid = true
	attr.Pdeathsig = syscall.SIGKILL
	if p.NoNetwork {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}

	if p.confined() {
		args := []string{self, SubcommandName, "--mode", p.Mode.String()}
		if p.Mode != None {
			args = append(args, "--workspace", p.Workspace)
			for _, w := range p.WritablePaths {
				args = append(args, "--writable", w)
			}
		}
		if p.NoNetwork {
			args = append(args, "--no-network")
		}
		if len(cmd.Args) > 0 && cmd.Args[0] != cmd.Path {
			args = append(args, "--argv0", cmd.Args[0])
		}
		args = append(args, "--", cmd.Path)
		if len(cmd.Args) > 1 {
			args = append(args, cmd.Args[1:]...)
		}
		cmd.Path = self
		cmd.Args = args
	}

	g := &Group{cmd: cmd}
	if cgroupParent != "" {
		// A cgroup that cannot be made leaves the process-group tracking
		// that works everywhere: worse at catching daemons, never unsafe.
		if cg, err := pool.get(cgroupParent); err == nil {
			attr.UseCgroupFD = true
			attr.CgroupFD = cg.fd
			g.cg, g.cgParent = cg, cgroupParent
		}
	}
	cmd.SysProcAttr = attr
	return g, nil
}

// Group tracks everything one command started. With a cgroup it sees every
// descendant, daemons included; without one it falls back to the process
// group and session of the command's first process and their descendants
// (see KillGroup for what that misses).
//
// Kill, Alive and Wait may be called from any goroutine once cmd.Start has
// returned. Call Release when done with the command (after cmd.Wait), also
// when it never started: it gives back the cgroup.
type Group struct {
	cmd *exec.Cmd

	mu       sync.Mutex
	cg       *cgroup
	cgParent string // where cg goes back to the pool
	released bool
	gone     bool // the process group was seen empty; its pid may be reused
}

// Pid returns the pid of the command's first process (also its process
// group and session id), or 0 before it started.
func (g *Group) Pid() int {
	if g.cmd.Process == nil {
		return 0
	}
	return g.cmd.Process.Pid
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cg != nil {
		return g.cg.kill()
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
