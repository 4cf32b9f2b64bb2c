package environment

import (
	"os/exec"
	"sync"
	"sync/atomic"

	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// commandRunner is what runs an environment's commands: its sandbox (the
// namespaces and cgroups, with the init process that holds them) and the
// manager of its command sessions (which takes the shell snapshot). Both
// are started at the first call that needs them, not when the environment
// is created: a task that only reads and edits files (which the service
// does itself, beneath an os.Root) never pays for an init process, a
// trampoline and a login shell. Whether the host can enforce the sandbox
// is checked at creation all the same, without starting anything.
//
// Each part starts at most once, whatever the number of calls racing for
// it; a failed start is kept and reported to every later call, so that
// they all see the same cause. After close, nothing starts any more.
type commandRunner struct {
	policy sandbox.Policy // as asked for, for what reports the mode
	// newSandbox starts the sandbox; newManager starts the manager over
	// it. The service makes both from the environment's request.
	newSandbox func() (*sandbox.Env, error)
	newManager func(*sandbox.Env, command.Launcher) (*command.Manager, error)
	// byGroup tracks commands by process group instead of per-command
	// cgroups (Options.NoCgroups).
	byGroup bool
	// mayWrite registers the environment's commands with the service's
	// writeTracker from the sandbox's start to its end: a process left
	// running may write at any time.
	mayWrite func() (end func())

	mu          sync.Mutex
	endWrites   func() // once the sandbox was started
	closed      bool
	sandboxDone bool
	sandbox     *sandbox.Env
	launcher    command.Launcher
	sandboxErr  error
	managerDone bool
	managerErr  error
	// manager is set once started; it is read without mu, so that
	// listing the processes never waits behind a start.
	manager atomic.Pointer[command.Manager]
}

// startSandboxLocked starts the sandbox unless it was started or tried
// already; r.mu must be held.
func (r *commandRunner) startSandboxLocked() error {
	if r.closed {
		return command.ErrClosed
	}
	if !r.sandboxDone {
		r.sandboxDone = true
		r.endWrites = r.mayWrite()
		r.sandbox, r.sandboxErr = r.newSandbox()
		if r.sandboxErr == nil {
			r.launcher = command.Sandboxed(r.sandbox)
			if r.byGroup {
				r.launcher = command.SandboxedByGroup(r.sandbox)
			}
		}
	}
	return r.sandboxErr
}

// Launch implements command.Launcher for the custom tools: their commands
// need the sandbox, not the command sessions and their shell snapshot.
func (r *commandRunner) Launch(cmd *exec.Cmd) (command.Tracker, error) {
	r.mu.Lock()
	err := r.startSandboxLocked()
	launcher := r.launcher
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return launcher.Launch(cmd)
}

// Start returns the command manager, starting the sandbox and the manager
// the first time.
func (r *commandRunner) Start() (*command.Manager, error) {
	if m := r.manager.Load(); m != nil {
		return m, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.startSandboxLocked(); err != nil {
		return nil, err
	}
	if !r.managerDone {
		r.managerDone = true
		var m *command.Manager
		if m, r.managerErr = r.newManager(r.sandbox, r.launcher); r.managerErr == nil {
			r.manager.Store(m)
		}
	}
	if r.managerErr != nil {
		return nil, r.managerErr
	}
	return r.manager.Load(), nil
}

// Started returns the command manager, or nil when no command has needed
// it yet (so there are no command sessions).
func (r *commandRunner) Started() *command.Manager { return r.manager.Load() }

// list is the command sessions, none before the first command.
func (r *commandRunner) list() []command.Info {
	if m := r.Started(); m != nil {
		return m.List()
	}
	return nil
}

// close ends the commands and then the sandbox, whose end takes every
// process left in its namespaces and cgroups with it; a start under way
// finishes first, and nothing starts afterwards. It returns the error of
// closing the sandbox.
func (r *commandRunner) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if m := r.manager.Load(); m != nil {
		m.Close()
	}
	if r.endWrites != nil {
		// After the sandbox, which takes the processes left with it.
		defer r.endWrites()
	}
	if r.sandbox != nil {
		return r.sandbox.Close()
	}
	return nil
}
