package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestClientLimiter checks that a client over its burst is refused while
// another is not, that the refused client is let in again after the
// interval, and that the buckets kept never exceed the bound, even with
// a new client on every call.
func TestClientLimiter(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := newClientLimiter(time.Second, 3, 100)
	for i := range 3 {
		if ok, _ := l.allow("a", now); !ok {
			t.Fatalf("call %d of a's burst refused", i+1)
		}
	}
	ok, wait := l.allow("a", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("a's fourth call: allowed %v, wait %v; want refused with a wait up to 1s", ok, wait)
	}
	if ok, _ := l.allow("b", now); !ok {
		t.Fatal("b was refused for a's flood")
	}
	if ok, _ := l.allow("a", now.Add(time.Second)); !ok {
		t.Fatal("a is still refused a second later")
	}

	for i := range 1000 {
		l.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now.Add(time.Duration(i)*time.Millisecond))
		if n := len(l.buckets); n > 100 {
			t.Fatalf("%d buckets kept after %d clients; the bound is 100", n, i+1)
		}
	}
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:5555":              "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:5555": "2001:db8:1:2::",
		"[2001:db8:1:2:ffff::1]:80":   "2001:db8:1:2::",
		"[2001:db8:1:3::1]:80":        "2001:db8:1:3::",
	} {
		if got := clientKey(&http.Request{RemoteAddr: addr}); got != want {
			t.Errorf("clientKey(%s) = %q; want %q", addr, got, want)
		}
	}
}
