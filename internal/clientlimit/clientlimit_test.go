package clientlimit

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestLimiter checks that a client over its burst is refused while
// another is not, that the refused client is let in again after the
// interval, and that the buckets kept never exceed the bound, even with
// a new client on every call.
func TestLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := New(time.Second, 3, 100)
	for i := range 3 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("call %d of a's burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("a's fourth call: allowed %v, wait %v; want refused with a wait up to 1s", ok, wait)
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("b was refused for a's flood")
	}
	if ok, _ := l.Allow("a", now.Add(time.Second)); !ok {
		t.Fatal("a is still refused a second later")
	}

	for i := range 1000 {
		l.Allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now.Add(time.Duration(i)*time.Millisecond))
		if n := len(l.buckets); n > 100 {
			t.Fatalf("%d buckets kept after %d clients; the bound is 100", n, i+1)
		}
	}
}

func TestKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::",
		"2001:db8:1:3::1":      "2001:db8:1:3::",
	} {
		if got := Key(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Key(%s) = %q; want %q", addr, got, want)
		}
	}
}
