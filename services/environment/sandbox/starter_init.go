//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The resident starter: the part of a confined environment's init that
// starts commands (Env.Start). A command started through the trampoline
// ("sandbox-exec run") pays for a Go program's start and for setting up
// the sandbox (namespaces, Landlock, the filter) every time, several times
// what running the command itself costs. The init is already in the
// environment's namespaces, so one of its threads is confined once, as the
// trampoline confines itself: capability bounding set emptied,
// no_new_privs, Landlock and the system call filter. Every command is then
// forked from that thread and inherits all of it; the fork changes to the
// sandbox user in the child, before the command runs, as the trampoline's
// does.
//
// The protocol, over a SOCK_SEQPACKET pair the service keeps one end of:
// each request is one message, a startRequest (in the wire form of
// starter_wire.go), carrying the command's channel (one end of a new
// socket pair), its standard input,
// output and error and, optionally, a writable descriptor of its cgroup's
// cgroup.procs. The init answers on the command's channel with a
// startReply (and a pidfd of the command) and, once the command has
// exited and been reaped, with an exitReport; then it closes the channel.

// startRequest is what the service asks the init to start.
type startRequest struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Ctty makes the command's standard input its controlling terminal.
	Ctty bool
	// Cgroup says that the last descriptor is the cgroup.procs of the
	// command's own cgroup.
	Cgroup bool
}

// startReply says whether the command started, and as which pid in the
// environment's PID namespace.
type startReply struct {
	Pid   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// exitReport is the command's wait status, sent once it was reaped.
type exitReport struct {
	Status uint32 `json:"status"`
}

// maxStartRequest bounds one request: the command line and environment
// together. It is also the size of the control socket's buffers.
const maxStartRequest = 1 << 20

// Descriptors of a request, in order.
const (
	reqChannel = iota
	reqStdin
	reqStdout
	reqStderr
	reqCgroup // only when startRequest.Cgroup
	maxReqFDs
)

// starter is the init's side: it starts what the service asks and reports
// each command's exit on its channel.
type starter struct {
	ctl      int // the init's end of the control socket
	uid, gid uint32

	// mu is held while a command is forked and registered, and while
	// children are reaped, so that no exit is reaped before its channel
	// is known.
	mu      sync.Mutex
	running map[int]int // pid in the namespace → the command's channel
}

// startStarter confines a thread of its own for the starter and serves
// the control socket on it; it returns once the thread is confined, or
// failed to be (then the environment must not be reported ready). The
// thread is never unlocked: it ends with the init, and the Go runtime
// starts no other thread from it.
func startStarter(c initConfig) (*starter, error) {
	s := &starter{ctl: c.starterFD, uid: c.uid, gid: c.gid, running: map[int]int{}}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := confineThread(c.mode, c.workspace, c.writable)
		ready <- err
		if err == nil {
			s.serve()
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("confining the starter: %w", err)
	}
	return s, nil
}

// confineThread applies to the calling thread what every confined command
// gets beyond the init's namespaces and limits: an empty capability
// bounding set, no_new_privs with Landlock, and the system call filter.
// "sandbox-exec run" and the starter share it, so both confine alike.
func confineThread(mode Mode, workspace string, writable []string) error {
	if err := dropBoundingSet(); err != nil {
		return err
	}
	if err := restrictWrites(mode, workspace, writable); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := loadCommandFilter(); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// serve reads requests until the service closes the control socket.
func (s *starter) serve() {
	buf := make([]byte, maxStartRequest)
	oob := make([]byte, unix.CmsgSpace(maxReqFDs*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(s.ctl, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 && oobn == 0 {
			return // the service closed the environment
		}
		fds := receivedFDs(oob[:oobn])
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || len(fds) <= reqStderr {
			closeAll(fds)
			continue // malformed: the service's side times out and says so
		}
		s.start(buf[:n], fds)
	}
}

// start starts one command and answers on its channel; it takes
// ownership of fds.
func (s *starter) start(msg []byte, fds []int) {
	channel := fds[reqChannel]
	defer closeAll(fds[reqChannel+1:])
	fail := func(err error) {
		reply(channel, startReply{Error: err.Error()}, -1)
		unix.Close(channel)
	}
	req, err := decodeStartRequest(msg)
	if err != nil {
		fail(fmt.Errorf("malformed start request: %w", err))
		return
	}
	cgroupProcs := -1
	if req.Cgroup {
		if len(fds) <= reqCgroup {
			fail(errors.New("the start request names a cgroup but carries none"))
			return
		}
		cgroupProcs = fds[reqCgroup]
	}
	stdio := fds[reqStdin : reqStderr+1]
	if err := giveStdio(stdio, s.uid, s.gid); err != nil {
		fail(err)
		return
	}
	pidfd := -1
	attr := startAttr(req, stdio, &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: s.uid, Gid: s.gid, Groups: []uint32{}},
		PidFD:      &pidfd,
	})
	s.mu.Lock()
	pid, err := syscall.ForkExec(req.Path, req.Args, attr)
	if err != nil {
		s.mu.Unlock()
		fail(startError(req, err))
		return
	}
	// The command is moved into its own cgroup right after it started
	// (the filter on this thread refuses clone3, which could have cloned
	// it there); see Env.Start for what that leaves open.
	if cgroupProcs >= 0 {
		_, _ = unix.Write(cgroupProcs, []byte(strconv.Itoa(pid)))
	}
	// The reply goes out before the lock is let go, so that the exit
	// report, sent by the reaper under the same lock, always follows it.
	s.running[pid] = channel
	reply(channel, startReply{Pid: pid}, pidfd)
	s.mu.Unlock()
	if pidfd >= 0 {
		go s.awaitExit(pid, pidfd)
	}
}

// awaitExit reaps the command pid once its pidfd says it has exited.
// SIGCHLD would tell too, but through the runtime's signal handling: a
// few goroutine and thread wake-ups more between the command's exit and
// its report, which every command would wait for. (The SIGCHLD loop
// still reaps orphans, and whichever comes first reports the exit.)
func (s *starter) awaitExit(pid, pidfd int) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	awaitPidfd(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[pid]; !ok {
		return // reaped by the SIGCHLD loop
	}
	var ws unix.WaitStatus
	if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
		s.reapedLocked(pid, ws)
	}
}

// reapedLocked reports the exit of a command the starter started, if pid is
// one; the caller holds s.mu.
func (s *starter) reapedLocked(pid int, ws unix.WaitStatus) {
	channel, ok := s.running[pid]
	if !ok {
		return // an orphan of the environment
	}
	delete(s.running, pid)
	reply(channel, exitReport{Status: uint32(ws)}, -1)
	unix.Close(channel)
}

// startAttr is the process attributes of the command req asks for: its
// directory, environment and standard files (stdio), a session of its
// own, and its terminal when asked; sys carries what the starting process
// adds. No parent-death signal: Go's check that the parent still lives
// compares pids across the namespace boundary. A command ends with the
// environment's init, whose end takes the namespace down.
func startAttr(req startRequest, stdio []int, sys *syscall.SysProcAttr) *syscall.ProcAttr {
	sys.Setsid, sys.Setctty, sys.Ctty = true, req.Ctty, 0
	return &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{uintptr(stdio[0]), uintptr(stdio[1]), uintptr(stdio[2])},
		Sys:   sys,
	}
}

// startError says why the command req asks for could not start.
func startError(req startRequest, err error) error {
	if req.Dir != "" {
		err = fmt.Errorf("in %s: %w", req.Dir, err)
	}
	return fmt.Errorf("starting %s: %w", req.Path, err)
}

// reply sends v, and fd when it is not -1, on a command's channel. A
// channel the service already closed (it gave up on the command) is
// ignored.
func reply(channel int, v any, fd int) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_ = unix.Sendmsg(channel, b, oob, nil, unix.MSG_NOSIGNAL)
}

// receivedFDs returns the descriptors passed in a control message.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
