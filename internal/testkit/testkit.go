// Package testkit holds what tests of more than one package share: the
// provider emulator, fake services, a private PostgreSQL schema, process
// environments, polling with a deadline and metric readers, each in a
// package of its own below this one, and here the one helper nearly every
// test needs, a context bounded by the test.
package testkit

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends after d, and at the latest when the
// test ends, so that a stuck call fails the test instead of hanging the
// run. It does not derive from t.Context, which ends before the test's
// cleanups run, so cleanups may still use it.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
