//go:build linux

package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/penguin-agent/penguin/internal/splice"
)

// initConfig is what "sandbox-exec init" is told by NewEnv.
type initConfig struct {
	mode        Mode
	network     Network
	workspace   string
	writable    []string
	hide        []string
	siblings    string // the directory of the workspace and its siblings, or ""
	tmpSize     int64
	cgroups     []string // cgroup.procs files to join
	parentNetNS string   // the service's network namespace, to prove this one differs
	readyFD     int
	usernsFD    int // the idmapping of the workspace, or -1
	proxyFD     int // an O_PATH descriptor of the egress proxy's socket, or -1
	// starterFD is the init's end of the starter's control socket, or -1
	// for an environment whose commands all start through the
	// trampoline; uid, gid and fileSize are what the starter's commands
	// run as and with.
	starterFD int
	uid, gid  uint32
	fileSize  int64
}

func parseInitFlags(args []string) (initConfig, error) {
	c := initConfig{readyFD: -1, usernsFD: -1, proxyFD: -1, starterFD: -1}
	fs := flag.NewFlagSet(SubcommandName+" init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", "", "none, workspace-write or read-only")
	network := fs.String("network", "", "none or proxy")
	fs.StringVar(&c.workspace, "workspace", "", "the workspace directory")
	fs.Var((*stringList)(&c.writable), "writable", "a further writable directory (repeatable)")
	fs.Var((*stringList)(&c.hide), "hide", "a path commands see empty (repeatable)")
	fs.StringVar(&c.siblings, "siblings", "", "a directory commands see empty but for the workspace and the writable paths")
	fs.Int64Var(&c.tmpSize, "tmp-size", 0, "the size of /tmp in bytes")
	fs.Var((*stringList)(&c.cgroups), "cgroup", "a cgroup.procs file to join (repeatable)")
	fs.StringVar(&c.parentNetNS, "parent-netns", "", "the network namespace this one must differ from")
	fs.IntVar(&c.readyFD, "ready-fd", -1, "where to report readiness")
	fs.IntVar(&c.usernsFD, "userns-fd", -1, "a user namespace whose mapping the workspace mount takes")
	fs.IntVar(&c.proxyFD, "proxy-fd", -1, "an O_PATH descriptor of the egress proxy's socket")
	fs.IntVar(&c.starterFD, "starter-fd", -1, "the control socket of the resident starter")
	uid := fs.Uint("uid", 0, "the user the starter's commands run as")
	gid := fs.Uint("gid", 0, "the group the starter's commands run as")
	fs.Int64Var(&c.fileSize, "fsize", -1, "RLIMIT_FSIZE of the starter's commands in bytes; negative means none")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.uid, c.gid = uint32(*uid), uint32(*gid)
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.mode, err = ParseMode(*mode); err != nil {
		return c, err
	}
	if c.network, err = ParseNetwork(*network); err != nil {
		return c, err
	}
	if c.readyFD < 0 {
		return c, errors.New("--ready-fd is required")
	}
	if c.starterFD >= 0 {
		if c.mode == None {
			return c, fmt.Errorf("--starter-fd needs a confined mode, not %s", c.mode)
		}
		if c.uid == 0 || c.gid == 0 {
			return c, errors.New("confined commands never run as root: --starter-fd needs --uid and --gid")
		}
	}
	return c, nil
}

// Readiness reports on the ready descriptor: "ok", or a kind and a
// message. "unsupported" says the host lacks a feature (NewEnv wraps
// ErrUnsupported), anything else is an error.
const (
	readyOK          = "ok"
	readyUnsupported = "unsupported: "
	readyError       = "error: "
)

// errFeature marks a setup failure that means the host lacks a feature.
type errFeature struct{ err error }

func (e errFeature) Error() string { return e.err.Error() }
func (e errFeature) Unwrap() error { return e.err }

// runInit is "sandbox-exec init": the first process of an environment's
// namespaces. It sets them up, reports on the ready descriptor, then
// stays as the namespaces' holder: the reaper of orphaned processes, and
// with NetworkProxy the forwarder from the namespace's loopback to the
// service's egress proxy. It never returns after a successful setup.
func runInit(args []string) error {
	c, err := parseInitFlags(args)
	if err != nil {
		return fmt.Errorf("%s init: %w", SubcommandName, err)
	}
	ready := os.NewFile(uintptr(c.readyFD), "ready")
	if err := closeInherited(); err != nil {
		return fmt.Errorf("%s init: %w", SubcommandName, err)
	}
	// Signals from inside the namespace must not end it; the service
	// ends it with SIGKILL.
	dropJobSignals()
	children := make(chan os.Signal, 1)
	signal.Notify(children, unix.SIGCHLD)

	var proxy []net.Listener
	var st *starter
	err = setUpInit(c)
	if err == nil && c.network == NetworkProxy {
		proxy, err = listenProxy()
	}
	if err == nil && c.starterFD >= 0 {
		// Limits per process are the init's own: every command it
		// starts inherits them (the init writes no files itself).
		if err = setLimits(c.fileSize); err == nil {
			st, err = startStarter(c)
		}
	}
	if err != nil {
		msg := readyError + err.Error()
		var fe errFeature
		if errors.As(err, &fe) {
			msg = readyUnsupported + err.Error()
		}
		_, _ = ready.WriteString(msg)
		ready.Close()
		return fmt.Errorf("%s init: %w", SubcommandName, err)
	}
	for _, l := range proxy {
		go forwardProxy(l, c.proxyFD)
	}
	_, _ = ready.WriteString(readyOK)
	ready.Close()
	for range children {
		reapAll(st)
	}
	return nil
}

// reapAll collects every child that has exited: processes orphaned in the
// environment are reparented to the init, and the commands the starter st
// (nil without one) started are its children; their exits are reported.
func reapAll(st *starter) {
	if st != nil {
		st.mu.Lock()
		defer st.mu.Unlock()
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if st != nil {
			st.reapedLocked(pid, ws)
		}
	}
}

// setUpInit prepares the namespaces: the cgroups, the loopback, and for a
// confined mode the mount namespace.
func setUpInit(c initConfig) error {
	runtime.LockOSThread()
	for _, f := range c.cgroups {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", filepath.Dir(f), err)
		}
	}
	if c.network != NetworkHost {
		mine, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			return fmt.Errorf("reading own network namespace: %w", err)
		}
		if mine == c.parentNetNS {
			return fmt.Errorf("refusing to start: a network namespace of its own was asked for, but this process shares the service's %s", mine)
		}
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if c.mode == None {
		return nil
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("refusing to start: this process is pid %d, not the first of a PID namespace of its own", os.Getpid())
	}
	if err := setUpMounts(c); err != nil {
		return err
	}
	// Nothing but the kernel may look into the init or trace it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}

// tree is a detached copy of a directory's mounts, to be attached at
// target once the view around it is ready.
type tree struct {
	fd     int
	target string
}

// setUpMounts makes the environment's view of the file system: every
// mount read-only and without set-user-ID, except the workspace
// (workspace-write), the writable paths and fresh, private /tmp, /var/tmp
// and /dev/shm; an empty /run (where the host's services keep their
// sockets); the hidden paths empty; the directory of the workspace's
// siblings empty but for the workspace; and a /proc of the environment's
// own PID namespace, read-only.
func setUpMounts(c initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	// The trees are cloned before anything covers their paths (a
	// workspace under /tmp, say) and attached last.
	var trees []tree
	defer func() {
		for _, t := range trees {
			unix.Close(t.fd)
		}
	}()
	ws, err := cloneTree(c.workspace, c.mode == ReadOnly, c.usernsFD)
	if err != nil {
		return err
	}
	trees = append(trees, tree{ws, c.workspace})
	for _, w := range c.writable {
		if _, err := os.Stat(w); err != nil {
			continue // a missing writable path only denies more
		}
		fd, err := cloneTree(w, false, -1)
		if err != nil {
			return err
		}
		trees = append(trees, tree{fd, w})
	}

	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return errFeature{fmt.Errorf("making every mount read-only (mount_setattr, Linux 5.12): %w", err)}
	}
	tmpOpts := "mode=1777,size=" + strconv.FormatInt(c.tmpSize, 10)
	const fresh = unix.MS_NOSUID | unix.MS_NODEV
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", fresh, tmpOpts); err != nil {
		return fmt.Errorf("mounting a private /tmp: %w", err)
	}
	if isDir("/var/tmp") {
		if err := unix.Mount("/tmp", "/var/tmp", "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mounting /var/tmp: %w", err)
		}
	}
	if isDir("/dev/shm") {
		if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", fresh, tmpOpts); err != nil {
			return fmt.Errorf("mounting a private /dev/shm: %w", err)
		}
	}
	for _, dir := range []string{"/run", "/var/run"} {
		if isDir(dir) && !isLink(dir) {
			if err := unix.Mount("tmpfs", dir, "tmpfs", fresh|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
				return fmt.Errorf("emptying %s: %w", dir, err)
			}
		}
	}
	for _, h := range c.hide {
		if err := hide(h); err != nil {
			return err
		}
	}
	// The siblings' directory is covered by a tmpfs that takes the mount
	// points of the trees below and is made read-only once they are
	// attached. Under a fresh /tmp it is gone already.
	coverSiblings := c.siblings != "" && isDir(c.siblings)
	const cover = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if coverSiblings {
		if err := unix.Mount("tmpfs", c.siblings, "tmpfs", cover, "mode=755,size=64k"); err != nil {
			return fmt.Errorf("hiding the other workspaces in %s: %w", c.siblings, err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mounting the environment's /proc: %w", err)
	}
	for _, t := range trees {
		// A target under a fresh tmpfs (a workspace under /tmp) needs
		// its mount point made there.
		if !isDir(t.target) {
			if err := os.MkdirAll(t.target, 0o755); err != nil {
				return fmt.Errorf("making the mount point %s: %w", t.target, err)
			}
		}
		if err := unix.MoveMount(t.fd, "", unix.AT_FDCWD, t.target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mounting %s: %w", t.target, err)
		}
	}
	if coverSiblings {
		if err := unix.Mount("", c.siblings, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|cover, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", c.siblings, err)
		}
	}
	return unix.Chdir("/")
}

// cloneTree makes a detached copy of the mounts at path: read-only when
// asked, and seen through the user namespace usernsFD's mapping when it
// is given (an idmapped mount: the sandbox user sees the workspace
// owner's files as its own, and what it creates belongs to that owner on
// disk).
func cloneTree(path string, readOnly bool, usernsFD int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, errFeature{fmt.Errorf("copying the mount of %s (open_tree, Linux 5.2): %w", path, err)}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	} else {
		attr.Attr_clr = unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("setting the mount attributes of %s: %w", path, err)
	}
	if usernsFD >= 0 {
		idmap := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(usernsFD)}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &idmap); err != nil {
			unix.Close(fd)
			return -1, errFeature{fmt.Errorf("the file system of %s cannot be mounted idmapped, which lets the sandbox user write the workspace while its files keep their owner (Linux 5.12; ext4, xfs, btrfs, tmpfs and overlayfs can): %w; give the workspace to the sandbox user (chown) instead", path, err)}
		}
	}
	return fd, nil
}

// hide makes path look empty: a file becomes /dev/null, a directory an
// empty read-only one. A path that does not exist is left alone.
func hide(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		return nil
	}
	if info.IsDir() {
		err = unix.Mount("tmpfs", path, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=755")
	} else {
		err = unix.Mount("/dev/null", path, "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("hiding %s: %w", path, err)
	}
	return nil
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

func isLink(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Mode()&os.ModeSymlink != 0
}

// listenProxy listens on the namespace's loopback at ProxyPort, on IPv4
// and, where the loopback has it, IPv6.
func listenProxy() ([]net.Listener, error) {
	v4, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(ProxyPort)))
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	out := []net.Listener{v4}
	if v6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(ProxyPort))); err == nil {
		out = append(out, v6)
	}
	return out, nil
}

// maxProxyConns bounds the connections forwarded at once per listener; a
// command opening more waits for one to end.
const maxProxyConns = 256

// forwardProxy copies each connection on l to a new connection to the
// egress proxy's socket, reached through its O_PATH descriptor (its path
// lies where the environment's view of the file system does not reach).
func forwardProxy(l net.Listener, proxyFD int) {
	target := "/proc/self/fd/" + strconv.Itoa(proxyFD)
	slots := make(chan struct{}, maxProxyConns)
	for {
		slots <- struct{}{}
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			up, err := net.Dial("unix", target)
			if err != nil {
				return
			}
			defer up.Close()
			splice.Conns(c, c, up)
		}()
	}
}

// dropJobSignals catches the signals of a terminal and of a job's end and
// drops them, so that this process (an environment's init or spawner)
// outlives them. They are caught rather than ignored: an ignored signal
// stays ignored in the commands the process starts, also when it was
// ignored when the service started (under nohup, say), and a Ctrl-C or a
// hang-up would then never reach them; a caught one is reset to its
// default in every child.
func dropJobSignals() {
	dropped := make(chan os.Signal, 8)
	signal.Notify(dropped, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGPIPE, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	go func() {
		for range dropped {
		}
	}()
}
