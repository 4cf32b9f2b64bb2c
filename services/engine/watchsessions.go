package engine

import (
	"context"
	"errors"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/sessionwatch"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SessionWatcher is what WatchSessions needs of the session runtime; a
// Sessions without it answers Unimplemented.
type SessionWatcher interface {
	WatchSessions(ctx context.Context, snapshotSize int, send func(*penguinv1.WatchSessionsResponse) error) error
}

// WatchSessions streams the session list and its changes.
func (s *Server) WatchSessions(req *penguinv1.WatchSessionsRequest, stream grpc.ServerStreamingServer[penguinv1.WatchSessionsResponse]) error {
	w, ok := s.sessions.(SessionWatcher)
	if !ok {
		return status.Error(codes.Unimplemented, "this engine does not watch its sessions")
	}
	if req.GetSnapshotSize() < 0 {
		return status.Error(codes.InvalidArgument, "snapshot_size must not be negative")
	}
	ctx := stream.Context()
	err := w.WatchSessions(ctx, int(req.GetSnapshotSize()), stream.Send)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sessionwatch.ErrFellBehind):
		return status.Error(codes.ResourceExhausted, err.Error())
	default:
		return s.status(ctx, err)
	}
}
