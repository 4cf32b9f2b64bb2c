package grpcserver_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// watchingAuth is an Authenticator, Authorizer and StreamWatcher as the
// engine's access.Guard is: the caller is named by the "who" metadata
// ("user", whose access can end, or "service", whose cannot), a request
// for the model "forbidden" is refused, and a user's stream is ended when
// revoke is closed.
type watchingAuth struct {
	revoke  chan struct{}
	watched atomic.Int32
}

type whoKey struct{}

func (a *watchingAuth) Authenticate(ctx context.Context, _ string) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	who := md.Get("who")
	if len(who) != 1 || who[0] != "user" && who[0] != "service" {
		return nil, status.Error(codes.Unauthenticated, "who are you")
	}
	return context.WithValue(ctx, whoKey{}, who[0]), nil
}

func (a *watchingAuth) Authorize(_ context.Context, _ string, req any) error {
	if r, ok := req.(*penguinv1.StreamGenerateRequest); ok && r.GetModel().GetModelId() == "forbidden" {
		return status.Error(codes.PermissionDenied, "not yours")
	}
	return nil
}

func (a *watchingAuth) Watches(ctx context.Context) bool { return ctx.Value(whoKey{}) == "user" }

func (a *watchingAuth) WatchStream(ctx context.Context, _ string, _ any) error {
	a.watched.Add(1)
	select {
	case <-a.revoke:
		return status.Error(codes.PermissionDenied, "you no longer have access")
	case <-ctx.Done():
		return nil
	}
}

// TestStreamsWatchedOnlyWhenAccessCanEnd checks, on both transports, that
// a stream's first request is authorized whoever calls, that a caller
// whose access can end (a user) has the stream watched and cut when it
// does, and that a caller whose access cannot (the service token's, as
// the engine's calls to the other services) has no watch started.
func TestStreamsWatchedOnlyWhenAccessCanEnd(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			auth := &watchingAuth{revoke: make(chan struct{})}
			sent := make(chan struct{}, 2)
			r := start(t, grpcserver.Options{}, func(s *grpcserver.Server) {
				s.SetAuthenticator(auth)
				penguinv1.RegisterLLMServiceServer(s, &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
					if err := s.Send(&penguinv1.StreamGenerateResponse{}); err != nil {
						return err
					}
					sent <- struct{}{}
					if who := s.Context().Value(whoKey{}); who == "user" {
						// Until the watch cuts the stream.
						<-s.Context().Done()
						return s.Context().Err()
					}
					return nil
				}})
			})
			llm := penguinv1.NewLLMServiceClient(r.via(tr))
			ctx := testkit.Context(t, 30*time.Second)
			as := func(who string) context.Context { return metadata.AppendToOutgoingContext(ctx, "who", who) }
			// call opens a stream and receives until it ends.
			call := func(ctx context.Context, model string) (int, error) {
				stream, err := llm.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{ModelId: model}})
				if err != nil {
					return 0, err
				}
				n := 0
				for {
					_, err := stream.Recv()
					if errors.Is(err, io.EOF) {
						return n, nil
					}
					if err != nil {
						return n, err
					}
					n++
				}
			}

			for _, who := range []string{"user", "service"} {
				if _, err := call(as(who), "forbidden"); status.Code(err) != codes.PermissionDenied {
					t.Errorf("%s, a forbidden request: %v, want PermissionDenied", who, err)
				}
			}
			if _, err := call(ctx, "m"); status.Code(err) != codes.Unauthenticated {
				t.Errorf("nobody: %v, want Unauthenticated", err)
			}
			if n, err := call(as("service"), "m"); n != 1 || err != nil {
				t.Errorf("service: %d messages, %v; want 1 and a clean end", n, err)
			}
			if w := auth.watched.Load(); w != 0 {
				t.Errorf("%d watches started for callers whose access cannot end", w)
			}
			go func() {
				<-sent
				<-sent // the service's, then the user's
				close(auth.revoke)
			}()
			if n, err := call(as("user"), "m"); n != 1 || status.Code(err) != codes.PermissionDenied {
				t.Errorf("user, access revoked: %d messages, %v; want 1 and PermissionDenied", n, err)
			}
			if w := auth.watched.Load(); w != 1 {
				t.Errorf("%d watches started for the user's stream, want 1", w)
			}
		})
	}
}
