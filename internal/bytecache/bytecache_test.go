package bytecache_test

import (
	"strconv"
	"testing"

	"github.com/penguin-agent/penguin/internal/bytecache"
)

// TestBound checks that a Map keeps what it is given, never holds more
// than its bound, starts over when full, and keeps no entry too large.
func TestBound(t *testing.T) {
	const max = 1 << 10
	c := bytecache.New[string, int](max)
	c.Put("a", 1, 10)
	c.Put("a", 2, 10) // already kept: neither replaced nor counted twice
	if v, ok := c.Get("a"); !ok || v != 1 || c.Bytes() != 10 {
		t.Fatalf("Get(a) = %d, %v with %d bytes; want 1, true with 10", v, ok, c.Bytes())
	}
	c.Put("huge", 3, max/16+1)
	if _, ok := c.Get("huge"); ok {
		t.Fatal("an entry over a sixteenth of the bound was kept")
	}
	for i := range 100 {
		c.Put(strconv.Itoa(i), i, max/32)
		if c.Bytes() > max {
			t.Fatalf("%d bytes held, over the bound of %d", c.Bytes(), max)
		}
	}
	if _, ok := c.Get("a"); ok {
		t.Fatal("the map never started over")
	}
	if v, ok := c.Get("99"); !ok || v != 99 {
		t.Fatal("the last entry put is not kept")
	}
}
