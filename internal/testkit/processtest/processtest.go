// Package processtest serves an assembled Penguin process
// (internal/assemble) for a test, as the assemble and engine tests that
// start whole servers do. It is apart from servetest, which the services'
// own tests import, because it imports every service.
package processtest

import (
	"context"
	"testing"

	"github.com/penguin-agent/penguin/internal/assemble"
)

// Serve serves p until the test ends; a failure of Serve itself fails the
// test when it stops.
func Serve(t testing.TB, p *assemble.Process) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}
