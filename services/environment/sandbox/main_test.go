//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
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
			g, err := apply(cmd, Policy{}, "", parent)
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

// testCtx is a context that ends before the test's own deadline.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// result is what a finished command did.
type result struct {
	out  string
	code int
}

// runUnder runs name args... under p through Apply and returns its combined
// output and exit status.
func runUnder(t *testing.T, p Policy, name string, args ...string) result {
	t.Helper()
	return runWith(t, p, self(t), name, args...)
}

// runWith is runUnder with the trampoline binary given.
func runWith(t *testing.T, p Policy, selfPath, name string, args ...string) result {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, name, args...)
	// A race-enabled test binary otherwise sleeps a second on exit.
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	g, err := Apply(cmd, p, selfPath)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	defer func() {
		if err := g.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}()
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

// bashUnder runs a bash script under p.
// The args become $0, $1, ...
func bashUnder(t *testing.T, p Policy, script string, args ...string) result {
	t.Helper()
	return runUnder(t, p, "bash", append([]string{"-c", script}, args...)...)
}

// startSpawner starts helper-spawn and returns its process and the pid and
// cgroup it printed.
func startSpawner(t *testing.T, cgroup bool, script string) (*exec.Cmd, int, string) {
	t.Helper()
	flag := "0"
	if cgroup {
		flag = "1"
	}
	cmd := exec.Command(self(t), "helper-spawn", flag, script)
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
		t.Fatalf("reading the spawner's report: %v", err)
	}
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
