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

// Process is a command that Env.Start started. One the environment's init
// started is not a child of the service, so it is waited for through its
// channel to the init rather than with wait(2).
//
// Start does not wait for the init's answer: the command starts while
// the service goes on, and the answer (the command's pid, or why it could
// not start) is read by whichever of Pid and Wait needs it first. That
// takes a cross-process wake-up and the pid's lookup off every command's
// path (about 0.1 ms of the 2 ms that `true` takes through exec_command).
//
// A command the environment's spawner started (spawner.go) is instead a
// child of the service (child): the spawner answers with its pidfd on the
// channel, and the service waits for it and reaps it itself, once, in Wait
// or in Env.Close.
type Process struct {
	channel *os.File // the init answers, then reports the exit, here

	child    bool
	env      *Env
	spawner  *spawner // that started it
	procs    int      // the cgroup.procs of its cgroup, or -1
	pidfd    *os.File // non-blocking; no pid is reused under it
	reapOnce sync.Once
	status   syscall.WaitStatus
	reapErr  error

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

// readStart reads the answer to the start request, the init's or the
// spawner's.
func (p *Process) readStart() {
	timeout := initTimeout
	if p.child {
		timeout = spawnerTimeout
	}
	_ = p.channel.SetReadDeadline(time.Now().Add(timeout))
	defer p.channel.SetReadDeadline(time.Time{})
	var r startReply
	pidfd, err := recvJSON(p.channel, &r)
	answered := err == nil
	if answered && r.Error != "" {
		err = errors.New(r.Error)
	}
	switch {
	case p.child:
		err = p.adopt(pidfd, err, answered)
	case pidfd >= 0 && err == nil:
		p.pid = pidfdPid(pidfd)
		unix.Close(pidfd)
	case pidfd >= 0:
		unix.Close(pidfd)
	}
	if err != nil {
		p.startErr = fmt.Errorf("starting the command in the environment: %w", err)
	}
}

// adopt takes the command the spawner started (pidfd; err says why it
// could not start) as this process's child: it checks that it is one,
// learns its pid and moves it into its cgroup. A spawner that did not
// answer is dropped.
func (p *Process) adopt(pidfd int, err error, answered bool) error {
	if pidfd < 0 || err != nil {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		p.env.forget(p)
		if err == nil {
			err = errors.New("the spawner named no process")
		}
		if !answered {
			p.env.dropSpawner(p.spawner)
		}
		return err
	}
	if !isChild(pidfd) {
		unix.Close(pidfd)
		p.env.forget(p)
		p.env.dropSpawner(p.spawner) // it lies, or was taken over
		return errors.New("the spawner named a process that is not the service's child")
	}
	pid := pidfdPid(pidfd)
	p.pid = pid
	if p.procs >= 0 && pid > 0 {
		_, _ = unix.Write(p.procs, []byte(strconv.Itoa(pid)))
	}
	if unix.SetNonblock(pidfd, true) != nil {
		unix.Close(pidfd)
		return nil
	}
	p.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
	return nil
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
	if p.child {
		if p.pidfd != nil {
			awaitPidfd(p.pidfd)
		}
		p.reap()
		return p.status, p.reapErr
	}
	var r exitReport
	if _, err := recvJSON(p.channel, &r); err != nil {
		return 0, fmt.Errorf("waiting for the command: %w", err)
	}
	return syscall.WaitStatus(r.Status), nil
}

// reap waits for a command the spawner started, a child of the service,
// to exit, and reaps it; once.
func (p *Process) reap() {
	p.reapOnce.Do(func() {
		p.startOnce.Do(p.readStart)
		if p.startErr != nil || p.pid == 0 {
			return
		}
		ws, err := reapChild(p.pid)
		p.status = syscall.WaitStatus(ws)
		if err != nil {
			p.reapErr = fmt.Errorf("waiting for the command: %w", err)
		}
		if p.pidfd != nil {
			p.pidfd.Close()
		}
		p.env.forget(p)
	})
}

// CanStart reports whether the environment starts commands itself
// (Start): from its spawner or its init, as confined environments do.
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
	p := &Process{channel: channel, procs: -1}
	g := &Group{started: p}
	if perCommandCgroup {
		if cg, parent := e.commandCgroup(); cg != nil {
			if procs, err := cg.procsFD(); err == nil {
				g.cg, g.cgParent, g.late = cg, parent, true
				p.procs = procs
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
	if s := e.usableSpawner(); s != nil {
		err := e.spawn(s, p, req, fds)
		if err == nil {
			return p, g, nil
		}
		if !errors.Is(err, errSpawnerGone) {
			return fail(err)
		}
		// The init's starter serves this command, and the next ones.
		e.dropSpawner(s)
	}
	if p.procs >= 0 {
		req.Cgroup = true
		fds = append(fds, p.procs)
	}
	msg, err := encodeRequest(req)
	if err != nil {
		return fail(err)
	}
	if err := e.send(msg, fds); err != nil {
		return fail(err)
	}
	return p, g, nil
}

// encodeRequest encodes req, within maxStartRequest.
func encodeRequest(req startRequest) ([]byte, error) {
	msg, err := req.encode()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if len(msg) > maxStartRequest {
		return nil, fmt.Errorf("sandbox: the command line and environment take %d bytes, more than the %d a command may have", len(msg), maxStartRequest)
	}
	return msg, nil
}

// spawn asks the spawner s to start the command of p; fds are its channel
// and standard files. The command's cgroup is the service's to move it
// into (Process.adopt): the spawner runs as the sandbox user.
func (e *Env) spawn(s *spawner, p *Process, req startRequest, fds []int) error {
	msg, err := encodeRequest(req)
	if err != nil {
		return err
	}
	if err := giveStdio(fds[reqStdin:reqStderr+1], e.p.User.UID, e.p.User.GID); err != nil {
		return err
	}
	p.child, p.env, p.spawner = true, e, s
	e.spawnMu.Lock()
	if e.closing {
		e.spawnMu.Unlock()
		return errors.New("sandbox: the environment is closed")
	}
	if e.children == nil {
		e.children = map[*Process]struct{}{}
	}
	e.children[p] = struct{}{}
	e.spawnMu.Unlock()
	if err := s.send(msg, fds); err != nil {
		p.child = false
		e.forget(p)
		return err
	}
	return nil
}

// dropSpawner stops using s, which is gone.
func (e *Env) dropSpawner(s *spawner) {
	e.spawnMu.Lock()
	if e.spawner == s {
		e.spawner = nil
	}
	e.spawnMu.Unlock()
	s.close()
}

// forget drops a command the spawner started once it was reaped, or
// when it never started.
func (e *Env) forget(p *Process) {
	e.spawnMu.Lock()
	delete(e.children, p)
	e.spawnMu.Unlock()
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
	if err := sendRequest(e.ctl, msg, fds); err != nil {
		return fmt.Errorf("sandbox: the environment's starter is gone: %w", err)
	}
	return nil
}

// sendRequest sends one message with fds on a non-blocking control
// socket; the caller orders the senders.
func sendRequest(ctl *os.File, msg []byte, fds []int) error {
	rc, err := ctl.SyscallConn()
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
	return err
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
// process a pidfd refers to, or 0 when it has already exited. It asks the
// pidfd (PIDFD_GET_INFO, Linux 6.13), else reads its fdinfo, which costs
// some 30 µs of every command.
func pidfdPid(pidfd int) int {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_PID}
	if err := unix.IoctlPidfdInfo(pidfd, &info); err == nil && info.Mask&unix.PIDFD_INFO_PID != 0 && info.Tgid > 0 {
		return int(info.Tgid)
	}
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
