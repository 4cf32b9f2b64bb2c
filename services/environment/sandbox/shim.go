//go:build linux

package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// runConfig is what "sandbox-exec run" is told by Env.Apply.
type runConfig struct {
	mode      Mode
	workspace string
	writable  []string
	joinFD    int // a pidfd of the environment's init
	uid, gid  uint32
	fileSize  int64
	cgroups   []string // cgroup.procs files to join
	ctty      bool
	detach    bool
	argv0     string
	path      string
	args      []string
}

func parseRunFlags(args []string) (runConfig, error) {
	c := runConfig{joinFD: -1}
	fs := flag.NewFlagSet(SubcommandName+" run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", "", "none, workspace-write or read-only")
	fs.StringVar(&c.workspace, "workspace", "", "the workspace directory")
	fs.Var((*stringList)(&c.writable), "writable", "a further writable directory (repeatable)")
	fs.IntVar(&c.joinFD, "join-fd", -1, "a pidfd of the environment's init, whose namespaces the command joins")
	uid := fs.Uint("uid", 0, "the user the command runs as")
	gid := fs.Uint("gid", 0, "the group the command runs as")
	fs.Int64Var(&c.fileSize, "fsize", -1, "RLIMIT_FSIZE in bytes; negative means none")
	fs.Var((*stringList)(&c.cgroups), "cgroup", "a cgroup.procs file to join (repeatable)")
	fs.BoolVar(&c.ctty, "ctty", false, "make the command's standard input its controlling terminal")
	fs.BoolVar(&c.detach, "detach", false, "start the command as a child of this process's parent, and exit (the spawner)")
	fs.StringVar(&c.argv0, "argv0", "", "argv[0] for the command, when it is not PATH")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.mode, err = ParseMode(*mode); err != nil {
		return c, err
	}
	c.uid, c.gid = uint32(*uid), uint32(*gid)
	rest := fs.Args()
	if len(rest) == 0 {
		return c, errors.New("no command given after --")
	}
	if c.joinFD < 0 {
		return c, errors.New("--join-fd is required")
	}
	if c.mode != None {
		if c.workspace == "" || !filepath.IsAbs(c.workspace) {
			return c, fmt.Errorf("sandbox mode %s needs an absolute --workspace", c.mode)
		}
		if c.uid == 0 || c.gid == 0 {
			return c, errors.New("confined commands never run as root: --uid and --gid are required")
		}
	}
	c.path, c.args = rest[0], rest
	if c.argv0 != "" {
		c.args = append([]string{c.argv0}, rest[1:]...)
	}
	return c, nil
}

// runCommand is "sandbox-exec run": it joins the environment's cgroups
// and namespaces and, for a confined mode, starts the command as the
// sandbox user without capabilities, under Landlock and the system call
// filter, then relays signals to it and exits as it did. Without a
// confined mode (mode none with a network namespace) it joins the network
// namespace and becomes the command.
//
// The command is started, not executed in place, because a process cannot
// move itself into another PID namespace: joining one sets the namespace
// of the children it starts from then on.
func runCommand(args []string) error {
	c, err := parseRunFlags(args)
	if err != nil {
		return fmt.Errorf("%s run: %w", SubcommandName, err)
	}
	if err := closeInherited(); err != nil {
		return fmt.Errorf("%s run: %w", SubcommandName, err)
	}
	if !strings.Contains(c.path, "/") {
		if c.path, err = exec.LookPath(c.path); err != nil {
			return fmt.Errorf("%s run: %w", SubcommandName, err)
		}
	}
	// Namespaces, Landlock, the filter and the capability bounding set
	// belong to the calling thread: everything below happens on one
	// thread, which is never given back (the Go runtime starts its other
	// threads from a clean one).
	runtime.LockOSThread()
	cmd, err := prepareCommand(c)
	if err != nil {
		return fmt.Errorf("%s run: %w", SubcommandName, err)
	}
	if cmd == nil {
		err = syscall.Exec(c.path, c.args, os.Environ())
		return fmt.Errorf("%s run: executing %s: %w", SubcommandName, c.path, err)
	}
	if c.detach {
		// The spawner (spawner.go): the service's child, not this
		// trampoline's, which ends here.
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_PARENT
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s run: starting %s: %w", SubcommandName, c.path, err)
		}
		os.Exit(0)
	}
	forward := make(chan os.Signal, 8)
	signal.Notify(forward, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGCONT, unix.SIGWINCH)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s run: starting %s: %w", SubcommandName, c.path, err)
	}
	go func() {
		// The command leads a process group of its own; what the
		// service sends to this process is meant for all of it.
		for sig := range forward {
			_ = unix.Kill(-cmd.Process.Pid, sig.(syscall.Signal))
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ee.ExitCode())
	}
	return fmt.Errorf("%s run: waiting for %s: %w", SubcommandName, c.path, err)
}

// prepareCommand joins the environment and returns the command to start,
// or nil when this process is to become the command itself.
func prepareCommand(c runConfig) (*exec.Cmd, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	// Cgroup files lie outside the environment's view: join first.
	for _, f := range c.cgroups {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return nil, fmt.Errorf("joining cgroup %s: %w", filepath.Dir(f), err)
		}
	}
	if c.mode == None {
		err := unix.Setns(c.joinFD, unix.CLONE_NEWNET)
		unix.Close(c.joinFD)
		if err != nil {
			return nil, fmt.Errorf("joining the environment's network namespace: %w", err)
		}
		return nil, nil
	}
	// A thread shares its root and working directory with the others
	// until it unshares them; only then may it enter a mount namespace.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return nil, fmt.Errorf("unshare(CLONE_FS): %w", err)
	}
	err = unix.Setns(c.joinFD, unix.CLONE_NEWNET|unix.CLONE_NEWNS|unix.CLONE_NEWPID|unix.CLONE_NEWIPC|unix.CLONE_NEWUTS)
	unix.Close(c.joinFD)
	if err != nil {
		return nil, fmt.Errorf("joining the environment's namespaces: %w", err)
	}
	if err := setLimits(c.fileSize); err != nil {
		return nil, err
	}
	if err := giveStdio([]int{0, 1, 2}, c.uid, c.gid); err != nil {
		return nil, err
	}
	if err := confineThread(c.mode, c.workspace, c.writable); err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: c.path, Args: c.args, Env: os.Environ(), Dir: wd,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Setctty:    c.ctty,
			Ctty:       0,
			Credential: &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: []uint32{}},
			// No parent-death signal: Go's check that the parent still
			// lives compares pids across the namespace boundary and would
			// kill the command at once. Should this trampoline die, the
			// command is ended by its cgroup's kill or with the init.
		},
	}
	return cmd, nil
}

// giveStdio makes the command's terminal and pipes (its standard files,
// fds) its own: they were opened by the service, and a command reopens
// them by path (/dev/stdout, /dev/tty, /proc/self/fd/1), which the kernel
// checks against their owner. Files and sockets are left alone, and a
// file given twice (a terminal is all three) is given once.
func giveStdio(fds []int, uid, gid uint32) error {
	type file struct{ dev, ino uint64 }
	given := make([]file, 0, len(fds))
	for i, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			continue
		}
		if slices.Contains(given, file{st.Dev, st.Ino}) {
			continue
		}
		given = append(given, file{st.Dev, st.Ino})
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFCHR && t != unix.S_IFIFO {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && !isTerminal(fd) {
			continue // /dev/null and the like belong to everyone already
		}
		if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
			return fmt.Errorf("giving the command its standard file %d: %w", i, err)
		}
	}
	return nil
}

// isTerminal reports whether fd is a terminal.
func isTerminal(fd int) bool {
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return err == nil
}

// setLimits sets the resource limits that are per process rather than
// per cgroup: the largest file a command may write, and no core dumps
// (which would write a process's memory, secrets included, into the
// workspace).
func setLimits(fileSize int64) error {
	if fileSize >= 0 {
		lim := unix.Rlimit{Cur: uint64(fileSize), Max: uint64(fileSize)}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
			return fmt.Errorf("setrlimit(RLIMIT_FSIZE): %w", err)
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_CORE): %w", err)
	}
	return nil
}

// dropBoundingSet empties the calling thread's capability bounding set,
// so that nothing the command executes, set-user-ID or file-capability
// programs included, can gain a capability. (Changing to the sandbox user
// clears the command's own capabilities.)
func dropBoundingSet() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}
