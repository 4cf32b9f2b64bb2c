// Package access is the one place that decides who a caller is and what
// they may do (docs/decisions.md, "Projects and who may see what").
//
// A [Guard] resolves the credentials of every call (the gRPC interceptor
// of package grpcserver calls [Guard.Authenticate]; the HTTP gateway
// passes its client's credentials on in the same metadata) into a
// [Caller] kept in the call's context, and answers one question for the
// handlers: may this caller read, write or own project P ([Guard.Check])?
// Handlers never look at roles, scopes or tokens themselves.
//
// The answer never leaks: a project (and anything in it) that the caller
// may not read is reported exactly as if it did not exist (NotFound);
// PermissionDenied is kept for what the caller can see but not change.
//
// # Callers
//
//   - A user, through a login session (signed in with a password or an
//     identity provider) or a personal access token, which may be
//     read-only. Admins manage users; they read only the projects they
//     belong to, like everyone else.
//   - The operator, through the server's service token (PENGUIN_AUTH_TOKEN):
//     the credential the services use between themselves, which may act on
//     every project. A call one replica forwards to another carries the
//     original caller's credential, so it never gains the operator's power.
//   - In local mode (a server on loopback with no sign-in configured) a
//     call without credentials, or with the service token, is the implicit
//     user AdminUser, who owns the default project: a laptop works as it
//     always did, and moving to team mode keeps every session, owned by
//     the admin.
package access

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// DefaultProject is the project of everything created without one:
// store.DefaultProject, named here for the handlers that use this package.
const DefaultProject = store.DefaultProject

// Mode says how a server decides who its callers are.
type Mode int

const (
	// Local is a server on loopback without sign-in: calls without
	// credentials are the implicit user AdminUser.
	Local Mode = iota
	// Team is every other server: callers sign in or present a token.
	Team
)

func (m Mode) String() string {
	if m == Team {
		return "team"
	}
	return "local"
}

// Level is what a caller wants to do with a project.
type Level int

const (
	// Read sees the project's sessions and the like.
	Read Level = iota
	// Write creates, runs, steers, approves, forks and deletes them.
	Write
	// Own manages the project's members, reads its audit log and deletes
	// it.
	Own
)

func (l Level) String() string {
	switch l {
	case Write:
		return "write"
	case Own:
		return "own"
	}
	return "read"
}

// Caller is who a call acts as.
type Caller struct {
	// UserID is the user; empty for the operator.
	UserID string
	// Admin users manage users.
	Admin bool
	// Operator is the service token's caller, who may act on every
	// project.
	Operator bool
	// Local is the implicit user of a local server.
	Local bool
	// Scope limits the credential: a read-only token reads only.
	Scope store.Scope
	// credential is the secret the call presented, passed on when the
	// call is forwarded to another replica; never logged.
	credential string
	// sessionDigest is the digest of the login session the call was made
	// with, when it was made with one (for SignOut).
	sessionDigest []byte
}

// Actor names the caller in the audit log and in logs.
func (c *Caller) Actor() string {
	if c.Operator {
		return "(operator)"
	}
	return c.UserID
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of ctx, or false when no Guard resolved
// one (a call that never went through the interceptor).
func CallerFrom(ctx context.Context) (*Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(*Caller)
	return c, ok
}

// Errors of the checks. Hidden is NotFound and says nothing about whether
// the thing exists; denied is PermissionDenied.
var (
	errNoCaller = status.Error(codes.Unauthenticated, "the call carries no resolved caller")
)

// Hidden returns the NotFound error for a thing the caller may not see,
// in the same words as when it does not exist: what says "session",
// "project" and so on, and id its id.
func Hidden(what, id string) error {
	return status.Errorf(codes.NotFound, "%s %s not found", what, id)
}

// denied is the PermissionDenied error for a level the caller lacks on a
// project they can see.
func denied(c *Caller, project string, lvl Level) error {
	switch {
	case c.Scope == store.ScopeRead && lvl > Read:
		return status.Errorf(codes.PermissionDenied, "this token is read-only; project %s needs a full token to %s", project, lvl)
	case lvl == Own:
		return status.Errorf(codes.PermissionDenied, "only an owner of project %s may do this", project)
	}
	return status.Errorf(codes.PermissionDenied, "you may not %s project %s", lvl, project)
}

// Memberships is what a Guard reads to decide: the store's memberships.
type Memberships interface {
	GetMember(ctx context.Context, projectID, userID string) (store.Member, error)
	MembershipsOf(ctx context.Context, userID string) ([]store.Member, error)
}

// check decides lvl on project for c from the caller's membership: hidden
// (with what and id naming the thing asked for) when c may not read it.
func check(ctx context.Context, m Memberships, c *Caller, project string, lvl Level, what, id string) error {
	if c.Operator {
		return nil
	}
	mem, err := m.GetMember(ctx, project, c.UserID)
	if err != nil {
		if status.Code(storeStatus(err)) == codes.NotFound {
			return Hidden(what, id)
		}
		return storeStatus(err)
	}
	return checkMember(c, project, mem, lvl)
}

// checkMember is check for a caller who is not the operator, once their
// membership mem of project is read.
func checkMember(c *Caller, project string, mem store.Member, lvl Level) error {
	if lvl > Read && c.Scope == store.ScopeRead {
		return denied(c, project, lvl)
	}
	if lvl == Own && mem.Role != store.RoleOwner {
		return denied(c, project, lvl)
	}
	return nil
}

// storeStatus maps a store error to a status, for the few the checks
// meet.
func storeStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case isErr(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case isErr(err, store.ErrUnavailable):
		return status.Error(codes.Unavailable, "the store cannot be reached; try again")
	case isErr(err, store.ErrConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	case isErr(err, store.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, "internal error while checking access; see the engine's log")
}
