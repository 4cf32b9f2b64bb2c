//go:build linux

package sandbox

import (
	"reflect"
	"strings"
	"testing"
)

// TestStartRequestWire round-trips requests through their wire form, empty
// strings and lists included, and refuses what no request can be.
func TestStartRequestWire(t *testing.T) {
	for _, r := range []startRequest{
		{Path: "/bin/bash", Args: []string{"bash", "-c", "echo 'a b'", ""}, Env: []string{"A=1", "B="}, Dir: "/w", Ctty: true, Cgroup: true},
		{Path: "/bin/true", Args: []string{}, Env: []string{}},
		{Path: "/bin/true", Args: []string{"true"}, Env: []string{"X=é\n"}, Cgroup: true},
	} {
		b, err := r.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeStartRequest(b)
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
	}
	if _, err := (startRequest{Path: "/bin/true", Args: []string{"a\x00b"}}).encode(); err == nil {
		t.Error("encode of an argument holding a NUL: no error")
	}
	for _, bad := range []string{"", "g\x00/bin/true", "\x00/p\x00/d\x00", "\x00/p\x00/d\x003\x00a\x00", "\x00/p\x00/d\x00-1\x00", "\x00/p\x00/d\x00x\x00"} {
		if _, err := decodeStartRequest([]byte(bad)); err == nil {
			t.Errorf("decode of %q: no error", bad)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("decode of %q: an empty error", bad)
		}
	}
}
