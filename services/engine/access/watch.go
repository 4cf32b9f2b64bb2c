package access

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultRecheck is how often an open stream's access is checked again
// when [Options] sets no Recheck: the longest a stream goes on after its
// caller lost access through another replica, or by a change made to the
// store directly.
const DefaultRecheck = 10 * time.Second

// endsAccess are the audit log's actions after which someone may have
// lost access: each is recorded once the change is in the store, so the
// record is the moment to check the open streams again.
var endsAccess = map[string]bool{
	"sign_out":            true,
	"password.change":     true,
	"user.update":         true,
	"user.reset_password": true,
	"user.delete":         true,
	"member.set":          true,
	"member.remove":       true,
	"project.delete":      true,
	"token.revoke":        true,
}

// changes tells the streams this replica serves that access may have
// changed: a channel closed (and replaced) at each change.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns the channel the next change closes.
func (c *changes) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// changed wakes every stream waiting for a change.
func (c *changes) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Watches reports whether the caller of ctx is one whose access can end
// while the server runs (a user's): not the operator's, nor a local
// server's implicit user's, nor an anonymous caller's, which the servers'
// interceptor then does not watch (grpcserver.StreamWatcher).
func (g *Guard) Watches(ctx context.Context) bool {
	c, ok := CallerFrom(ctx)
	return ok && !c.Operator && !c.Local && c.UserID != ""
}

// WatchStream keeps an open stream's access under watch (the
// grpcserver.StreamWatcher of the engine's server): a stream is
// authorized when it opens, but Attach, WatchSessions and Run stay open
// for as long as the client likes, and a caller who has lost access must
// stop receiving. The call's credential and its first request are checked
// again, exactly as a new call would be (Authenticate, then Authorize),
// at once whenever this replica records a change that can end someone's
// access (endsAccess), and every Recheck in any case, for changes made
// through another replica. It returns the error the stream ends with:
// the check's Unauthenticated (a revoked or expired token, a sign-in
// ended, an account disabled or deleted), or PermissionDenied for access
// to the request's session or project that has ended (where a new call
// would hear NotFound: the caller saw the thing until now). A check the
// store cannot answer leaves the stream open until the next. It returns
// nil when ctx ends, and at once for a caller Watches says is not
// watched.
func (g *Guard) WatchStream(ctx context.Context, fullMethod string, req any) error {
	if !g.Watches(ctx) {
		return nil
	}
	tick := time.NewTicker(g.recheckEvery)
	defer tick.Stop()
	wake := g.changes.wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
		// Taken before the check, so that a change made while it runs
		// wakes the next one.
		wake = g.changes.wait()
		err := g.checkAgain(ctx, fullMethod, req)
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.Unauthenticated:
			return err
		case codes.PermissionDenied, codes.NotFound:
			return status.Error(codes.PermissionDenied, "you no longer have access to what this stream shows")
		}
	}
}

// checkAgain checks a call as if it were made now.
func (g *Guard) checkAgain(ctx context.Context, fullMethod string, req any) error {
	now, err := g.Authenticate(ctx, fullMethod)
	if err != nil {
		return err
	}
	return g.Authorize(now, fullMethod, req)
}
