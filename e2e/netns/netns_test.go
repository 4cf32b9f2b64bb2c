//go:build linux

package netns_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/penguin-agent/penguin/e2e/netns"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// The test binary doubles as the program run inside the namespaces: with
// NETNS_TEST_HELPER set it plays one of the roles below instead of
// running tests.
func TestMain(m *testing.M) {
	if role := os.Getenv("NETNS_TEST_HELPER"); role != "" {
		os.Exit(helper(role, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// helper plays a role:
//
//	serve ADDR NAME   answer every connection with "hello from NAME"
//	dial ADDR         print what a connection to ADDR answers
//	spawn             start `sleep 300`, print its pid, and wait
func helper(role string, args []string) int {
	switch role {
	case "serve":
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("{\"msg\":\"listening\",\"addr\":%q}\n", ln.Addr().String())
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			fmt.Fprintf(c, "hello from %s\n", args[1])
			c.Close()
		}
	case "dial":
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		if err != nil {
			fmt.Println("dial error:", err)
			return 2
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Print(line)
		return 0
	case "spawn":
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("{\"msg\":\"spawned\",\"pid\":%d}\n", cmd.Process.Pid)
		_ = cmd.Wait()
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper role", role)
	return 1
}

// run starts the test binary in role on h.
func run(t *testing.T, h *netns.Host, name, role string, args ...string) *netns.Proc {
	t.Helper()
	cmd := h.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "NETNS_TEST_HELPER="+role)
	return netns.Start(t, name, cmd)
}

// dialFrom runs the dial role on h and returns its output.
func dialFrom(t *testing.T, h *netns.Host, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.Namespace, os.Args[0], addr)
	cmd.Env = append(os.Environ(), "NETNS_TEST_HELPER=dial")
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// TestHosts checks what the separate-hosts tests rely on: hosts reach each
// other and the test process at their own addresses, a name can map to
// several hosts, the forwarder reaches the root namespace's loopback
// (which a host's own loopback is not), and killing a process kills what
// it started.
func TestHosts(t *testing.T) {
	n := netns.New(t)
	a, b := n.AddHost("alpha"), n.AddHost("beta")
	if a.IP == b.IP || !a.IP.Is4() || a.IP.As4()[0] != 10 || a.IP.As4()[1] != 231 {
		t.Fatalf("addresses %s and %s: want two different addresses in 10.231.0.0/16", a.IP, b.IP)
	}
	srv := run(t, a, "server on alpha", "serve", a.Addr(7000), "alpha")
	srv.WaitLog("listening", nil, "addr", 10*time.Second)

	t.Run("host to host", func(t *testing.T) {
		if got := dialFrom(t, b, a.Addr(7000)); got != "hello from alpha" {
			t.Fatalf("beta dialing alpha got %q", got)
		}
	})
	t.Run("test process to host", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", a.Addr(7000), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		if line != "hello from alpha\n" {
			t.Fatalf("got %q", line)
		}
	})
	t.Run("a host's loopback is its own", func(t *testing.T) {
		if got := dialFrom(t, b, "127.0.0.1:7000"); !strings.Contains(got, "connection refused") {
			t.Fatalf("beta dialing its own loopback got %q, want connection refused", got)
		}
	})
	t.Run("no default route", func(t *testing.T) {
		out, err := exec.Command("ip", "-n", a.Namespace, "route", "show", "default").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("default route of alpha: %q %v; want none", out, err)
		}
	})
	t.Run("names", func(t *testing.T) {
		c := n.AddHost("gamma")
		c.SetHosts(map[string][]netip.Addr{"service.penguin.test": {a.IP}})
		if got := dialFrom(t, c, "service.penguin.test:7000"); got != "hello from alpha" {
			t.Fatalf("gamma dialing service.penguin.test got %q", got)
		}
	})
	t.Run("forward to the root namespace", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, "hello from the root namespace\n")
				c.Close()
			}
		}()
		fwd := n.Forward(ln.Addr().String())
		if !strings.HasPrefix(fwd, n.Gateway().String()+":") {
			t.Fatalf("forwarder at %s, want the gateway %s", fwd, n.Gateway())
		}
		for range 3 {
			if got := dialFrom(t, b, fwd); got != "hello from the root namespace" {
				t.Fatalf("beta dialing the forwarder got %q", got)
			}
		}
	})
	t.Run("kill takes the children", func(t *testing.T) {
		p := run(t, b, "spawner on beta", "spawn")
		child, err := strconv.Atoi(p.WaitLog("spawned", nil, "pid", 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p.Kill()
		eventually.Within(t, 5*time.Second, fmt.Sprintf("child %d of the killed process to end", child), func() bool {
			if syscall.Kill(child, 0) != nil {
				return true
			}
			// A killed child lingers as a zombie until init reaps it.
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
			return err == nil && strings.Contains(string(st), ") Z ")
		})
	})
}

// TestTeardownAndSweep checks that a network is gone when its test ends,
// and that Sweep removes the namespaces of a process that died without
// cleaning up, while leaving those of live processes alone.
func TestTeardownAndSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var ns, bridgeAddr string
	t.Run("network", func(t *testing.T) {
		n := netns.New(t)
		ns = n.AddHost("one").Namespace
		bridgeAddr = n.Gateway().String()
	})
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		t.Fatalf("namespace %s outlived its test", ns)
	}
	if out, _ := exec.Command("ip", "-o", "addr", "show").Output(); strings.Contains(string(out), " "+bridgeAddr+"/") {
		t.Fatalf("bridge address %s outlived its test", bridgeAddr)
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	staleNS := fmt.Sprintf("pgt%06x00-crashed", dead.Process.Pid)
	liveNS := fmt.Sprintf("pgt%06x00-alive", os.Getpid())
	for _, name := range []string{staleNS, liveNS} {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", name, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", liveNS).Run() })
	if err := netns.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + staleNS); err == nil {
		_ = exec.Command("ip", "netns", "del", staleNS).Run()
		t.Fatalf("Sweep left the namespace of dead process %d", dead.Process.Pid)
	}
	if _, err := os.Stat("/run/netns/" + liveNS); err != nil {
		t.Fatalf("Sweep removed the namespace of a live process: %v", err)
	}
}
