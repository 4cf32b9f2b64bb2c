// Package servetest serves a test's gRPC services with the project's own
// server (internal/grpcserver) on a loopback port, as the services' tests
// in several packages do.
package servetest

import (
	"context"
	"net"
	"testing"

	"github.com/penguin-agent/penguin/internal/grpcserver"
)

// Serve serves srv, its services registered, on a loopback port until the
// test ends, and returns the address. A failure of Serve itself fails the
// test when it stops.
func Serve(t testing.TB, srv *grpcserver.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String()
}
