//go:build linux

package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ExitCode is the exit status the sandbox-exec subcommand should use when
// SandboxExec fails: the status shells use for "found but could not be
// executed", so a confinement failure never looks like the command's own.
const ExitCode = 126

// writeAccess is every Landlock right that changes the file system. Only
// these are handled, so reading, listing and executing stay allowed
// everywhere. Refer (moving or linking across directories) must be handled
// because Landlock denies it outright otherwise; it is granted where the
// other write rights are.
const writeAccess landlock.AccessFSSet = ll.AccessFSWriteFile | ll.AccessFSTruncate |
	ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
	ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
	ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer

// SandboxExec is the hidden "penguin sandbox-exec" subcommand, the
// trampoline Apply puts in front of a confined command:
//
//	penguin sandbox-exec --mode M [--workspace W] [--writable P]... [--no-network] [--argv0 A] -- PATH ARGS...
//
// It brings the loopback of its new network namespace up (after checking
// that it really is in a namespace of its own), restricts file-system
// writes with Landlock, and replaces itself with PATH. It returns only on
// failure, before the command ran; the caller should then exit with
// ExitCode. Landlock is applied strictly: if the kernel lacks the required
// ABI it fails rather than running the command with less confinement.
func SandboxExec(args []string) error {
	fs := flag.NewFlagSet(SubcommandName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", "none", "none, workspace-write or read-only")
	workspace := fs.String("workspace", "", "the workspace directory")
	var writable stringList
	fs.Var(&writable, "writable", "a further writable directory (repeatable)")
	noNetwork := fs.Bool("no-network", false, "expect a fresh network namespace and bring its loopback up")
	argv0 := fs.String("argv0", "", "argv[0] for the command, when it is not PATH")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%s: %w", SubcommandName, err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%s: no command given after --", SubcommandName)
	}
	m, err := ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%s: %w", SubcommandName, err)
	}
	p := Policy{Mode: m, Workspace: *workspace, WritablePaths: writable, NoNetwork: *noNetwork}
	if err := p.validate(); err != nil {
		return fmt.Errorf("%s: %w", SubcommandName, err)
	}

	path := rest[0]
	if !strings.Contains(path, "/") {
		if path, err = exec.LookPath(path); err != nil {
			return fmt.Errorf("%s: %w", SubcommandName, err)
		}
	}
	argv := append([]string(nil), rest...)
	if *argv0 != "" {
		argv[0] = *argv0
	}

	// Landlock and the exec must happen on one thread: the restriction
	// applies to the calling thread, and execve keeps the calling thread's
	// credentials. The thread stays locked; the process image is replaced.
	runtime.LockOSThread()
	if p.NoNetwork {
		if err := ownNetNS(); err != nil {
			return fmt.Errorf("%s: %w", SubcommandName, err)
		}
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("%s: %w", SubcommandName, err)
		}
	}
	if p.Mode != None {
		if err := restrictWrites(p); err != nil {
			return fmt.Errorf("%s: landlock: %w", SubcommandName, err)
		}
	}
	err = syscall.Exec(path, argv, os.Environ())
	return fmt.Errorf("%s: executing %s: %w", SubcommandName, path, err)
}

// ownNetNS fails unless this process is in a different network namespace
// from its parent: --no-network with a shared namespace would mean the
// clone flag was lost (for example SysProcAttr replaced after Apply), and
// running anyway would silently leave the network open.
func ownNetNS() error {
	mine, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("reading own network namespace: %w", err)
	}
	ppid := os.Getppid()
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(ppid) + "/ns/net")
	if err != nil {
		return fmt.Errorf("reading the parent's network namespace: %w", err)
	}
	if mine == theirs {
		return fmt.Errorf("refusing to run: --no-network was asked for, but this process shares the network namespace %s of its parent %d (was it started without CLONE_NEWNET?)", mine, ppid)
	}
	return nil
}

// restrictWrites applies Landlock to the calling thread: write access only
// beneath the workspace (WorkspaceWrite), the writable paths, and to a few
// device files. The config is not best-effort, so a kernel below the
// needed ABI is an error, never a weaker sandbox.
func restrictWrites(p Policy) error {
	// Commands routinely redirect to /dev/null or their terminal.
	// /dev/pts is included because /dev/stdout and /dev/stderr resolve to
	// the pseudo-terminal a command runs on.
	const devWrite = ll.AccessFSWriteFile | ll.AccessFSTruncate
	rules := []landlock.Rule{
		landlock.PathAccess(devWrite, "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		landlock.PathAccess(devWrite, "/dev/pts").IgnoreIfMissing(),
	}
	if p.Mode == WorkspaceWrite {
		rules = append(rules, landlock.PathAccess(writeAccess, p.Workspace))
	}
	for _, w := range p.WritablePaths {
		rules = append(rules, landlock.PathAccess(writeAccess, filepath.Clean(w)).IgnoreIfMissing())
	}
	cfg := landlock.Config{HandledAccessFS: writeAccess}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("empty ruleset: nothing would be restricted")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
