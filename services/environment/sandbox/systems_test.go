package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// TestUnavailableOn checks what each system says it lacks, on any system:
// nothing on Linux; on macOS the limits, the user, the tracking and the
// loopback; on Windows confinement itself, first, and the limits.
func TestUnavailableOn(t *testing.T) {
	if got := unavailableOn("linux"); len(got) != 0 {
		t.Errorf("linux lacks %q", got)
	}
	for goos, want := range map[string][]string{
		"darwin":  {"resource limits", "own user", "process group", "loopback"},
		"windows": {"commands cannot be confined on windows", "resource limits", "descendants"},
	} {
		got := unavailableOn(goos)
		if len(got) != len(want) {
			t.Fatalf("%s: %d sentences, want %d: %q", goos, len(got), len(want), got)
		}
		for i, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: sentence %d is %q, want it to say %q", goos, i, got[i], w)
			}
		}
	}
}

// TestRefuseConfined checks the check of a system that confines nothing
// (Windows): mode none with the host's network passes; every other mode
// and network is refused with ErrUnsupported, naming what was asked, the
// system and what to ask for instead.
func TestRefuseConfined(t *testing.T) {
	if err := refuseConfined("windows", Policy{Mode: None, Network: NetworkHost}); err != nil {
		t.Fatalf("mode none, network host: %v", err)
	}
	for _, c := range []struct {
		p    Policy
		want []string
	}{
		{Policy{Mode: WorkspaceWrite, Network: NetworkNone}, []string{"sandbox mode workspace-write", "windows", "use sandbox mode none"}},
		{Policy{Mode: ReadOnly, Network: NetworkHost}, []string{"sandbox mode read-only", "windows"}},
		{Policy{Mode: None, Network: NetworkNone}, []string{"network none", "use network host"}},
		{Policy{Mode: None, Network: NetworkProxy}, []string{"network proxy", "windows"}},
	} {
		err := refuseConfined("windows", c.p)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%+v: %v, want ErrUnsupported", c.p, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q lacks %q", c.p, err, w)
			}
		}
	}
}
