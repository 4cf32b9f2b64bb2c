//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The spawner: a process of each confined environment that starts its
// commands as children of the service.
//
// The init's resident starter (starter_init.go) costs every command two
// cross-process hand-offs on its path: the request to the init, and the
// exit report back (the init is the command's parent, so only it learns
// of the exit). On a virtual machine each is the wake-up of an idle CPU,
// 50-100 µs; with them, `true` through exec_command took 1.16-1.19 times
// as long as unconfined on this project's 2-core test machine.
//
// The spawner removes the second. The trampoline ("sandbox-exec run
// --detach") puts it into the environment as it puts a command: the
// environment's cgroups and namespaces, its file-size and core-dump
// limits, the sandbox user, no capabilities, Landlock and the system call
// filter; and it starts it with CLONE_PARENT, so that the spawner is the
// service's child. The spawner forks every command with CLONE_PARENT in
// turn: each command is born inside all of the above, and is the
// service's child, which waits for it as for an unconfined command. The
// request remains the one hand-off (measured: 1.06-1.09).
//
// Security: the spawner runs as the sandbox user next to the commands,
// so a command may kill it (then the init's starter serves) but cannot
// read or write it (it is not dumpable; the filter refuses ptrace and
// process_vm_*). A spawner a command took over still has nothing a
// command lacks, except its answers to the service: the service checks
// that every process it names is its own child (only processes of this
// environment can be), and moves nothing else into a cgroup.
//
// The spawner starts in the background at the environment's first
// command (its two program starts cost some 20 ms); the init's starter
// serves until it is ready, and for good once it is gone.

// spawnerOff makes new environments use their init's starter only; the
// tests set it to exercise that path.
var spawnerOff atomic.Bool

// spawnerTimeout bounds the wait for the spawner to take a request or to
// answer one; past it, the spawner is dropped and the init's starter
// serves.
var spawnerTimeout = 5 * time.Second

// errSpawnerGone says that the spawner is gone (it ended, or a command
// killed it) before it took a request.
var errSpawnerGone = errors.New("the environment's spawner is gone")

// spawner is the service's side of an environment's spawner process.
type spawner struct {
	pid int        // the spawner process's, as the service sees it
	mu  sync.Mutex // orders the requests and the closing of ctl
	ctl *os.File   // the control socket, non-blocking; nil once closed
	// reaped is closed once the spawner process has ended and was reaped.
	reaped chan struct{}
}

// startSpawner starts e's spawner, and makes it the one Start uses once
// it has said it is ready; on any failure the environment keeps its
// init's starter. It runs in the background (usableSpawner).
func (e *Env) startSpawner() {
	defer close(e.spawning)
	s, err := e.newSpawner()
	e.spawnMu.Lock()
	defer e.spawnMu.Unlock()
	if err != nil || e.closing {
		if s != nil {
			s.close()
		}
		return
	}
	e.spawner = s
}

// newSpawner starts the spawner through the trampoline and waits for its
// first message: a pidfd of itself.
func (e *Env) newSpawner() (*spawner, error) {
	if spawnerOff.Load() {
		return nil, errors.New("spawners are off")
	}
	// The trampoline starts the spawner inside the environment, where
	// the penguin binary's path may not exist (it may lie under the
	// service's /tmp): it runs the binary through a descriptor of it.
	bin, err := os.OpenFile(e.self, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer bin.Close()
	mine, theirs, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer theirs.Close()
	// It starts in "/": the service's working directory may not exist
	// in the environment either.
	cmd := &exec.Cmd{Path: "/proc/self/fd/1", Args: []string{"penguin", SubcommandName, roleSpawn}, Dir: "/", Stdin: theirs, Stdout: bin}
	g, err := e.apply(cmd, "", "--detach")
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		// The trampoline ends once the spawner started; waited for
		// through the poller, so that creating many environments at
		// once holds no OS thread per environment.
		AwaitExit(cmd.Process.Pid)
		err = cmd.Wait()
	}
	if g != nil {
		_ = g.Release()
	}
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("starting the spawner: %w", err)
	}
	theirs.Close()
	_ = mine.SetReadDeadline(time.Now().Add(initTimeout))
	var hello startReply
	pidfd, err := recvJSON(mine, &hello)
	if err == nil && pidfd < 0 {
		err = errors.New("no pidfd")
	}
	if err == nil && !isChild(pidfd) {
		unix.Close(pidfd)
		err = errors.New("it is not this process's child")
	}
	if err != nil {
		mine.Close()
		return nil, fmt.Errorf("the spawner's first message: %w", err)
	}
	_ = mine.SetReadDeadline(time.Time{})
	s := &spawner{pid: pidfdPid(pidfd), ctl: mine, reaped: make(chan struct{})}
	go s.reap(s.pid, pidfd)
	return s, nil
}

// reap waits for the spawner process pid (of pidfd) to end, reaps it, and
// closes the control socket.
func (s *spawner) reap(pid, pidfd int) {
	defer close(s.reaped)
	defer s.close()
	if unix.SetNonblock(pidfd, true) != nil {
		unix.Close(pidfd)
		return
	}
	f := os.NewFile(uintptr(pidfd), "spawner")
	defer f.Close()
	awaitPidfd(f)
	_, _ = reapChild(pid)
}

// send passes one request to the spawner, or fails with errSpawnerGone.
func (s *spawner) send(msg []byte, fds []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctl == nil {
		return errSpawnerGone
	}
	// A spawner that takes no requests (a command stopped it: it runs
	// as the same user) must not hold the service's call.
	_ = s.ctl.SetWriteDeadline(time.Now().Add(spawnerTimeout))
	if err := sendRequest(s.ctl, msg, fds); err != nil {
		return fmt.Errorf("%w: %v", errSpawnerGone, err)
	}
	return nil
}

// close closes the control socket, which ends the spawner.
func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctl != nil {
		s.ctl.Close()
		s.ctl = nil
	}
}

// usableSpawner returns the environment's spawner, or nil while it has
// none that is ready; the first call starts it.
func (e *Env) usableSpawner() *spawner {
	e.spawnMu.Lock()
	defer e.spawnMu.Unlock()
	if e.spawning == nil && e.starts && !e.closing {
		e.spawning = make(chan struct{})
		go e.startSpawner()
	}
	return e.spawner
}

// isChild reports whether the process of pidfd is a child of this process
// (waitid answers ECHILD for any other).
func isChild(pidfd int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WSTOPPED|unix.WCONTINUED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil
}

// reapChild waits for the child pid to exit, reaps it, and returns its
// wait status.
func reapChild(pid int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	_, err := unix.Wait4(pid, &ws, 0, nil)
	for errors.Is(err, unix.EINTR) {
		_, err = unix.Wait4(pid, &ws, 0, nil)
	}
	return ws, err
}
