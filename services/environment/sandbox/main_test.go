//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/penguin-agent/penguin/internal/testkit"
)

// TestMain lets the test binary play the roles the penguin binary plays in
// production, so that tests exercise real processes: "sandbox-exec" (Apply
// re-executes self with it) and a few helper commands that the sandboxed
// side runs.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if run, ok := helpers()[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// helpers returns the roles of the test binary, by their first argument.
func helpers() map[string]func(args []string) int {
	return map[string]func(args []string) int{
		SubcommandName: func(args []string) int {
			err := SandboxExec(args)
			fmt.Fprintln(os.Stderr, "penguin:", err)
			return ExitCode
		},
		// helper-dial ADDR: exit 0 when a TCP connection to ADDR succeeds, 3
		// when it fails.
		"helper-dial": func(args []string) int {
			c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, "dial:", err)
				return 3
			}
			c.Close()
			return 0
		},
		// helper-dial-unix ADDR: exit 0 when a Unix socket connection to
		// ADDR ("@name" for an abstract one) succeeds, 3 when it fails.
		"helper-dial-unix": func(args []string) int {
			c, err := net.DialTimeout("unix", args[0], 2*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, "dial:", err)
				return 3
			}
			c.Close()
			return 0
		},
		// helper-serve ADDR: accept TCP connections on ADDR until killed.
		"helper-serve": func(args []string) int {
			ln, err := net.Listen("tcp", args[0])
			if err != nil {
				fmt.Fprintln(os.Stderr, "listen:", err)
				return 3
			}
			for {
				c, err := ln.Accept()
				if err != nil {
					return 3
				}
				c.Close()
			}
		},
		// helper-env WORKSPACE: start a confined environment, print its
		// cgroup directories on one line, then wait to be killed. It
		// stands in for an environment service that crashes.
		"helper-env": func(args []string) int {
			self, err := os.Executable()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			e, err := NewEnv(Policy{Mode: WorkspaceWrite, Workspace: args[0], Network: NetworkNone}, self)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			dirs := []string{}
			if e.cg.v2 != "" {
				dirs = append(dirs, e.cg.v2)
			}
			for d := range e.cg.dirSet() {
				dirs = append(dirs, d)
			}
			fmt.Println(strings.Join(dirs, " "))
			select {} // until killed
		},
		// helper-forkstorm N: start N sleeping processes, report how many
		// started and how many forks were refused, then end them.
		"helper-forkstorm": func(args []string) int {
			n, _ := strconv.Atoi(args[0])
			var started []*exec.Cmd
			refused := 0
			for range n {
				c := exec.Command("/bin/sleep", "30")
				if err := c.Start(); err != nil {
					refused++
					continue
				}
				started = append(started, c)
			}
			fmt.Printf("started %d refused %d\n", len(started), refused)
			for _, c := range started {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return 0
		},
		// helper-syscalls DIR: try the system calls a confined command
		// must not make, and print how each ended.
		"helper-syscalls": func(args []string) int {
			report := func(name string, err error) {
				if err == nil {
					fmt.Printf("%s: ok\n", name)
					return
				}
				fmt.Printf("%s: %v\n", name, err)
			}
			errno := func(_, _ uintptr, e syscall.Errno) error {
				if e == 0 {
					return nil
				}
				return e
			}
			report("mknod-char", unix.Mknod(filepath.Join(args[0], "c"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
			report("mknod-block", unix.Mknod(filepath.Join(args[0], "b"), unix.S_IFBLK|0o666, int(unix.Mkdev(8, 0))))
			report("mkfifo", unix.Mkfifo(filepath.Join(os.TempDir(), "fifo"), 0o644))
			report("unshare-user", unix.Unshare(unix.CLONE_NEWUSER))
			_, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
			report("clone-user", err)
			report("mount", unix.Mount("none", os.TempDir(), "tmpfs", 0, ""))
			report("bpf", errno(unix.Syscall(unix.SYS_BPF, 0, 0, 0)))
			_, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
			report("keyctl", err)
			var params [120]byte
			report("io_uring_setup", errno(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)))
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
			_, err = unix.PerfEventOpen(&attr, 0, -1, -1, 0)
			report("perf_event_open", err)
			report("ptrace-attach", unix.PtraceAttach(1))
			report("setns", unix.Setns(-1, 0))
			return 0
		},
		// helper-loopback: listen on 127.0.0.1 and connect to it, to show the
		// loopback of the process's own network namespace is up.
		"helper-loopback": func(args []string) int {
			ln, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				fmt.Fprintln(os.Stderr, "listen:", err)
				return 3
			}
			defer ln.Close()
			c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, "dial:", err)
				return 3
			}
			c.Close()
			return 0
		},
		// helper-netns: print the network namespace of the process.
		"helper-netns": func(args []string) int {
			ns, err := os.Readlink("/proc/self/ns/net")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			fmt.Println(ns)
			return 0
		},
		// helper-truncate PATH: truncate(2) by path, without opening the file.
		"helper-truncate": func(args []string) int {
			if err := os.Truncate(args[0], 0); err != nil {
				fmt.Fprintln(os.Stderr, "truncate:", err)
				return 3
			}
			return 0
		},
		// helper-spawn CGROUP SCRIPT: start bash -c SCRIPT through Apply
		// (policy none; CGROUP "1" uses a cgroup, "0" process groups only),
		// print its pid and cgroup, then wait to be killed. It stands in for
		// an environment service that crashes.
		"helper-spawn": func(args []string) int {
			parent := ""
			if args[0] == "1" {
				p, err := CgroupParent()
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 3
				}
				parent = p
			}
			cmd := exec.Command("bash", "-c", args[1])
			g, err := (&Env{}).apply(cmd, parent)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			fmt.Printf("%d %s\n", cmd.Process.Pid, g.Cgroup())
			select {} // until killed
		},
	}
}

// self is the path Apply re-executes: this test binary.
func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is what a finished command did.
type result struct {
	out  string
	code int
}

// newEnv starts the sandbox of an environment under p, closed when the
// test ends.
func newEnv(t *testing.T, p Policy) *Env {
	t.Helper()
	e, err := NewEnv(p, self(t))
	if err != nil {
		t.Fatalf("NewEnv: %v", err)
	}
	if e.CanStart() && awaitSpawner(e) == nil && !spawnerOff.Load() {
		t.Fatal("a confined environment has no spawner on this host")
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// testEnv is the environment of the commands that a test starts with
// runIn: PATH, HOME and SHELL pinned, so no host profile or setting
// reaches them, and no race detector pause at exit.
func testEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent", "SHELL=/bin/bash", "GORACE=atexit_sleep_ms=0"}
}

// runUnder runs name args... in a new environment under p and returns its
// combined output and exit status.
func runUnder(t *testing.T, p Policy, name string, args ...string) result {
	t.Helper()
	return runIn(t, newEnv(t, p), name, args...)
}

// runIn runs name args... in the environment e; what the command leaves
// behind is ended when it has.
func runIn(t *testing.T, e *Env, name string, args ...string) result {
	t.Helper()
	return run(t, e, true, name, args...)
}

// runKeep is runIn that leaves what the command started running until
// the test ends, as the environment service keeps a server started with
// "&".
func runKeep(t *testing.T, e *Env, name string, args ...string) result {
	t.Helper()
	return run(t, e, false, name, args...)
}

// viaTrampoline makes run start confined commands through Apply and the
// trampoline, as custom tools and the shell snapshot are, rather than
// with Start; see eachWay.
var viaTrampoline bool

// eachWay runs test with commands started each way the service starts
// them: from the environment's spawner, from its init's starter, and
// through the trampoline. The three must confine alike.
func eachWay(t *testing.T, test func(t *testing.T)) {
	eachStarter(t, test)
	t.Run("trampoline", func(t *testing.T) {
		viaTrampoline = true
		defer func() { viaTrampoline = false }()
		test(t)
	})
}

// eachStarter runs test with Start served by the environment's spawner
// and by its init's starter, for the environments test creates with
// newEnv (which waits for the spawner to be ready).
func eachStarter(t *testing.T, test func(t *testing.T)) {
	t.Run("spawner", test)
	t.Run("starter", func(t *testing.T) {
		spawnerOff.Store(true)
		defer spawnerOff.Store(false)
		test(t)
	})
}

// run starts a command as the environment service does: with Start where
// the environment starts commands itself (confined modes: its spawner, or
// its init's starter), else through Apply.
func run(t *testing.T, e *Env, release bool, name string, args ...string) result {
	t.Helper()
	if e.CanStart() && !viaTrampoline {
		return runStarted(t, e, release, name, args...)
	}
	return runApplied(t, e, release, name, args...)
}

// runStarted runs a command with Env.Start.
func runStarted(t *testing.T, e *Env, release bool, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = testEnv()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, w, w
	p, g, err := e.Start(cmd, true)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer releaseAfter(t, g, release)()
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- b
	}()
	ws, err := p.Wait()
	if err != nil {
		t.Fatalf("running %s: %v", name, err)
	}
	if !release {
		// What the command left running holds the pipe: read what
		// came until the command's own end.
		r.SetReadDeadline(time.Now().Add(time.Second))
	}
	b := <-out
	code := ws.ExitStatus()
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return result{string(b), code}
}

// releaseAfter returns what releases g when the caller returns (release),
// checking that it could; or, where the command may leave processes
// behind for the test to look at, it leaves g to the test's cleanup.
func releaseAfter(t *testing.T, g *Group, release bool) func() {
	if !release {
		t.Cleanup(func() { _ = g.Release() })
		return func() {}
	}
	return func() {
		if err := g.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
}

// runApplied runs a command through Apply and the trampoline.
func runApplied(t *testing.T, e *Env, release bool, name string, args ...string) result {
	t.Helper()
	ctx := testkit.Context(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = testEnv()
	g, err := e.Apply(cmd)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	defer releaseAfter(t, g, release)()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return result{string(out), 0}
	case errors.As(err, &ee):
		return result{string(out), ee.ExitCode()}
	default:
		t.Fatalf("running %s: %v (output %q)", name, err, out)
		return result{}
	}
}

// bashIn runs a bash script in the environment e.
func bashIn(t *testing.T, e *Env, script string, args ...string) result {
	t.Helper()
	return runIn(t, e, "/bin/bash", append([]string{"-c", script}, args...)...)
}

// startSpawner starts helper-spawn and returns its process and the pid and
// cgroup it printed.
func startSpawner(t *testing.T, cgroup bool, script string) (*exec.Cmd, int, string) {
	t.Helper()
	flag := "0"
	if cgroup {
		flag = "1"
	}
	cmd, line := startHelper(t, "helper-spawn", flag, script)
	f := strings.Fields(line)
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("spawner report %q: %v", line, err)
	}
	cg := ""
	if len(f) > 1 {
		cg = f[1]
	}
	return cmd, pid, cg
}

// startHelper starts a helper role of this test binary, which stands in
// for a service, and returns it with the first line it printed. It is
// killed when the test ends, if it was not before.
func startHelper(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = testEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the report of %s: %v", args[0], err)
	}
	return cmd, line
}

// awaitSpawner starts e's spawner, as its first command would, and
// returns it once it is ready (nil when it could not start).
func awaitSpawner(e *Env) *spawner {
	e.usableSpawner()
	e.spawnMu.Lock()
	spawning := e.spawning
	e.spawnMu.Unlock()
	if spawning != nil {
		<-spawning
	}
	return e.usableSpawner()
}
