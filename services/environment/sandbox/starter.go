//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a command that the environment's init started (Env.Start).
// It is not a child of the service, so it is waited for through its
// channel to the init rather than with wait(2).
//
// Start does not wait for the init's answer: the command starts while
// the service goes on, and the answer (the command's pid, or why it could
// not start) is read by whichever of Pid and Wait needs it first. That
// takes a cross-process wake-up and the pid's lookup off every command's
// path (about 0.1 ms of the 2 ms that `true` takes through exec_command).
type Process struct {
	channel *os.File // the init answers, then reports the exit, here

	startOnce sync.Once
	pid       int   // in the service's PID namespace; 0 when it was gone before it was known
	startErr  error // why the command did not start
}

// Pid returns the command's process id as the service sees it (also its
// process group and session id), or 0 when it did not start or exited
// before it could be known. It waits for the init's answer, within
// initTimeout.
func (p *Process) Pid() int {
	p.startOnce.Do(p.readStart)
	return p.pid
}

// readStart reads the init's answer to the start request.
func (p *Process) readStart() {
	_ = p.channel.SetReadDeadline(time.Now().Add(initTimeout))
	defer p.channel.SetReadDeadline(time.Time{})
	var r startReply
	pidfd, err := recvJSON(p.channel, &r)
	if err == nil && r.Error != "" {
		err = errors.New(r.Error)
	}
	if err != nil {
		p.startErr = fmt.Errorf("starting the command in the environment: %w", err)
		return
	}
	if pidfd >= 0 {
		p.pid = pidfdPid(pidfd)
		unix.Close(pidfd)
	}
}

// Wait blocks until the command has exited and returns its wait status.
// It fails when the command did not start, or when the environment ended
// first (its init took the command down with it). It must be called once.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	defer p.channel.Close()
	p.startOnce.Do(p.readStart)
	if p.startErr != nil {
		return 0, p.startErr
	}
	var r exitReport
	if _, err := recvJSON(p.channel, &r); err != nil {
		return 0, fmt.Errorf("waiting for the command: %w", err)
	}
	return syscall.WaitStatus(r.Status), nil
}

// CanStart reports whether the environment's init starts commands itself
// (Start), which confined environments' inits do.
func (e *Env) CanStart() bool { return e.starts }

// Start starts cmd (not yet started; its Stdin, Stdout and Stderr must be
// *os.File) in the environment from its resident starter, and returns the
// process and the Group that tracks everything it starts. The command is
// confined exactly as Apply's trampoline confines it, at a fraction of
// the cost: no process is started but the command. cmd.SysProcAttr may
// ask for Setctty (the standard input is then the controlling terminal);
// its other fields are not used, and cmd itself is not started: use the
// returned Process.
//
// Where the host offers per-command cgroups, the command is moved into
// its own right after it started, from the init; a process it forks
// within those microseconds stays in the environment's cgroup, where the
// Group still finds it by its process group and session (see KillGroup).
// perCommandCgroup false tracks by process group and session only.
func (e *Env) Start(cmd *exec.Cmd, perCommandCgroup bool) (*Process, *Group, error) {
	if !e.starts {
		return nil, nil, errors.New("sandbox: this environment has no starter; use Apply")
	}
	if cmd.Process != nil {
		return nil, nil, errors.New("sandbox: command already started")
	}
	if cmd.Err != nil {
		return nil, nil, cmd.Err
	}
	stdio := []any{cmd.Stdin, cmd.Stdout, cmd.Stderr}
	fds := make([]int, 0, maxReqFDs)
	channel, theirs, err := socketPair()
	if err != nil {
		return nil, nil, err
	}
	defer theirs.Close()
	fds = append(fds, int(theirs.Fd()))
	for i, f := range stdio {
		file, ok := f.(*os.File)
		if !ok || file == nil {
			channel.Close()
			return nil, nil, fmt.Errorf("sandbox: Start needs standard file %d to be an *os.File", i)
		}
		fds = append(fds, int(file.Fd()))
	}
	req := startRequest{Path: cmd.Path, Args: cmd.Args, Env: cmd.Environ(), Dir: cmd.Dir,
		Ctty: cmd.SysProcAttr != nil && cmd.SysProcAttr.Setctty}
	p := &Process{channel: channel}
	g := &Group{started: p}
	if perCommandCgroup {
		if cg, parent := e.commandCgroup(); cg != nil {
			if procs, err := cg.procsFD(); err == nil {
				g.cg, g.cgParent, g.late = cg, parent, true
				req.Cgroup = true
				fds = append(fds, procs)
			} else {
				_ = pool.put(parent, cg)
			}
		}
	}
	fail := func(err error) (*Process, *Group, error) {
		p.startOnce.Do(func() { p.startErr = err }) // nothing to read: the Group's release must not wait
		channel.Close()
		_ = g.Release()
		return nil, nil, err
	}
	msg, err := req.encode()
	if err != nil {
		return fail(fmt.Errorf("sandbox: %w", err))
	}
	if len(msg) > maxStartRequest {
		return fail(fmt.Errorf("sandbox: the command line and environment take %d bytes, more than the %d a command may have", len(msg), maxStartRequest))
	}
	if err := e.send(msg, fds); err != nil {
		return fail(err)
	}
	return p, g, nil
}

// commandCgroup returns a fresh per-command cgroup and its parent, where
// the host offers them, as Apply chooses them.
func (e *Env) commandCgroup() (*cgroup, string) {
	parent, err := CgroupParent()
	if err != nil {
		parent = ""
	}
	if e.cg != nil && e.cg.v2 != "" {
		parent = e.cg.v2
	}
	if parent == "" {
		return nil, ""
	}
	cg, err := pool.get(parent)
	if err != nil {
		return nil, ""
	}
	return cg, parent
}

// send passes one request to the starter.
func (e *Env) send(msg []byte, fds []int) error {
	e.ctlMu.Lock()
	defer e.ctlMu.Unlock()
	if e.ctl == nil {
		return errors.New("sandbox: the environment is closed")
	}
	rc, err := e.ctl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("sandbox: the environment's starter is gone: %w", err)
	}
	return nil
}

// socketPair returns a connected SOCK_SEQPACKET pair: the first end
// non-blocking for the service's poller, the second to pass on.
func socketPair() (mine, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "starter"), os.NewFile(uintptr(fds[1]), "starter"), nil
}

// recvJSON reads one message from a channel into v, and the descriptor
// that came with it (-1 when none did).
func recvJSON(f *os.File, v any) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return -1, err
	}
	fd := -1
	if fds := receivedFDs(oob[:oobn]); len(fds) > 0 {
		fd = fds[0]
		closeAll(fds[1:])
	}
	if n == 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, errors.New("the environment's init ended")
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("malformed answer from the environment's init: %w", err)
	}
	return fd, nil
}

// pidfdPid returns the pid, in this process's PID namespace, of the
// process a pidfd refers to, or 0 when it has already exited.
func pidfdPid(pidfd int) int {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Pid:")); ok {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || pid <= 0 {
				return 0
			}
			return pid
		}
	}
	return 0
}
