//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// runSpawner is "sandbox-exec spawn", an environment's spawner (see
// spawner.go): started by the trampoline with --detach, so that it is a
// child of the service inside every layer of the environment, as the
// sandbox user and with the environment's limits. Its standard input is
// the control socket; its standard output is the penguin binary it was
// started from, which it closes.
//
// It first sends a pidfd of itself (the service reaps it, and checks that
// it is its child), then serves start requests, in the starter's wire
// form, until the service closes the socket. Each command is forked with
// CLONE_PARENT: the service's child, which the service waits for itself.
func runSpawner() error {
	// Not dumpable: commands run as the same user, and must not read or
	// write its memory or descriptors through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("%s spawn: %w", SubcommandName, err)
	}
	dropJobSignals()
	unix.Close(1)
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("%s spawn: pidfd_open: %w", SubcommandName, err)
	}
	reply(0, startReply{}, self)
	unix.Close(self)
	buf := make([]byte, maxStartRequest)
	oob := make([]byte, unix.CmsgSpace(maxReqFDs*4))
	for {
		n, oobn, flags, _, err := unix.Recvmsg(0, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 && oobn == 0 {
			os.Exit(0) // the service closed the environment
		}
		fds := receivedFDs(oob[:oobn])
		if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || len(fds) != reqStderr+1 {
			closeAll(fds)
			continue // malformed: the service's side times out and says so
		}
		spawn(buf[:n], fds)
	}
}

// spawn starts one command as a child of the service and answers on its
// channel with its pidfd, or with why it could not start; it takes
// ownership of fds.
func spawn(msg []byte, fds []int) {
	channel := fds[reqChannel]
	defer closeAll(fds)
	req, err := decodeStartRequest(msg)
	if err != nil {
		reply(channel, startReply{Error: fmt.Sprintf("malformed start request: %v", err)}, -1)
		return
	}
	// What would fail in the forked child is refused before the fork:
	// the runtime closes the pidfd of a child that failed, so the
	// service would not learn which of its children to reap. (It reaps
	// those of other failures when the environment closes:
	// Env.reapStrays.)
	err = unix.Access(req.Path, unix.X_OK)
	if err == nil && req.Dir != "" {
		err = unix.Access(req.Dir, unix.X_OK)
	}
	if err != nil {
		reply(channel, startReply{Error: startError(req, err).Error()}, -1)
		return
	}
	pidfd := -1
	attr := startAttr(req, fds[reqStdin:reqStderr+1], &syscall.SysProcAttr{Cloneflags: unix.CLONE_PARENT, PidFD: &pidfd})
	pid, err := syscall.ForkExec(req.Path, req.Args, attr)
	if err != nil {
		reply(channel, startReply{Error: startError(req, err).Error()}, -1)
	} else {
		reply(channel, startReply{Pid: pid}, pidfd)
	}
	if pidfd >= 0 {
		unix.Close(pidfd)
	}
}
