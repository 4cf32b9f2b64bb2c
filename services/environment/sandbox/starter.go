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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a command that the environment's init started (Env.Start).
// It is not a child of the service, so it is waited for through its
// channel to the init rather than with wait(2).
type Process struct {
	pid     int      // in the service's PID namespace; 0 when it was gone before it was known
	channel *os.File // the init reports the exit here
}

// Pid returns the command's process id as the service sees it (also its
// process group and session id), or 0 when it exited before it could be
// known.
func (p *Process) Pid() int { return p.pid }

// Wait blocks until the command has exited and returns its wait status.
// It fails when the environment ended first (its init took the command
// down with it), and must be called once.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	defer p.channel.Close()
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
	g := &Group{}
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
		channel.Close()
		_ = g.Release()
		return nil, nil, err
	}
	msg, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if len(msg) > maxStartRequest {
		return fail(fmt.Errorf("sandbox: the command line and environment take %d bytes, more than the %d a command may have", len(msg), maxStartRequest))
	}
	if err := e.send(msg, fds); err != nil {
		return fail(err)
	}
	theirs.Close()
	_ = channel.SetReadDeadline(time.Now().Add(initTimeout))
	var r startReply
	pidfd, err := recvJSON(channel, &r)
	if err == nil && r.Error != "" {
		err = errors.New(r.Error)
	}
	if err != nil {
		return fail(fmt.Errorf("starting the command in the environment: %w", err))
	}
	_ = channel.SetReadDeadline(time.Time{})
	pid := 0
	if pidfd >= 0 {
		pid = pidfdPid(pidfd)
		unix.Close(pidfd)
	}
	g.pid = pid
	if pid == 0 {
		g.gone = true
	}
	return &Process{pid: pid, channel: channel}, g, nil
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
