// Package fakeengine is an EngineService for tests of its clients (the HTTP
// gateway, the CLI): every method is a function field, so a test states only
// the behaviour it needs, and Start serves it over gRPC on a loopback port.
// Methods whose field is nil answer Unimplemented.
package fakeengine

import (
	"context"
	"net"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Engine is a scriptable EngineServiceServer.
type Engine struct {
	penguinv1.UnimplementedEngineServiceServer
	CreateSessionFunc func(context.Context, *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error)
	GetSessionFunc    func(context.Context, *penguinv1.GetSessionRequest) (*penguinv1.GetSessionResponse, error)
	ListSessionsFunc  func(context.Context, *penguinv1.ListSessionsRequest) (*penguinv1.ListSessionsResponse, error)
	DeleteSessionFunc func(context.Context, *penguinv1.DeleteSessionRequest) (*penguinv1.DeleteSessionResponse, error)
	RunFunc           func(*penguinv1.RunRequest, grpc.ServerStreamingServer[penguinv1.RunResponse]) error
	AttachFunc        func(*penguinv1.AttachRequest, grpc.ServerStreamingServer[penguinv1.AttachResponse]) error
	ApproveFunc       func(context.Context, *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error)
	AbortFunc         func(context.Context, *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error)
	SteerFunc         func(context.Context, *penguinv1.SteerRequest) (*penguinv1.SteerResponse, error)
	GetHistoryFunc    func(context.Context, *penguinv1.GetHistoryRequest) (*penguinv1.GetHistoryResponse, error)
	ExportTraceFunc   func(*penguinv1.ExportTraceRequest, grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error
	ForkSessionFunc   func(context.Context, *penguinv1.ForkSessionRequest) (*penguinv1.ForkSessionResponse, error)
	RetryNowFunc      func(context.Context, *penguinv1.RetryNowRequest) (*penguinv1.RetryNowResponse, error)
	CompactFunc       func(context.Context, *penguinv1.CompactRequest) (*penguinv1.CompactResponse, error)
	WatchSessionsFunc func(*penguinv1.WatchSessionsRequest, grpc.ServerStreamingServer[penguinv1.WatchSessionsResponse]) error
	UpdateSessionFunc func(context.Context, *penguinv1.UpdateSessionRequest) (*penguinv1.UpdateSessionResponse, error)
}

// CreateSession calls CreateSessionFunc.
func (e *Engine) CreateSession(ctx context.Context, r *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
	if e.CreateSessionFunc == nil {
		return e.UnimplementedEngineServiceServer.CreateSession(ctx, r)
	}
	return e.CreateSessionFunc(ctx, r)
}

// GetSession calls GetSessionFunc.
func (e *Engine) GetSession(ctx context.Context, r *penguinv1.GetSessionRequest) (*penguinv1.GetSessionResponse, error) {
	if e.GetSessionFunc == nil {
		return e.UnimplementedEngineServiceServer.GetSession(ctx, r)
	}
	return e.GetSessionFunc(ctx, r)
}

// ListSessions calls ListSessionsFunc.
func (e *Engine) ListSessions(ctx context.Context, r *penguinv1.ListSessionsRequest) (*penguinv1.ListSessionsResponse, error) {
	if e.ListSessionsFunc == nil {
		return e.UnimplementedEngineServiceServer.ListSessions(ctx, r)
	}
	return e.ListSessionsFunc(ctx, r)
}

// DeleteSession calls DeleteSessionFunc.
func (e *Engine) DeleteSession(ctx context.Context, r *penguinv1.DeleteSessionRequest) (*penguinv1.DeleteSessionResponse, error) {
	if e.DeleteSessionFunc == nil {
		return e.UnimplementedEngineServiceServer.DeleteSession(ctx, r)
	}
	return e.DeleteSessionFunc(ctx, r)
}

// Run calls RunFunc.
func (e *Engine) Run(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
	if e.RunFunc == nil {
		return e.UnimplementedEngineServiceServer.Run(r, s)
	}
	return e.RunFunc(r, s)
}

// Attach calls AttachFunc.
func (e *Engine) Attach(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
	if e.AttachFunc == nil {
		return e.UnimplementedEngineServiceServer.Attach(r, s)
	}
	return e.AttachFunc(r, s)
}

// Approve calls ApproveFunc.
func (e *Engine) Approve(ctx context.Context, r *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
	if e.ApproveFunc == nil {
		return e.UnimplementedEngineServiceServer.Approve(ctx, r)
	}
	return e.ApproveFunc(ctx, r)
}

// Abort calls AbortFunc.
func (e *Engine) Abort(ctx context.Context, r *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
	if e.AbortFunc == nil {
		return e.UnimplementedEngineServiceServer.Abort(ctx, r)
	}
	return e.AbortFunc(ctx, r)
}

// Steer calls SteerFunc.
func (e *Engine) Steer(ctx context.Context, r *penguinv1.SteerRequest) (*penguinv1.SteerResponse, error) {
	if e.SteerFunc == nil {
		return e.UnimplementedEngineServiceServer.Steer(ctx, r)
	}
	return e.SteerFunc(ctx, r)
}

// GetHistory calls GetHistoryFunc.
func (e *Engine) GetHistory(ctx context.Context, r *penguinv1.GetHistoryRequest) (*penguinv1.GetHistoryResponse, error) {
	if e.GetHistoryFunc == nil {
		return e.UnimplementedEngineServiceServer.GetHistory(ctx, r)
	}
	return e.GetHistoryFunc(ctx, r)
}

// ExportTrace calls ExportTraceFunc.
func (e *Engine) ExportTrace(r *penguinv1.ExportTraceRequest, s grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error {
	if e.ExportTraceFunc == nil {
		return e.UnimplementedEngineServiceServer.ExportTrace(r, s)
	}
	return e.ExportTraceFunc(r, s)
}

// ForkSession calls ForkSessionFunc.
func (e *Engine) ForkSession(ctx context.Context, r *penguinv1.ForkSessionRequest) (*penguinv1.ForkSessionResponse, error) {
	if e.ForkSessionFunc == nil {
		return e.UnimplementedEngineServiceServer.ForkSession(ctx, r)
	}
	return e.ForkSessionFunc(ctx, r)
}

// RetryNow calls RetryNowFunc.
func (e *Engine) RetryNow(ctx context.Context, r *penguinv1.RetryNowRequest) (*penguinv1.RetryNowResponse, error) {
	if e.RetryNowFunc == nil {
		return e.UnimplementedEngineServiceServer.RetryNow(ctx, r)
	}
	return e.RetryNowFunc(ctx, r)
}

// Compact calls CompactFunc.
func (e *Engine) Compact(ctx context.Context, r *penguinv1.CompactRequest) (*penguinv1.CompactResponse, error) {
	if e.CompactFunc == nil {
		return e.UnimplementedEngineServiceServer.Compact(ctx, r)
	}
	return e.CompactFunc(ctx, r)
}

// WatchSessions calls WatchSessionsFunc.
func (e *Engine) WatchSessions(r *penguinv1.WatchSessionsRequest, s grpc.ServerStreamingServer[penguinv1.WatchSessionsResponse]) error {
	if e.WatchSessionsFunc == nil {
		return e.UnimplementedEngineServiceServer.WatchSessions(r, s)
	}
	return e.WatchSessionsFunc(r, s)
}

// Start serves e on a loopback port and returns a client connected to it.
// Both are closed when the test ends.
func Start(t testing.TB, e *Engine) penguinv1.EngineServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	penguinv1.RegisterEngineServiceServer(srv, e)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return penguinv1.NewEngineServiceClient(conn)
}

// UpdateSession calls UpdateSessionFunc.
func (e *Engine) UpdateSession(ctx context.Context, r *penguinv1.UpdateSessionRequest) (*penguinv1.UpdateSessionResponse, error) {
	if e.UpdateSessionFunc == nil {
		return e.UnimplementedEngineServiceServer.UpdateSession(ctx, r)
	}
	return e.UpdateSessionFunc(ctx, r)
}
