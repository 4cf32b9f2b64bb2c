package eventually_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	eventually.True(t, "three increments", func() bool { return n.Load() == 3 })
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	calls := 0
	err := eventually.Wait(ctx, func() bool { calls++; return false })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want the context's deadline", err)
	}
	// Polls back off: 20 ms hold a handful of polls, not thousands.
	if calls < 2 || calls > 40 {
		t.Fatalf("%d polls in 20ms", calls)
	}
}

// recorder is a testing.TB that records a failure instead of ending the
// test, to check the failure Within reports.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func TestWithinFailsNamingTheCondition(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		eventually.Within(r, 10*time.Millisecond, "the impossible", func() bool { return false })
	}()
	if !strings.Contains(r.failed, "the impossible") {
		t.Fatalf("failure %q does not name the condition", r.failed)
	}
}
