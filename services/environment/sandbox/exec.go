//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Roles of the sandbox-exec subcommand.
const (
	roleInit     = "init"     // the first process of an environment's namespaces
	roleRun      = "run"      // puts one command into them
	roleSpawn    = "spawn"    // starts an environment's commands as the service's children
	roleHold     = "hold"     // keeps a user namespace alive while it is opened
	roleProtocol = "protocol" // prints Protocol
)

// Protocol names the command lines of the roles. A trampoline binary
// that prints another one (left from another version of penguin) is not
// used; change it with any change to the roles' flags.
const Protocol = "penguin-sandbox-1"

// writeAccess is every Landlock right that changes the file system. Only
// these are handled, so reading, listing and executing stay allowed
// everywhere. Refer (moving or linking across directories) must be handled
// because Landlock denies it outright otherwise; it is granted where the
// other write rights are.
const writeAccess landlock.AccessFSSet = ll.AccessFSWriteFile | ll.AccessFSTruncate |
	ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
	ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
	ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer

// privateTemp are the environment's own temporary directories (tmpfs
// mounts in its mount namespace), writable in every confined mode.
var privateTemp = []string{"/tmp", "/var/tmp", "/dev/shm"}

// SandboxExec is the hidden "penguin sandbox-exec" subcommand (and the
// whole of the penguin-sandbox binary), in one of its roles:
//
//	penguin sandbox-exec init [flags]             the holder of an environment's namespaces
//	penguin sandbox-exec run [flags] -- PATH ARGS  one command, put into them
//	penguin sandbox-exec spawn                     an environment's spawner (spawner.go)
//	penguin sandbox-exec hold                      keeps a user namespace alive until stdin closes
//	penguin sandbox-exec protocol                  prints Protocol
//
// It returns only on failure, before any command ran; the caller should
// then exit with ExitCode. Every confinement is applied strictly: what the
// kernel cannot do is an error, never a weaker sandbox.
func SandboxExec(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s: no role given (init, run, spawn, hold or protocol)", SubcommandName)
	}
	switch args[0] {
	case roleInit:
		return runInit(args[1:])
	case roleRun:
		return runCommand(args[1:])
	case roleSpawn:
		return runSpawner()
	case roleHold:
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
		return nil
	case roleProtocol:
		fmt.Println(Protocol)
		os.Exit(0)
		return nil
	default:
		return fmt.Errorf("%s: unknown role %q (want init, run, spawn, hold or protocol)", SubcommandName, args[0])
	}
}

// closeInherited marks every descriptor above standard error
// close-on-exec, so that nothing this process inherited (from the
// service, or the service from whoever started it) or was passed reaches
// a command: the descriptors it uses itself keep working until it
// executes something.
func closeInherited() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing open descriptors: %w", err)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// restrictWrites applies Landlock to the calling thread: write access only
// beneath the workspace (WorkspaceWrite), the writable paths, the
// environment's temporary directories, and to a few device files. The
// config is not best-effort, so a kernel below the needed ABI is an error,
// never a weaker sandbox. It sets no_new_privs, which Landlock requires.
func restrictWrites(mode Mode, workspace string, writable []string) error {
	// Commands routinely redirect to /dev/null or their terminal.
	// /dev/pts is included because /dev/stdout and /dev/stderr resolve to
	// the pseudo-terminal a command runs on.
	const devWrite = ll.AccessFSWriteFile | ll.AccessFSTruncate
	rules := []landlock.Rule{
		landlock.PathAccess(devWrite, "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		landlock.PathAccess(devWrite, "/dev/pts").IgnoreIfMissing(),
		landlock.PathAccess(writeAccess, privateTemp...).IgnoreIfMissing(),
	}
	if mode == WorkspaceWrite {
		rules = append(rules, landlock.PathAccess(writeAccess, workspace))
	}
	for _, w := range writable {
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
