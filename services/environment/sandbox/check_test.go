//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// host describes a simulated host: abi < 0 means no Landlock at all; a
// nil error means the feature is there.
type host struct {
	abi                            int
	netErr, rootErr, limitsErr, sc error
}

func (h host) probe() Probe {
	return Probe{
		LandlockABI: func() (int, error) {
			if h.abi < 0 {
				return 0, syscall.EOPNOTSUPP
			}
			return h.abi, nil
		},
		NewNetNS:   func() error { return h.netErr },
		Privileged: func() error { return h.rootErr },
		Limits:     func() error { return h.limitsErr },
		Seccomp:    func() error { return h.sc },
	}
}

// TestCheckSimulatedHosts proves that every mode a host cannot enforce is
// refused with an error that wraps ErrUnsupported and names what is
// missing, and that a host that can enforce it passes.
func TestCheckSimulatedHosts(t *testing.T) {
	ws := t.TempDir()
	full := host{abi: 7}
	ww := Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone}
	for _, tc := range []struct {
		name string
		h    host
		p    Policy
		want string // "" means Check must pass
	}{
		{"none on a bare kernel", host{abi: -1, netErr: syscall.EPERM, rootErr: syscall.EPERM}, Policy{}, ""},
		{"workspace-write without landlock", host{abi: -1}, ww, "needs Linux Landlock"},
		{"read-only without landlock", host{abi: -1}, Policy{Mode: ReadOnly, Workspace: ws, Network: NetworkNone}, "needs Linux Landlock"},
		{"workspace-write on ABI v2", host{abi: 2}, ww, "needs Landlock ABI v3 (Linux 6.2 or later, for truncation control); this kernel offers v2"},
		{"workspace-write as an ordinary user", host{abi: 7, rootErr: errors.New("the service runs as uid 1000, not root")}, ww, "needs the service to run as root"},
		{"workspace-write without cgroup controllers", host{abi: 7, limitsErr: errors.New("no pids controller")}, ww, "pids and memory cgroup controllers"},
		{"workspace-write without seccomp", host{abi: 7, sc: errors.New("no seccomp")}, ww, "needs seccomp"},
		{"no network without namespaces", host{abi: 7, netErr: syscall.EPERM}, Policy{Network: NetworkNone}, "needs a new network namespace"},
		// A writable path configured above the workspace: read-only
		// cannot be enforced there.
		{"read-only beneath a writable path", full, Policy{Mode: ReadOnly, Workspace: ws, Network: NetworkNone, WritablePaths: []string{"/"}}, "lies beneath writable path /"},
		{"read-only beneath a writable parent", full, Policy{Mode: ReadOnly, Workspace: ws + "/sub", Network: NetworkNone, WritablePaths: []string{ws + "/"}}, "lies beneath writable path"},
		{"workspace-write on ABI v3", host{abi: 3}, ww, ""},
		{"everything available", full, Policy{Mode: ReadOnly, Workspace: ws, Network: NetworkNone}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.probe().Check(tc.p)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("Check error %v does not wrap ErrUnsupported", err)
			}
		})
	}
}

// TestCheckNoneNeedsNoProbe proves mode none on the host's network asks
// the host nothing, so it passes even where probing itself would fail.
func TestCheckNoneNeedsNoProbe(t *testing.T) {
	fail := func(what string) func() error {
		return func() error { t.Errorf("%s probed for mode none", what); return nil }
	}
	pr := Probe{
		LandlockABI: func() (int, error) { t.Error("Landlock probed for mode none"); return 0, nil },
		NewNetNS:    fail("namespaces"), Privileged: fail("privileges"), Limits: fail("limits"), Seccomp: fail("seccomp"),
	}
	if err := pr.Check(Policy{WritablePaths: []string{"ignored"}}); err != nil {
		t.Fatal(err)
	}
}

// TestCheckInvalidPolicy proves malformed policies are refused as such,
// not as host limitations.
func TestCheckInvalidPolicy(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{Mode: 7}, "invalid sandbox mode"},
		{Policy{Mode: WorkspaceWrite, Network: NetworkNone}, "needs a workspace path"},
		{Policy{Mode: WorkspaceWrite, Workspace: "work", Network: NetworkNone}, "not an absolute path"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone, WritablePaths: []string{"tmp"}}, "not an absolute path"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone, HidePaths: []string{"token"}}, "not an absolute path"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws}, "cannot share the host's network"},
		{Policy{Network: NetworkProxy}, "needs the egress proxy's socket"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone, Limits: Limits{CPUWeight: 20000}}, "outside 1..10000"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone, Limits: Limits{Memory: 1 << 20}}, "below 16 MiB"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone, Limits: Limits{Pids: 2}}, "below 8"},
	} {
		err := host{abi: 7}.probe().Check(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%+v) = %v, want an error containing %q", tc.p, err, tc.want)
			continue
		}
		if errors.Is(err, ErrUnsupported) {
			t.Errorf("Check(%+v) = %v: a bad policy is not a host limitation", tc.p, err)
		}
	}
}

// TestHostCheck asks the real kernel. Where a feature is present every
// mode passes; where it is missing the error must say so (and the positive
// confinement tests skip with the same reason).
func TestHostCheck(t *testing.T) {
	ws := t.TempDir()
	pr := HostProbe()
	abi, llErr := pr.LandlockABI()
	netErr, rootErr, limitsErr, scErr := pr.NewNetNS(), pr.Privileged(), pr.Limits(), pr.Seccomp()
	t.Logf("host: Landlock ABI %d (%v); network namespace: %v; root: %v; limits: %v; seccomp: %v", abi, llErr, netErr, rootErr, limitsErr, scErr)
	confinable := llErr == nil && abi >= MinLandlockABI && netErr == nil && rootErr == nil && limitsErr == nil && scErr == nil
	for _, p := range []Policy{
		{},
		{Network: NetworkNone},
		{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone},
		{Mode: ReadOnly, Workspace: ws, Network: NetworkNone},
	} {
		err := Check(p)
		wantOK := p.Network == NetworkHost || (p.Mode == None && netErr == nil) || confinable
		switch {
		case wantOK && err != nil:
			t.Errorf("Check(%+v) = %v on a host that supports it", p, err)
		case !wantOK && (err == nil || !errors.Is(err, ErrUnsupported)):
			t.Errorf("Check(%+v) = %v, want a clear ErrUnsupported", p, err)
		}
	}
}

func TestParseModeNetworkIdentity(t *testing.T) {
	for _, m := range []Mode{None, WorkspaceWrite, ReadOnly} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMode("workspace_write"); err == nil || !strings.Contains(err.Error(), "want none, workspace-write or read-only") {
		t.Errorf("ParseMode(bad) = %v", err)
	}
	for _, n := range []Network{NetworkHost, NetworkNone, NetworkProxy} {
		got, err := ParseNetwork(n.String())
		if err != nil || got != n {
			t.Errorf("ParseNetwork(%q) = %v, %v", n.String(), got, err)
		}
	}
	for in, want := range map[string]string{"1000": "1000:1000", "1000:2000": "1000:2000"} {
		id, err := ParseIdentity(in)
		if err != nil || id.String() != want {
			t.Errorf("ParseIdentity(%q) = %v, %v, want %s", in, id, err, want)
		}
	}
	for in, want := range map[string]string{"0": "never run as root", "1000:0": "never run as root", "nobody": "numeric", "1000:": "numeric", "-5": "numeric"} {
		if _, err := ParseIdentity(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIdentity(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// TestTrampolineBesideTheBinary proves how the trampoline is found:
// penguin-sandbox beside the running binary when it speaks this
// protocol, penguin itself when it is missing or from another version.
func TestTrampolineBesideTheBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lean := filepath.Join(filepath.Dir(exe), TrampolineName)
	if _, err := os.Stat(lean); err == nil {
		t.Skipf("%s exists already", lean)
	}
	if path, why := findTrampoline(); path != "/proc/self/exe" || !strings.Contains(why, "no "+TrampolineName) {
		t.Errorf("without %s: %s (%s)", TrampolineName, path, why)
	}
	// This test binary plays the trampoline (TestMain), protocol included.
	proctest.SelfIn(t, filepath.Dir(exe), TrampolineName)
	t.Cleanup(func() { os.Remove(lean) })
	if path, why := findTrampoline(); path != lean {
		t.Errorf("with %s: %s (%s)", TrampolineName, path, why)
	}
	// One of another version.
	if err := os.WriteFile(lean, []byte("#!/bin/sh\necho penguin-sandbox-0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if path, why := findTrampoline(); path != "/proc/self/exe" || !strings.Contains(why, "another version") {
		t.Errorf("with another version's %s: %s (%s)", TrampolineName, path, why)
	}
}
