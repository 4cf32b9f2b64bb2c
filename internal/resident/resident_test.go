package resident

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target percentage, leaving it as it
// was.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestHoldCollection: the start-up's target is four times the one set
// before, GOGC=off stays off, and resume brings back what was set, also
// when called twice.
func TestHoldCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, set := range []int{100, 50, -1} {
		debug.SetGCPercent(set)
		resume := HoldCollection()
		want := set * startGCFactor
		if set < 0 {
			want = set
		}
		if got := gcPercent(); got != want {
			t.Errorf("GOGC %d: held at %d, want %d", set, got, want)
		}
		resume()
		resume()
		if got := gcPercent(); got != set {
			t.Errorf("GOGC %d: resumed at %d, want %d", set, got, set)
		}
	}
}
