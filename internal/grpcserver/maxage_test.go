package grpcserver_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// TestMaxConnectionAgeMovesNewCallsToANewConnection checks what the option
// is for: once a connection is older than MaxConnectionAge, the client's
// next calls arrive on a new connection (so it resolves its target again),
// while a stream that was open all along still ends normally.
func TestMaxConnectionAgeMovesNewCallsToANewConnection(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	peers := make(chan string, 1)
	release := make(chan struct{})
	f := &fakeLLM{
		listProviders: func(ctx context.Context) (*penguinv1.ListProvidersResponse, error) {
			p, _ := peer.FromContext(ctx)
			return &penguinv1.ListProvidersResponse{Providers: []*penguinv1.ProviderInfo{{Name: p.Addr.String()}}}, nil
		},
		streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
			p, _ := peer.FromContext(s.Context())
			peers <- p.Addr.String()
			select {
			case <-release:
				return nil
			case <-s.Context().Done():
				return s.Context().Err()
			}
		},
	}
	r := start(t, grpcserver.Options{MaxConnectionAge: 300 * time.Millisecond}, registerLLM(f))
	client := penguinv1.NewLLMServiceClient(r.conn)

	stream, err := client.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first := <-peers
	for {
		resp, err := client.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
		if err != nil {
			t.Fatalf("a call after the connection aged: %v", err)
		}
		if resp.GetProviders()[0].GetName() != first {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("every call still arrives on the first connection (%s)", first)
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(release)
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the stream open across the connection's end ended with %v, want a normal end", err)
	}
}
