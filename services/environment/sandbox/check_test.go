//go:build linux

package sandbox

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// fakeProbe simulates a host: abi < 0 means no Landlock at all.
func fakeProbe(t *testing.T, abi int, netErr error) Probe {
	return Probe{
		LandlockABI: func() (int, error) {
			if abi < 0 {
				return 0, syscall.EOPNOTSUPP
			}
			return abi, nil
		},
		NewNetNS: func() error { return netErr },
	}
}

// TestCheckSimulatedHosts proves that every mode a host cannot enforce is
// refused with an error that wraps ErrUnsupported and names the missing
// kernel feature, and that a host that can enforce it passes.
func TestCheckSimulatedHosts(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name   string
		abi    int
		netErr error
		p      Policy
		want   string // "" means Check must pass
	}{
		{"none on a bare kernel", -1, syscall.EPERM, Policy{}, ""},
		{"workspace-write without landlock", -1, nil, Policy{Mode: WorkspaceWrite, Workspace: ws}, "needs Linux Landlock"},
		{"read-only without landlock", -1, nil, Policy{Mode: ReadOnly, Workspace: ws}, "needs Linux Landlock"},
		{"workspace-write on ABI v2", 2, nil, Policy{Mode: WorkspaceWrite, Workspace: ws}, "needs Landlock ABI v3 (Linux 6.2 or later, for truncation control); this kernel offers v2"},
		{"workspace-write on ABI v3", 3, nil, Policy{Mode: WorkspaceWrite, Workspace: ws}, ""},
		{"no-network without namespaces", 7, syscall.EPERM, Policy{NoNetwork: true}, "no-network needs a new network namespace"},
		{"read-only and no-network, namespaces missing", 7, syscall.EPERM, Policy{Mode: ReadOnly, Workspace: ws, NoNetwork: true}, "operation not permitted"},
		{"everything available", 7, nil, Policy{Mode: ReadOnly, Workspace: ws, NoNetwork: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fakeProbe(t, tc.abi, tc.netErr).Check(tc.p)
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

// TestCheckNoneNeedsNoProbe proves mode none without no-network asks the
// host nothing, so it passes even where probing itself would fail.
func TestCheckNoneNeedsNoProbe(t *testing.T) {
	pr := Probe{
		LandlockABI: func() (int, error) { t.Error("Landlock probed for mode none"); return 0, nil },
		NewNetNS:    func() error { t.Error("namespaces probed without no-network"); return nil },
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
		{Policy{Mode: WorkspaceWrite}, "needs a workspace path"},
		{Policy{Mode: WorkspaceWrite, Workspace: "work"}, "not an absolute path"},
		{Policy{Mode: WorkspaceWrite, Workspace: ws, WritablePaths: []string{"tmp"}}, "not an absolute path"},
		{Policy{Mode: ReadOnly, Workspace: ws, WritablePaths: []string{"/"}}, "lies beneath writable path /"},
		{Policy{Mode: ReadOnly, Workspace: ws + "/sub", WritablePaths: []string{ws + "/"}}, "lies beneath writable path"},
	} {
		err := fakeProbe(t, 7, nil).Check(tc.p)
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
	abi, llErr := HostProbe().LandlockABI()
	netErr := HostProbe().NewNetNS()
	t.Logf("host: Landlock ABI %d (err %v); new network namespace: %v", abi, llErr, netErr)
	for _, p := range []Policy{
		{},
		{Mode: WorkspaceWrite, Workspace: ws},
		{Mode: ReadOnly, Workspace: ws},
		{NoNetwork: true},
		{Mode: WorkspaceWrite, Workspace: ws, NoNetwork: true},
	} {
		err := Check(p)
		landlockOK := llErr == nil && abi >= MinLandlockABI
		wantOK := (p.Mode == None || landlockOK) && (!p.NoNetwork || netErr == nil)
		switch {
		case wantOK && err != nil:
			t.Errorf("Check(%+v) = %v on a host that supports it", p, err)
		case !wantOK && (err == nil || !errors.Is(err, ErrUnsupported)):
			t.Errorf("Check(%+v) = %v, want a clear ErrUnsupported", p, err)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{None, WorkspaceWrite, ReadOnly} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if m, err := ParseMode(""); err != nil || m != None {
		t.Errorf("ParseMode(\"\") = %v, %v, want none", m, err)
	}
	if _, err := ParseMode("workspace_write"); err == nil || !strings.Contains(err.Error(), "want none, workspace-write or read-only") {
		t.Errorf("ParseMode(bad) = %v", err)
	}
}
