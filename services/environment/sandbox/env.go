//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initTimeout bounds the set-up of an environment's namespaces.
const initTimeout = 15 * time.Second

// Env is the sandbox of one environment: the namespaces its commands share
// (held by an init process, so that a server one command starts in the
// background is reachable by the next), the cgroups that hold its limits,
// and the way each command is put into them. A policy that isolates
// nothing (mode None on the host's network) needs neither; its Env only
// launches commands.
//
// Create it with NewEnv when the environment is created, launch each
// command with Apply (or Confine), and Close it when the environment is
// disposed: that ends every process of the environment.
type Env struct {
	p    Policy
	self string

	init  *exec.Cmd
	pidfd *os.File // the init's, passed to every command to join its namespaces
	ended chan struct{}
	cg    *envCgroups
	// cgDir is the environment's cgroup v2 directory, opened: processes
	// are cloned into it (or into a cgroup beneath it).
	cgDir *os.File
	// prefix is the sandbox-exec command line that precedes each
	// command's own.
	prefix []string
	// ctl is the service's end of the control socket of the init's
	// resident starter (confined modes), nil otherwise; ctlMu orders the
	// requests sent on it and its closing.
	ctl    *os.File
	ctlMu  sync.Mutex
	starts bool // ctl was set up; it never changes after NewEnv

	// spawnMu guards spawner, the environment's spawner once it is
	// ready (see spawner.go), closing, and children: the commands the
	// spawner started (the service's children) not reaped yet.
	// spawning is made when the first command asks for the spawner, and
	// closed once its start is over, ready or not.
	spawnMu  sync.Mutex
	spawner  *spawner
	closing  bool
	children map[*Process]struct{}
	spawning chan struct{}
	// pidNS names the environment's PID namespace (a /proc/PID/ns/pid
	// link), to tell its processes among this process's children.
	pidNS string

	closeOnce sync.Once
	closeErr  error
}

// NewEnv starts the sandbox of one environment under p; self is the
// penguin binary ("/proc/self/exe"). It fails, with an error wrapping
// ErrUnsupported, when the host cannot enforce p.
func NewEnv(p Policy, self string) (*Env, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	e := &Env{p: p, self: self}
	if !p.isolated() {
		return e, nil
	}
	if self == "" {
		return nil, errors.New("sandbox: the path of the penguin binary is needed to isolate commands")
	}
	if err := e.start(); err != nil {
		_ = e.Close()
		return nil, err
	}
	return e, nil
}

// Policy returns the policy the environment runs under, defaults filled
// in.
func (e *Env) Policy() Policy { return e.p }

// start creates the cgroups and the init process, and builds the prefix.
func (e *Env) start() error {
	p := e.p
	var err error
	if p.confined() {
		if err := requireRoot(); err != nil {
			return err
		}
		if e.cg, err = newEnvCgroups(p.Limits); err != nil {
			return err
		}
		if e.cg.v2 != "" {
			if e.cgDir, err = os.Open(e.cg.v2); err != nil {
				return fmt.Errorf("opening cgroup %s: %w", e.cg.v2, err)
			}
		}
	}
	if err := e.startInit(); err != nil {
		return err
	}
	e.prefix = []string{e.self, SubcommandName, roleRun, "--join-fd", "3", "--mode", p.Mode.String()}
	if p.confined() {
		e.prefix = append(e.prefix, "--workspace", p.Workspace,
			"--uid", strconv.FormatUint(uint64(p.User.UID), 10), "--gid", strconv.FormatUint(uint64(p.User.GID), 10),
			"--fsize", strconv.FormatInt(p.Limits.FileSize, 10))
		for _, w := range p.WritablePaths {
			e.prefix = append(e.prefix, "--writable", w)
		}
		for _, f := range e.cg.procsFiles() {
			e.prefix = append(e.prefix, "--cgroup", f)
		}
	}
	return nil
}

// requireRoot fails unless this process may create and enter namespaces
// and change user: confined modes need the service to run as root.
func requireRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: confined sandbox modes need the service to run as root (to create namespaces and run commands as another user); it runs as uid %d", ErrUnsupported, os.Geteuid())
	}
	return nil
}

// startInit starts the init process in new namespaces and waits for it to
// report that they are ready.
func (e *Env) startInit() error {
	p := e.p
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer readyR.Close()
	parentNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		readyW.Close()
		return fmt.Errorf("reading the network namespace: %w", err)
	}
	args := []string{e.self, SubcommandName, roleInit, "--mode", p.Mode.String(), "--network", p.Network.String(),
		"--parent-netns", parentNS, "--ready-fd", "3"}
	files := []*os.File{readyW}
	flags := uintptr(syscall.CLONE_NEWNET)
	if p.confined() {
		flags |= syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		args = append(args, "--workspace", p.Workspace, "--tmp-size", strconv.FormatInt(tmpSize(p.Limits), 10))
		for _, w := range p.WritablePaths {
			args = append(args, "--writable", w)
		}
		for _, h := range p.HidePaths {
			args = append(args, "--hide", h)
		}
		if p.hidesSiblings() {
			args = append(args, "--siblings", p.Siblings)
		}
		for _, f := range e.cg.procsFiles() {
			args = append(args, "--cgroup", f)
		}
		ctl, theirs, err := socketPair()
		if err != nil {
			readyW.Close()
			return err
		}
		// A request holds a whole command line and environment: a
		// larger send buffer than the default lets it (a service
		// without CAP_NET_ADMIN keeps the default, and refuses larger
		// requests clearly).
		_ = unix.SetsockoptInt(int(ctl.Fd()), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2*maxStartRequest)
		_ = unix.SetNonblock(int(ctl.Fd()), true)
		e.ctl, e.starts = ctl, true
		defer theirs.Close()
		args = append(args, "--starter-fd", strconv.Itoa(3+len(files)),
			"--uid", strconv.FormatUint(uint64(p.User.UID), 10), "--gid", strconv.FormatUint(uint64(p.User.GID), 10),
			"--fsize", strconv.FormatInt(p.Limits.FileSize, 10))
		files = append(files, theirs)
		if p.Mode == WorkspaceWrite {
			userns, err := idmapFor(p.Workspace, p.User, e.self)
			if err != nil {
				readyW.Close()
				return err
			}
			if userns != nil {
				args = append(args, "--userns-fd", strconv.Itoa(3+len(files)))
				files = append(files, userns)
			}
		}
	}
	if p.Network == NetworkProxy {
		fd, err := unix.Open(p.ProxySocket, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			readyW.Close()
			return fmt.Errorf("opening the egress proxy's socket: %w", err)
		}
		proxy := os.NewFile(uintptr(fd), p.ProxySocket)
		defer proxy.Close()
		args = append(args, "--proxy-fd", strconv.Itoa(3+len(files)))
		files = append(files, proxy)
	}
	cmd := &exec.Cmd{Path: e.self, Args: args, Env: []string{}, ExtraFiles: files}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setsid: true, Pdeathsig: syscall.SIGKILL}
	if e.cgDir != nil {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(e.cgDir.Fd())
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w: creating the environment's namespaces: %v", ErrUnsupported, err)
		}
		return fmt.Errorf("starting the environment's init: %w", err)
	}
	e.init, e.ended = cmd, make(chan struct{})
	go func() {
		AwaitExit(cmd.Process.Pid)
		_ = cmd.Wait()
		close(e.ended)
	}()
	report, err := readReady(readyR)
	if err != nil {
		return err
	}
	switch {
	case report == readyOK:
	case strings.HasPrefix(report, readyUnsupported):
		return fmt.Errorf("%w: %s", ErrUnsupported, strings.TrimPrefix(report, readyUnsupported))
	case report == "":
		return errors.New("the environment's init ended before it was ready")
	default:
		return fmt.Errorf("setting up the environment's namespaces: %s", strings.TrimPrefix(report, readyError))
	}
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open of the environment's init: %w", err)
	}
	e.pidNS, _ = os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/pid")
	e.pidfd = os.NewFile(uintptr(fd), "init")
	return nil
}

// AwaitExit returns once the child pid has exited, leaving it for Wait to
// reap. It waits on a pidfd through the runtime's poller: every live
// environment waits on its init, and every running command is waited on,
// and a goroutine blocked in Wait holds an OS thread, so 10,000 idle
// environments would hold 10,000 threads, past the runtime's limit. The
// poller also hears of a command's exit on the same wake-up as of its
// output's end, where a blocked Wait is one more thread to wake. Where a
// pidfd cannot be polled it returns at once, and the caller's Wait blocks
// as before.
func AwaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	awaitPidfd(f)
}

// awaitPidfd returns once the child that the non-blocking pidfd f refers
// to has exited, leaving it to be reaped, or at once when f cannot be
// polled.
func awaitPidfd(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Done when it has exited, or when asking fails (the reaping
		// then says why); not yet when waitid found nothing to report.
		return err != nil || info.Signo != 0
	})
}

// readReady reads the init's report until it closes the pipe, within
// initTimeout.
func readReady(r *os.File) (string, error) {
	_ = r.SetReadDeadline(time.Now().Add(initTimeout))
	b, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return "", fmt.Errorf("waiting for the environment's init: %w", err)
	}
	return string(b), nil
}

// tmpSize is the size of the environment's /tmp: Tmp, and no more than
// the memory limit its pages count against.
func tmpSize(l Limits) int64 {
	l = l.withDefaults()
	if l.Memory > 0 && l.Memory < l.Tmp {
		return l.Memory
	}
	return l.Tmp
}

// Apply prepares cmd (not yet started) to run in the environment and
// returns the Group that tracks everything it will start; see the package
// doc for what the command gets. Do not replace cmd.SysProcAttr
// afterwards.
func (e *Env) Apply(cmd *exec.Cmd) (*Group, error) {
	parent, err := CgroupParent()
	if err != nil {
		parent = ""
	}
	if e.cg != nil && e.cg.v2 != "" {
		parent = e.cg.v2
	}
	return e.apply(cmd, parent)
}

// Confine is Apply without a per-command cgroup: the caller tracks the
// command by its process group and session (KillGroup & co.), which misses
// a double-forked daemon until the environment is closed.
func (e *Env) Confine(cmd *exec.Cmd) error {
	_, err := e.apply(cmd, "")
	return err
}

// Events counts how often the environment's commands ran into its limits.
func (e *Env) Events() LimitEvents {
	if e.cg == nil {
		return LimitEvents{}
	}
	return e.cg.events()
}

// LimitsSince says, for the tool output, which limits the environment's
// commands ran into since the counters were before, or "".
func (e *Env) LimitsSince(before LimitEvents) string {
	return e.Events().Describe(before, e.p.Limits)
}

// apply is Apply with the per-command cgroup parent chosen; "" tracks the
// command by process group and session only. flags go to the trampoline.
func (e *Env) apply(cmd *exec.Cmd, cgroupParent string, flags ...string) (*Group, error) {
	if cmd.Process != nil {
		return nil, errors.New("sandbox: command already started")
	}
	if cmd.Err != nil {
		return nil, cmd.Err
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

	if e.p.isolated() {
		select {
		case <-e.ended:
			return nil, errors.New("sandbox: the environment's namespaces are gone (its init ended)")
		default:
		}
		if e.pidfd == nil {
			return nil, errors.New("sandbox: the environment is closed")
		}
		args := append(append([]string(nil), e.prefix...), flags...)
		if e.p.confined() && attr.Setctty {
			// The command, started by the trampoline in a session of
			// its own, takes the terminal; the trampoline must not.
			attr.Setctty = false
			args = append(args, "--ctty")
		}
		if len(cmd.Args) > 0 && cmd.Args[0] != cmd.Path {
			args = append(args, "--argv0", cmd.Args[0])
		}
		args = append(args, "--", cmd.Path)
		if len(cmd.Args) > 1 {
			args = append(args, cmd.Args[1:]...)
		}
		cmd.Path, cmd.Args = e.self, args
		cmd.ExtraFiles = append([]*os.File{e.pidfd}, cmd.ExtraFiles...)
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
	} else if e.cgDir != nil {
		// The limits hold only inside the environment's cgroup.
		attr.UseCgroupFD, attr.CgroupFD = true, int(e.cgDir.Fd())
	}
	cmd.SysProcAttr = attr
	return g, nil
}

// Close ends every process of the environment (the init's end takes its
// PID namespace down with it) and removes its cgroups. It is idempotent.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		e.spawnMu.Lock()
		e.closing = true
		spawning := e.spawning
		e.spawnMu.Unlock()
		if spawning != nil {
			<-spawning // a spawner being started would outlive the init
		}
		e.spawnMu.Lock()
		s, children := e.spawner, e.children
		e.spawner, e.children = nil, nil
		e.spawnMu.Unlock()
		if e.init != nil {
			_ = e.init.Process.Kill()
			// The spawner and its commands are this process's children:
			// the namespace's end kills them, and the init cannot end
			// before they are reaped.
			if s != nil {
				s.close()
			}
			for p := range children {
				go p.reap()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := e.awaitEnd(ctx, s != nil); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		if e.pidfd != nil {
			errs = append(errs, e.pidfd.Close())
			e.pidfd = nil
		}
		e.ctlMu.Lock()
		if e.ctl != nil {
			errs = append(errs, e.ctl.Close())
			e.ctl = nil
		}
		e.ctlMu.Unlock()
		if s != nil {
			<-s.reaped
		}
		if e.cgDir != nil {
			errs = append(errs, e.cgDir.Close())
		}
		if e.cg != nil {
			errs = append(errs, e.cg.remove())
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// idmaps are the user namespaces that idmapped workspace mounts use, one
// per (workspace owner, sandbox user) pair, kept open for the life of the
// process: creating one costs a process start.
var idmaps = struct {
	sync.Mutex
	byKey map[string]*os.File
}{byKey: map[string]*os.File{}}

// idmapFor returns a user namespace that maps the owner of workspace to
// the sandbox user, or nil when the sandbox user owns it already.
func idmapFor(workspace string, user Identity, self string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(workspace, &st); err != nil {
		return nil, fmt.Errorf("sandbox workspace %s: %w", workspace, err)
	}
	if st.Uid == user.UID && st.Gid == user.GID {
		return nil, nil
	}
	key := fmt.Sprintf("%d:%d>%s", st.Uid, st.Gid, user)
	idmaps.Lock()
	defer idmaps.Unlock()
	if f, ok := idmaps.byKey[key]; ok {
		return f, nil
	}
	f, err := newUserNS(st.Uid, st.Gid, user, self)
	if err != nil {
		return nil, err
	}
	idmaps.byKey[key] = f
	return f, nil
}

// newUserNS creates a user namespace in which uid (gid) is the sandbox
// user's host uid (gid): mounted with it, files that uid owns on disk
// appear as the sandbox user's, and files the sandbox user creates belong
// to uid on disk. A process must exist in a namespace for it to be
// opened, so a "sandbox-exec hold" is started in it and ended once it
// was.
func newUserNS(uid, gid uint32, user Identity, self string) (*os.File, error) {
	cmd := exec.Command(self, SubcommandName, roleHold)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: int(user.UID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: int(user.GID), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: creating a user namespace for the workspace's idmapped mount: %v", ErrUnsupported, err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	stdin.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("opening the user namespace: %w", err)
	}
	return f, nil
}

// awaitEnd waits for the init to end, reaping meanwhile, when the
// environment had a spawner, its strays (see reapStrays).
func (e *Env) awaitEnd(ctx context.Context, strays bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-e.ended:
			return nil
		case <-ctx.Done():
			return errors.New("the environment's init did not end after SIGKILL")
		case <-tick.C:
			if strays {
				e.reapStrays()
			}
		}
	}
}

// reapStrays reaps the zombies among this process's children that lived
// in the environment's PID namespace (the init aside): commands the
// spawner forked that then failed to run their program, which the
// spawner cannot name (see spawn). The namespace's end waits for every
// one of its processes to be reaped.
func (e *Env) reapStrays() {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil || e.pidNS == "" {
		return
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid == e.init.Process.Pid {
				continue
			}
			if ns, err := os.Readlink("/proc/" + f + "/ns/pid"); err != nil || ns != e.pidNS {
				continue
			}
			_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
		}
	}
}
