package store

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// The ownership model's records: who may sign in, which projects exist,
// who belongs to which, the credentials users hold, and what they did.
// Package access decides with them who may do what; the store only keeps
// them (docs/decisions.md, "Projects and who may see what").

const (
	// DefaultProject is the project every session belongs to unless it
	// was created in another one, and the project every row that predates
	// projects moved into. The first start creates it, owned by
	// AdminUser.
	DefaultProject = "default"
	// AdminUser is the account the first start creates: the implicit
	// user of a local server, and the seeded administrator of a team one.
	AdminUser = "admin"
)

// Role is a user's role in a project.
type Role string

const (
	// RoleOwner may do everything in the project, and manage its members.
	RoleOwner Role = "owner"
	// RoleMember may read and write the project's sessions and the like.
	RoleMember Role = "member"
)

// Valid reports whether r is a role the store keeps.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleMember }

// Scope limits what a personal access token may do.
type Scope string

const (
	// ScopeFull may do whatever its user may.
	ScopeFull Scope = "full"
	// ScopeRead may only read.
	ScopeRead Scope = "read"
)

// Valid reports whether s is a scope the store keeps.
func (s Scope) Valid() bool { return s == ScopeFull || s == ScopeRead }

// User is an account.
type User struct {
	// ID is the name the user signs in with; it never changes.
	ID string
	// Name is a display name; Email the address an identity provider
	// vouched for (empty for a local account without one).
	Name, Email string
	// PasswordHash is the encoded password hash (package access writes
	// and checks it); empty means the user cannot sign in with a password.
	PasswordHash string
	// Admin users manage users; they do not read other users' projects.
	Admin bool
	// Disabled users cannot sign in, and their tokens and sign-ins are
	// refused.
	Disabled bool
	// OIDCSubject is the "sub" of the identity provider's account linked
	// to this user, empty when none is; it is unique.
	OIDCSubject string
	// FailedSignIns counts wrong passwords since the last right one;
	// LockedUntil is when password sign-in opens again after too many.
	FailedSignIns int
	LockedUntil   time.Time
	// PasswordChangedAt is when the password was last set by its user;
	// zero while the password is one the server or an admin chose.
	PasswordChangedAt time.Time
	// CreatedAt is filled in by CreateUser.
	CreatedAt time.Time
}

// Project is a set of sessions and the things that go with them, shared
// by its members.
type Project struct {
	// ID names the project in API calls; it never changes.
	ID string
	// Name is a display name.
	Name string
	// CreatedAt is filled in by CreateProject.
	CreatedAt time.Time
}

// Member is one user's membership of one project.
type Member struct {
	ProjectID, UserID string
	Role              Role
	// CreatedAt is when the user joined; the store fills it in.
	CreatedAt time.Time
}

// AccessToken is a personal access token. The store keeps only the
// digest of its secret.
type AccessToken struct {
	// ID names the token for listing and revoking; it is not secret.
	ID     string
	UserID string
	// Name is what its user called it.
	Name string
	// Digest is the SHA-256 of the secret; unique.
	Digest []byte
	Scope  Scope
	// ExpiresAt is when it stops working; zero never.
	ExpiresAt time.Time
	// CreatedAt is filled in by CreateAccessToken; LastUsedAt by
	// TouchAccessToken.
	CreatedAt, LastUsedAt time.Time
}

// LoginSession is a browser's or a CLI's sign-in. The store keeps only
// the digest of its secret.
type LoginSession struct {
	Digest    []byte
	UserID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	// ID orders the records; the store assigns it.
	ID int64
	// At is when it happened; zero means now.
	At time.Time
	// Actor is the user who did it ("" for the operator's service token).
	Actor string
	// ProjectID is the project it concerns; empty for account events.
	ProjectID string
	// Action names what happened ("sign_in", "session.delete", ...);
	// Target what it happened to; Detail anything else worth keeping.
	// None of them ever holds a secret.
	Action, Target, Detail string
}

// SignInState is a sign-in with an identity provider between its start
// and the provider's answer: what the answer is checked against. It is
// single use (TakeSignInState deletes it) and short-lived.
type SignInState struct {
	// StateDigest is the SHA-256 of the "state" parameter; unique.
	StateDigest []byte
	// BindingDigest is the SHA-256 of the secret kept in the browser
	// that started the sign-in, so that only that browser completes it.
	BindingDigest []byte
	// Nonce goes into the ID token; Verifier is the PKCE code verifier.
	Nonce, Verifier string
	// Loopback, for a sign-in started by a command-line client, is the
	// http://127.0.0.1:PORT/... URL where that client listens for the
	// provider's answer; empty for a browser's sign-in.
	Loopback string
	// ExpiresAt is when the sign-in can no longer complete.
	ExpiresAt time.Time
}

// Teams keeps the ownership model's records. Errors wrap the store's
// sentinels: ErrNotFound for an unknown id, ErrConflict for an id (or
// token digest, or OIDC subject) that exists already, ErrInvalid for an
// argument the store refuses.
type Teams interface {
	// CreateUser creates u; CreatedAt is filled in.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns the user with the given id.
	GetUser(ctx context.Context, id string) (*User, error)
	// UserByOIDCSubject returns the user linked to an identity
	// provider's subject.
	UserByOIDCSubject(ctx context.Context, subject string) (*User, error)
	// ListUsers returns every user, by id.
	ListUsers(ctx context.Context) ([]*User, error)
	// UpdateUser replaces every field of an existing user but ID and
	// CreatedAt.
	UpdateUser(ctx context.Context, u *User) error
	// DeleteUser deletes a user with their memberships, tokens and
	// sign-ins.
	DeleteUser(ctx context.Context, id string) error

	// CreateProject creates p with owner as its first owner, atomically.
	CreateProject(ctx context.Context, p *Project, owner string) error
	// GetProject returns the project with the given id.
	GetProject(ctx context.Context, id string) (*Project, error)
	// ListProjects returns every project, by id.
	ListProjects(ctx context.Context) ([]*Project, error)
	// DeleteProject deletes an empty project with its memberships: one
	// that still has sessions is ErrConflict.
	DeleteProject(ctx context.Context, id string) error

	// SetMember adds a member to a project, or changes their role.
	// ErrNotFound when the project or the user does not exist.
	SetMember(ctx context.Context, m Member) error
	// RemoveMember ends a membership; ErrNotFound when there is none.
	RemoveMember(ctx context.Context, projectID, userID string) error
	// GetMember returns one membership; ErrNotFound when there is none.
	GetMember(ctx context.Context, projectID, userID string) (Member, error)
	// ListMembers returns a project's members, by user id.
	ListMembers(ctx context.Context, projectID string) ([]Member, error)
	// MembershipsOf returns a user's memberships, by project id.
	MembershipsOf(ctx context.Context, userID string) ([]Member, error)

	// CreateAccessToken stores t; CreatedAt is filled in.
	CreateAccessToken(ctx context.Context, t *AccessToken) error
	// AccessTokenByDigest returns the token with the given digest.
	AccessTokenByDigest(ctx context.Context, digest []byte) (*AccessToken, error)
	// TouchAccessToken records that a token was used now.
	TouchAccessToken(ctx context.Context, id string) error
	// ListAccessTokens returns a user's tokens, newest first.
	ListAccessTokens(ctx context.Context, userID string) ([]*AccessToken, error)
	// DeleteAccessToken revokes one of a user's tokens; ErrNotFound when
	// the user has no token with that id.
	DeleteAccessToken(ctx context.Context, userID, id string) error

	// CreateLoginSession stores s; CreatedAt is filled in.
	CreateLoginSession(ctx context.Context, s *LoginSession) error
	// LoginSessionByDigest returns the sign-in with the given digest.
	LoginSessionByDigest(ctx context.Context, digest []byte) (*LoginSession, error)
	// DeleteLoginSession ends one sign-in; ending one that is gone is
	// not an error.
	DeleteLoginSession(ctx context.Context, digest []byte) error
	// DeleteLoginSessionsOf ends every sign-in of a user.
	DeleteLoginSessionsOf(ctx context.Context, userID string) error

	// CreateSignInState stores a started sign-in, after deleting the
	// expired ones; ErrConflict when pending of them are open already.
	CreateSignInState(ctx context.Context, s *SignInState, pending int) error
	// TakeSignInState returns and deletes the started sign-in whose state
	// has the given digest; ErrNotFound when there is none (or another
	// call took it first).
	TakeSignInState(ctx context.Context, stateDigest []byte) (*SignInState, error)
	// PeekSignInState returns the started sign-in whose state has the
	// given digest without taking it; ErrNotFound when there is none.
	PeekSignInState(ctx context.Context, stateDigest []byte) (*SignInState, error)

	// AppendAudit adds a record to the audit log.
	AppendAudit(ctx context.Context, r AuditRecord) error
	// ListAudit returns the newest records about a project (or, for the
	// empty project, about accounts), newest first, at most limit
	// (DefaultPageSize when zero or less, capped at MaxPageSize), with an
	// ID below before when before is positive.
	ListAudit(ctx context.Context, projectID string, before int64, limit int) ([]AuditRecord, error)
	// PruneAudit deletes the records older than before (when not zero)
	// and all but the newest keep (when positive), and returns how many
	// it deleted.
	PruneAudit(ctx context.Context, keep int, before time.Time) (int64, error)
}

// nameRE is what user and project ids may be: short, lower-case, safe in
// a URL path and a log line.
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`) })

// CheckName reports whether id may name a user or a project (what says
// which), with an error that says what is allowed.
func CheckName(what, id string) error {
	if !nameRE().MatchString(id) {
		return fmt.Errorf("%w: %s %q: use 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalid, what, id)
	}
	return nil
}
