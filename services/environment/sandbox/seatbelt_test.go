package sandbox

import (
	"regexp"
	"strings"
	"testing"
)

// networkAllows returns the profile's allow rules that mention the network.
func networkAllows(profile string) []string {
	return regexp.MustCompile(`\(allow network[^\n]*`).FindAllString(profile, -1)
}

func TestSeatbeltWorkspaceWrite(t *testing.T) {
	p, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkNone, Writable: []string{"/Users/me/ws", "/private/var/folders/x/T/penguin-env-1"}, Hidden: []string{"/Users/me/.penguin/token"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(deny default)", "(allow file-read*)", `(subpath "/Users/me/ws")`, `(subpath "/private/var/folders/x/T/penguin-env-1")`} {
		if !strings.Contains(p, want) {
			t.Errorf("profile lacks %s:\n%s", want, p)
		}
	}
	if got := networkAllows(p); len(got) != 0 {
		t.Errorf("network none allows %q", got)
	}
	// The hidden path's deny comes after every allow, so that nothing
	// opens it again (later rules win).
	deny := strings.Index(p, `(deny file-read* file-write*`)
	if deny < 0 || !strings.Contains(p[deny:], `"/Users/me/.penguin/token"`) || strings.Contains(p[deny:], "(allow") {
		t.Errorf("the hidden path is not denied last:\n%s", p)
	}
	if strings.Contains(p, "(allow default)") || strings.Contains(p, "(allow file-write*)") || strings.Contains(p, "(allow mach-lookup)") {
		t.Errorf("profile allows everything of a kind:\n%s", p)
	}
}

func TestSeatbeltReadOnlyWritesOnlyTemp(t *testing.T) {
	p, err := SeatbeltProfile(SeatbeltSpec{Mode: ReadOnly, Network: NetworkNone, Writable: []string{"/tmp/env"}})
	if err != nil {
		t.Fatal(err)
	}
	w := regexp.MustCompile(`\(allow file-write\* file-ioctl\n((?:  \(subpath [^\n]*\)\n)*)\)`).FindStringSubmatch(p)
	if w == nil || strings.TrimSpace(w[1]) != `(subpath "/tmp/env")` {
		t.Errorf("read-only writes beneath %q, want only the temporary directory:\n%s", w, p)
	}
}

func TestSeatbeltProxyOpensOnlyItsPort(t *testing.T) {
	p, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkProxy, Writable: []string{"/ws"}, ProxyPort: 52001})
	if err != nil {
		t.Fatal(err)
	}
	got := networkAllows(p)
	if len(got) != 1 || got[0] != `(allow network-outbound (remote ip "localhost:52001"))` {
		t.Errorf("network proxy allows %q, want only the proxy's port", got)
	}
	for _, bad := range []string{"localhost:*", "*:*", "network-bind", "network-inbound", "unix-socket"} {
		if strings.Contains(p, bad) {
			t.Errorf("profile holds %q, which would open the service's ports or sockets:\n%s", bad, p)
		}
	}
	if _, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkProxy}); err == nil {
		t.Error("a proxy without a port gave a profile")
	}
}

func TestSeatbeltModeNone(t *testing.T) {
	p, err := SeatbeltProfile(SeatbeltSpec{Mode: None, Network: NetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, "(allow default)") || !strings.HasSuffix(p, "(deny network*)\n") {
		t.Errorf("mode none, network none:\n%s", p)
	}
	if _, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkHost}); err == nil {
		t.Error("a confined mode with the host's network gave a profile")
	}
}

func TestSeatbeltEscapesPaths(t *testing.T) {
	p, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkNone, Writable: []string{`/Users/me/my "quoted" ws`, `/Users/me/back\slash`, "/Users/me/with space"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(subpath "/Users/me/my \"quoted\" ws")`, `(subpath "/Users/me/back\\slash")`, `(subpath "/Users/me/with space")`} {
		if !strings.Contains(p, want) {
			t.Errorf("profile lacks %s:\n%s", want, p)
		}
	}
	// A quote that closed the string early would let the rest of the path
	// be read as rules: `ws") (allow default) ("` must stay one string.
	p, err = SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkNone, Writable: []string{`/ws") (allow default) ("`}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, `(subpath "/ws\") (allow default) (\"")`) {
		t.Errorf("an injected rule escaped its string:\n%s", p)
	}
	for _, bad := range []string{"/ws\nx", "relative/ws", "/ws\x00"} {
		if _, err := SeatbeltProfile(SeatbeltSpec{Mode: WorkspaceWrite, Network: NetworkNone, Writable: []string{bad}}); err == nil {
			t.Errorf("path %q gave a profile", bad)
		}
	}
}
