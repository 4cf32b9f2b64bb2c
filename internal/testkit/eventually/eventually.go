// Package eventually waits, in tests, for a condition that another
// goroutine, a server or a process makes true: it polls the condition with
// a deadline, so no test orders events by sleeping a guessed amount of
// time, and none waits past its own deadline.
//
// Polling starts at a millisecond and backs off to a few tens, which finds
// a condition quickly on an idle machine without spinning on a loaded one.
// Tests whose waiting is driven by timers of the code under test (a lease
// renewal, a grace period) are better run in a testing/synctest bubble,
// where fake time makes them exact; this package is for what a bubble
// cannot hold: real sockets, real processes, real databases.
package eventually

import (
	"context"
	"testing"
	"time"
)

// Timeout is how long True waits: generous, because tests share a loaded
// machine and a slow pass is better than a false failure.
const Timeout = 15 * time.Second

// maxInterval caps the wait between two polls.
const maxInterval = 25 * time.Millisecond

// True polls cond until it returns true, and fails the test when Timeout
// (or the test's own deadline, if sooner) passes first. what names the
// condition in the failure.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Timeout, what, cond)
}

// Within is True with a timeout of d.
func Within(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded(t, d))
	defer cancel()
	if err := Wait(ctx, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Wait polls cond until it returns true, or returns ctx's error when ctx
// ends first. It is for goroutines other than the test's own, which must
// not call t.Fatal.
func Wait(ctx context.Context, cond func() bool) error {
	interval := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for !cond() {
		timer.Reset(interval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		interval = min(2*interval, maxInterval)
	}
	return nil
}

// bounded shortens d so the wait ends before the test binary's deadline
// (go test -timeout), leaving time to report which condition never held
// instead of a bare panic with every goroutine's stack.
func bounded(t testing.TB, d time.Duration) time.Duration {
	dt, ok := t.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return d
	}
	deadline, ok := dt.Deadline()
	if !ok {
		return d
	}
	const margin = 5 * time.Second
	if left := time.Until(deadline) - margin; left < d {
		return max(left, time.Millisecond)
	}
	return d
}
