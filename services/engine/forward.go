package engine

import (
	"context"
	"errors"
	"io"
	"time"

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
	// Patience is how long an Attach waits for the lease of a replica
	// that cannot be reached to run out, so that it can follow the run
	// where it resumes; zero gives up at once. Set it a little above the
	// lease TTL.
	Patience time.Duration
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

// maxMoves bounds how often one Attach follows a run to its next owner:
// a rollout moves a run once or twice, and a run that keeps moving is
// better reported than chased.
const maxMoves = 8

// followRun serves an Attach: from this replica when it runs the session
// (or nobody does), else relayed from the owner. It follows the run when
// it moves, on one stream:
//   - The run's replica stops and hands the run over: its stream says
//     AWAITING_OWNER and ends UNAVAILABLE. The stream goes on from where
//     it was at the run's next owner, which may be this replica taking
//     the run over (Manager.Attach).
//   - The run's replica cannot be reached (it was killed, or its node
//     lost): the client is told AWAITING_OWNER (an event without a
//     number, as it is this replica's word, not the session's), and the
//     stream waits, up to Forwarding.Patience, for the dead replica's
//     lease to run out; then the run is taken over here or followed
//     where it went.
//
// A forwarded call is answered where it landed: the replica that
// forwarded it is the one that follows the run over.
func (s *Server) followRun(ctx context.Context, req *penguinv1.AttachRequest, send func(*penguinv1.RunEvent) error) error {
	id, after := req.GetSessionId(), req.GetAfterSequence()
	var last penguinv1.SessionState
	track := func(ev *penguinv1.RunEvent) error {
		after = max(after, ev.GetSequence())
		if st := ev.GetState(); st != nil {
			last = st.GetState()
		}
		return send(ev)
	}
	for moves := 0; ; moves++ {
		last = penguinv1.SessionState_SESSION_STATE_UNSPECIFIED
		from, err := s.attachOnce(ctx, id, after, req.GetUntilIdle(), track)
		handedOver := last == penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER
		if err == nil || forwarded(ctx) || moves == maxMoves || status.Code(err) != codes.Unavailable || (!handedOver && from == "") {
			return err
		}
		if !handedOver {
			// The owner could not be reached: wait for its lease to run
			// out (or for another replica to take the run), telling the
			// client why the stream is quiet.
			if err := track(awaitingOwner()); err != nil {
				return err
			}
			if !s.awaitNewOwner(ctx, id, from) {
				return err
			}
			continue
		}
		// The hand-over has let the lease go by now; a moment's pause
		// keeps a replica that cannot take the run from spinning.
		select {
		case <-ctx.Done():
			return s.status(ctx, ctx.Err())
		case <-time.After(time.Duration(moves+1) * 100 * time.Millisecond):
		}
	}
}

// awaitingOwner is the state event a relaying replica sends when the run's
// replica cannot be reached.
func awaitingOwner() *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{
		State:   penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER,
		Message: "the engine replica running the task cannot be reached; the run goes on on another replica once that replica's lease runs out",
	}}}
}

// awaitNewOwner waits, up to Forwarding.Patience, until the session's run
// is no longer owned by the replica at addr, and reports whether it moved.
func (s *Server) awaitNewOwner(ctx context.Context, id, addr string) bool {
	deadline := time.Now().Add(s.fwd.Patience)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
		owner, remote, err := s.fwd.Owners.Owner(ctx, id)
		if err == nil && (!remote || owner != addr) {
			return true
		}
	}
	return false
}

// attachOnce follows the session's events after a sequence number where
// the run is now: relayed from the replica that owns it, whose address it
// returns, or here.
func (s *Server) attachOnce(ctx context.Context, id string, after int64, untilIdle bool, send func(*penguinv1.RunEvent) error) (string, error) {
	peer, addr, err := s.peerFor(ctx, id)
	if err != nil {
		return addr, err
	}
	if peer == nil {
		if err := s.sessions.Attach(ctx, id, after, untilIdle, send); err != nil {
			return "", s.status(ctx, err)
		}
		return "", nil
	}
	in, err := peer.Attach(s.forwardContext(ctx), &penguinv1.AttachRequest{SessionId: id, AfterSequence: after, UntilIdle: untilIdle})
	if err != nil {
		return addr, s.relayed("Attach", id, addr, err)
	}
	for {
		resp, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return addr, s.relayed("Attach", id, addr, nil)
		}
		if err != nil {
			return addr, s.relayed("Attach", id, addr, err)
		}
		if err := send(resp.GetEvent()); err != nil {
			// This caller went away; its stream's error is the answer.
			return addr, err
		}
	}
}
