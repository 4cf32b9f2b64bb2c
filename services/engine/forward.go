package engine

import (
	"context"
	"errors"
	"io"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A run lives on the engine replica that holds its session's lease. Calls
// that only make sense on that replica (Attach, Approve, Steer, Abort,
// RetryNow) may arrive at any replica behind a load balancer; the replica
// that gets one for a run another replica owns passes it on, over gRPC,
// to the owner's advertised address, and relays the answer. A forwarded
// call carries forwardedHeader, and a replica never forwards such a call
// again: when the lease moved meanwhile, the call is answered where it
// landed, so a call is forwarded at most once.

// forwardedHeader marks a call one replica forwarded to another; its value
// is the forwarding replica's address, for logs.
const forwardedHeader = "penguin-forwarded-by"

// Owners tells which replica runs a session's task.
type Owners interface {
	// Owner returns the advertised address of the replica that holds a
	// live lease on the session, and whether that replica is another
	// one. A session without a live lease is this replica's to serve.
	Owner(ctx context.Context, sessionID string) (addr string, remote bool, err error)
}

// Peers reaches other engine replicas.
type Peers interface {
	// Peer returns a client for the replica at addr, with the cluster's
	// token; clients are cached by address.
	Peer(addr string) (penguinv1.EngineServiceClient, error)
}

// ForwardObserver counts forwarded calls by method and resulting code;
// nil counts nothing.
type ForwardObserver func(method string, code codes.Code)

// Forwarding configures how a Server reaches the owners of runs.
type Forwarding struct {
	// Owners and Peers are required: without them nothing is forwarded.
	Owners Owners
	Peers  Peers
	// Self is this replica's advertised address, sent with forwarded
	// calls so the owner's logs show where they came from.
	Self string
	// Observe, when set, counts the forwarded calls.
	Observe ForwardObserver
}

// Option configures a Server.
type Option func(*Server)

// WithGuard makes the server check every call's access with g.
func WithGuard(g *access.Guard) Option {
	return func(s *Server) { s.guard = g }
}

// WithForwarding makes the server pass calls for runs other replicas own
// to those replicas.
func WithForwarding(f Forwarding) Option {
	return func(s *Server) {
		if f.Owners != nil && f.Peers != nil {
			s.fwd = &f
		}
	}
}

// peerFor returns a client for the replica that owns the session's run,
// or nil when this replica must answer the call itself.
func (s *Server) peerFor(ctx context.Context, id string) (penguinv1.EngineServiceClient, string, error) {
	if s.fwd == nil || forwarded(ctx) {
		return nil, "", nil
	}
	addr, remote, err := s.fwd.Owners.Owner(ctx, id)
	if err != nil || !remote {
		// Without an answer from the store the call is tried here: the
		// session layer reports what it knows.
		return nil, "", nil
	}
	peer, err := s.fwd.Peers.Peer(addr)
	if err != nil {
		return nil, addr, status.Errorf(codes.Unavailable, "session %s runs on the engine replica at %s, which cannot be dialed: %v", id, addr, err)
	}
	return peer, addr, nil
}

// forwarded reports whether the call was forwarded by another replica.
func forwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedHeader)) > 0
}

// forwardContext is ctx (its deadline, cancellation and trace) with the
// forwarding mark and the caller's own credential as its outgoing
// metadata (access.Forward): the owner checks the call as the caller's,
// and the peer connection's service token lends it no power.
func (s *Server) forwardContext(ctx context.Context) context.Context {
	return access.Forward(ctx, forwardedHeader, s.fwd.Self)
}

// relayed turns the owner's answer into this call's: its status as it
// is, except that an owner that cannot be reached is explained.
func (s *Server) relayed(method, id, addr string, err error) error {
	code := status.Code(err)
	if s.fwd.Observe != nil {
		s.fwd.Observe(method, code)
	}
	if err == nil {
		return nil
	}
	if code == codes.Unavailable {
		return status.Errorf(codes.Unavailable, "session %s runs on the engine replica at %s, which cannot be reached (%s); if that replica is gone, its lease on the session runs out shortly and the session can run again on any replica",
			id, addr, status.Convert(err).Message())
	}
	return err
}

// forward passes a unary call for session id on to the replica that owns
// its run, through call (a method of the client, such as
// penguinv1.EngineServiceClient.Steer). It reports false when this
// replica must answer the call itself.
func forward[Req, Resp any](ctx context.Context, s *Server, method, id string, req Req,
	call func(penguinv1.EngineServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, bool, error) {
	var zero Resp
	peer, addr, err := s.peerFor(ctx, id)
	if err != nil {
		return zero, true, err
	}
	if peer == nil {
		return zero, false, nil
	}
	resp, err := call(peer, s.forwardContext(ctx), req)
	return resp, true, s.relayed(method, id, addr, err)
}

// forwardAttach relays the owner's Attach stream.
func (s *Server) forwardAttach(peer penguinv1.EngineServiceClient, addr string, req *penguinv1.AttachRequest, stream grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
	in, err := peer.Attach(s.forwardContext(stream.Context()), req)
	if err != nil {
		return s.relayed("Attach", req.GetSessionId(), addr, err)
	}
	for {
		resp, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return s.relayed("Attach", req.GetSessionId(), addr, nil)
		}
		if err != nil {
			return s.relayed("Attach", req.GetSessionId(), addr, err)
		}
		if err := stream.Send(resp); err != nil {
			// This caller went away; its stream's error is the answer.
			return err
		}
	}
}
