package engine

import (
	"context"
	"errors"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
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
	err := w.WatchSessions(ctx, int(req.GetSnapshotSize()), s.visibleTo(ctx, stream.Send))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sessionwatch.ErrFellBehind):
		return status.Error(codes.ResourceExhausted, err.Error())
	default:
		return s.status(ctx, err)
	}
}

// visibleTo filters a watch's events down to what the caller of ctx may
// see: changes of sessions in projects they may read (checked at each
// change, so a membership that ends stops the changes at once), and the
// deletion of a session only when this watch showed it before.
func (s *Server) visibleTo(ctx context.Context, send func(*penguinv1.WatchSessionsResponse) error) func(*penguinv1.WatchSessionsResponse) error {
	if s.guard == nil {
		return send
	}
	shown := map[string]bool{}
	return func(ev *penguinv1.WatchSessionsResponse) error {
		switch e := ev.GetEvent().(type) {
		case *penguinv1.WatchSessionsResponse_Session:
			sess := e.Session.GetSession()
			if err := s.guard.Check(ctx, sess.GetProjectId(), access.Read, "session", sess.GetSessionId()); err != nil {
				if status.Code(err) == codes.NotFound {
					return nil
				}
				return err
			}
			shown[sess.GetSessionId()] = true
		case *penguinv1.WatchSessionsResponse_DeletedSessionId:
			if !shown[e.DeletedSessionId] {
				return nil
			}
			delete(shown, e.DeletedSessionId)
		}
		return send(ev)
	}
}
