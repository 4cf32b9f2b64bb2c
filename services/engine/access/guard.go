package access

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/audit"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// CredentialHeader is the metadata key through which a front (the HTTP
// gateway) or a replica forwarding a call presents the credential of the
// client it speaks for. When present, even empty, it is the call's
// credential and the connection's own "authorization" is ignored: a
// front's or a replica's service token never lends its power to the
// client's call. Presenting it gains nothing a client could not get by
// sending the same value as its bearer token.
const CredentialHeader = "penguin-credential"

// Prefixes of the secrets the Guard issues, so that a credential says what
// it is (and a leaked one is easy to find in a scan).
const (
	tokenPrefix   = "pgn_pat_"
	sessionPrefix = "pgn_ses_"
)

// touchEvery is how often a token's last use is written (and, at most
// once per auditTokenUseEvery, noted in the audit log): a token used in a
// loop must not turn every call into a write.
const (
	touchEvery          = time.Minute
	auditTokenUseEvery  = time.Hour
	defaultLoginSession = 7 * 24 * time.Hour
)

// Options configure a Guard.
type Options struct {
	// Mode is Local or Team.
	Mode Mode
	// ServiceToken is the operator's token; empty when none is set.
	ServiceToken string
	// Logger receives refused sign-ins and store failures; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Audit bounds the audit log (its Logger and Now default to the
	// Guard's).
	Audit audit.Options
	// Recheck is how often an open stream's access is checked again
	// (WatchStream); zero means DefaultRecheck.
	Recheck time.Duration
}

// Guard resolves callers and checks their access. Create it with [New].
type Guard struct {
	st      store.Store
	mode    Mode
	service [sha256.Size]byte
	hasSvc  bool
	log     *slog.Logger
	now     func() time.Time
	rec     *audit.Recorder
	// recheckEvery and changes drive WatchStream.
	recheckEvery time.Duration
	changes      changes
}

// New returns a Guard over the store's users, tokens and memberships.
func New(st store.Store, opts Options) *Guard {
	g := &Guard{st: st, mode: opts.Mode, log: logger.OrDiscard(opts.Logger), now: opts.Now, recheckEvery: opts.Recheck}
	if g.now == nil {
		g.now = time.Now
	}
	if g.recheckEvery <= 0 {
		g.recheckEvery = DefaultRecheck
	}
	ao := opts.Audit
	if ao.Logger == nil {
		ao.Logger = g.log
	}
	if ao.Now == nil {
		ao.Now = g.now
	}
	g.rec = audit.New(st, ao)
	if opts.ServiceToken != "" {
		g.service, g.hasSvc = sha256.Sum256([]byte(opts.ServiceToken)), true
	}
	return g
}

// Mode returns the server's mode.
func (g *Guard) Mode() Mode { return g.mode }

// userMethods are the gRPC services and methods a user (anyone but the
// operator) may call; everything else, such as the environment service
// and model generation, is the services' own business and needs the
// service token.
var userMethods = []string{
	"/penguin.v1.EngineService/",
	"/penguin.v1.AgentService/",
	"/penguin.v1.ScheduleService/",
	"/penguin.v1.AuthService/",
	"/penguin.v1.UserService/",
	"/penguin.v1.ProjectService/",
	"/penguin.v1.TokenService/",
	"/penguin.v1.LLMService/ListModels",
	"/penguin.v1.LLMService/ListProviders",
	"/penguin.v1.LLMService/AddProvider",
	"/penguin.v1.LLMService/UpdateProvider",
	"/penguin.v1.LLMService/RemoveProvider",
	"/penguin.v1.LLMService/TestProvider",
	"/grpc.reflection.",
}

// publicMethods may be called without credentials.
var publicMethods = map[string]bool{
	"/penguin.v1.AuthService/SignIn":             true,
	"/penguin.v1.AuthService/GetSignInOptions":   true,
	"/penguin.v1.AuthService/BeginOIDCSignIn":    true,
	"/penguin.v1.AuthService/CompleteOIDCSignIn": true,
}

// UserMayCall reports whether a user may call the gRPC method fullMethod
// at all (their access to what it touches is checked by its handler).
func UserMayCall(fullMethod string) bool {
	for _, p := range userMethods {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}

// Authenticate resolves the caller of an incoming gRPC call and returns
// ctx carrying it ([CallerFrom]). It is the auth step of every gRPC
// server that has a Guard: Unauthenticated for missing or wrong
// credentials, PermissionDenied for a user calling a method that is not
// theirs.
func (g *Guard) Authenticate(ctx context.Context, fullMethod string) (context.Context, error) {
	c, err := g.resolve(ctx, incomingCredential(ctx))
	if err != nil && publicMethods[fullMethod] {
		// Signing in is how a caller gets credentials: without (or
		// with stale) ones, the call is anonymous, and its handler
		// checks what it is given.
		return WithCaller(ctx, &Caller{}), nil
	}
	if err != nil {
		return nil, err
	}
	if !c.Operator && !c.Local && !UserMayCall(fullMethod) {
		return nil, status.Errorf(codes.PermissionDenied, "%s is for the services themselves; it needs the service token", fullMethod)
	}
	return WithCaller(ctx, c), nil
}

// incomingCredential is the call's credential: the CredentialHeader when
// present, else the bearer token of "authorization"; present says whether
// any was given.
func incomingCredential(ctx context.Context) (cred string) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(CredentialHeader); len(v) > 0 {
		return v[0]
	}
	if v := md.Get("authorization"); len(v) > 0 {
		if tok, ok := strings.CutPrefix(v[0], "Bearer "); ok {
			return tok
		}
		if tok, ok := strings.CutPrefix(v[0], "bearer "); ok {
			return tok
		}
		return v[0]
	}
	return ""
}

// isService reports whether cred is the service token, in time
// independent of both.
func (g *Guard) isService(cred string) bool {
	if !g.hasSvc {
		return false
	}
	d := sha256.Sum256([]byte(cred))
	return subtle.ConstantTimeCompare(d[:], g.service[:]) == 1
}

// unauthenticated is the answer for missing or wrong credentials; it does
// not say which credential was wrong or why.
func (g *Guard) unauthenticated() error {
	if g.mode == Local {
		return status.Error(codes.Unauthenticated, "a valid bearer token is required")
	}
	return status.Error(codes.Unauthenticated, "sign in, or present a personal access token as a bearer token")
}

// resolve turns a credential into a caller.
func (g *Guard) resolve(ctx context.Context, cred string) (*Caller, error) {
	local := func() *Caller {
		return &Caller{UserID: store.AdminUser, Admin: true, Local: true, Scope: store.ScopeFull, credential: cred}
	}
	switch {
	case cred == "" && g.mode == Local && !g.hasSvc:
		return local(), nil
	case cred == "":
		return nil, g.unauthenticated()
	case g.isService(cred) && g.mode == Local:
		return local(), nil
	case g.isService(cred):
		return &Caller{Operator: true, Scope: store.ScopeFull, credential: cred}, nil
	case strings.HasPrefix(cred, tokenPrefix):
		return g.byToken(ctx, cred)
	case strings.HasPrefix(cred, sessionPrefix):
		return g.byLoginSession(ctx, cred)
	}
	return nil, g.unauthenticated()
}

func digestOf(secret string) []byte {
	d := sha256.Sum256([]byte(secret))
	return d[:]
}

// byToken resolves a personal access token.
func (g *Guard) byToken(ctx context.Context, cred string) (*Caller, error) {
	tk, err := g.st.AccessTokenByDigest(ctx, digestOf(cred))
	if err != nil {
		return nil, g.lookupFailed(ctx, err)
	}
	now := g.now()
	if !tk.ExpiresAt.IsZero() && !now.Before(tk.ExpiresAt) {
		return nil, status.Error(codes.Unauthenticated, "this token has expired; create a new one")
	}
	u, err := g.enabledUser(ctx, tk.UserID)
	if err != nil {
		return nil, err
	}
	if now.Sub(tk.LastUsedAt) >= touchEvery {
		if err := g.st.TouchAccessToken(ctx, tk.ID); err != nil {
			g.log.WarnContext(ctx, "could not record a token's use", "token_id", tk.ID, "error", err)
		}
		if now.Sub(tk.LastUsedAt) >= auditTokenUseEvery {
			g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "token.use", Target: tk.ID, Detail: "name " + tk.Name})
		}
	}
	return &Caller{UserID: u.ID, Admin: u.Admin, Scope: tk.Scope, credential: cred}, nil
}

// byLoginSession resolves a login session.
func (g *Guard) byLoginSession(ctx context.Context, cred string) (*Caller, error) {
	d := digestOf(cred)
	ls, err := g.st.LoginSessionByDigest(ctx, d)
	if err != nil {
		return nil, g.lookupFailed(ctx, err)
	}
	if !g.now().Before(ls.ExpiresAt) {
		return nil, status.Error(codes.Unauthenticated, "your sign-in has expired; sign in again")
	}
	u, err := g.enabledUser(ctx, ls.UserID)
	if err != nil {
		return nil, err
	}
	return &Caller{UserID: u.ID, Admin: u.Admin, Scope: store.ScopeFull, credential: cred, sessionDigest: d}, nil
}

// enabledUser reads a credential's user, refusing a disabled one.
func (g *Guard) enabledUser(ctx context.Context, id string) (*store.User, error) {
	u, err := g.st.GetUser(ctx, id)
	if err != nil {
		return nil, g.lookupFailed(ctx, err)
	}
	if u.Disabled {
		return nil, status.Error(codes.Unauthenticated, "this account is disabled")
	}
	return u, nil
}

// lookupFailed is the answer when a credential's record could not be
// read: Unauthenticated when it does not exist, Unavailable when the store
// failed.
func (g *Guard) lookupFailed(ctx context.Context, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return g.unauthenticated()
	}
	g.log.WarnContext(ctx, "could not check a credential", "error", err)
	return status.Error(codes.Unavailable, "credentials cannot be checked right now; try again")
}

// audit appends to the audit log and, after a change that can end
// someone's access, has the open streams checked again.
func (g *Guard) audit(ctx context.Context, r store.AuditRecord) {
	g.rec.Record(ctx, r)
	if endsAccess[r.Action] {
		g.changes.changed()
	}
}

// Recorder returns the audit log's recorder, for records whose actor is
// not a call's caller.
func (g *Guard) Recorder() *audit.Recorder { return g.rec }

// Audit records an action of the caller of ctx on project (empty for
// an account event) in the audit log: approvals, deletions and the like.
// target and detail must hold no secret.
func (g *Guard) Audit(ctx context.Context, project, action, target, detail string) {
	c, _ := CallerFrom(ctx)
	actor := ""
	if c != nil {
		actor = c.Actor()
	}
	g.audit(ctx, store.AuditRecord{Actor: actor, ProjectID: project, Action: action, Target: target, Detail: detail})
}

// caller returns the caller of ctx.
func caller(ctx context.Context) (*Caller, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return nil, errNoCaller
	}
	return c, nil
}

// Check answers whether the caller of ctx may act at lvl on project; what
// and id name the thing the call is about (say "session" and its id), so
// that a refusal to read says exactly what a missing thing would. It
// returns nil, a NotFound status (the caller may not read the project), or
// a PermissionDenied one (they may read but not act at lvl).
func (g *Guard) Check(ctx context.Context, project string, lvl Level, what, id string) error {
	c, err := caller(ctx)
	if err != nil {
		return err
	}
	return check(ctx, g.st, c, project, lvl, what, id)
}

// Readable returns the projects whose things the caller of ctx may list,
// or nil when they may list every project's (the operator). A caller of
// no project gets an empty, non-nil slice.
func (g *Guard) Readable(ctx context.Context) ([]string, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if c.Operator {
		return nil, nil
	}
	ms, err := g.st.MembershipsOf(ctx, c.UserID)
	if err != nil {
		return nil, storeStatus(err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.ProjectID)
	}
	return out, nil
}

// ProjectForNew returns the project a new thing of the caller goes in:
// the one requested, which the caller must be able to write, or, when none
// is, DefaultProject if the caller may write it, else the caller's only
// project. A caller of several projects but not the default one must
// name one (InvalidArgument).
//
// The caller's memberships, all of them, are read through memberships
// (the store's MembershipsOf when nil), which CreateSession reads with
// the other things a new session needs in one statement
// (store.ReadForNewSession); it is not called for the operator. The
// decision is the one a read of the requested project's membership
// alone would give: a project the caller is no member of is hidden.
func (g *Guard) ProjectForNew(ctx context.Context, requested string, memberships func(ctx context.Context, userID string) ([]store.Member, error)) (string, error) {
	c, err := caller(ctx)
	if err != nil {
		return "", err
	}
	if c.Operator {
		return cmp.Or(requested, DefaultProject), nil
	}
	if memberships == nil {
		memberships = g.st.MembershipsOf
	}
	ms, err := memberships(ctx, c.UserID)
	if err != nil {
		return "", storeStatus(err)
	}
	if requested != "" {
		for _, m := range ms {
			if m.ProjectID == requested {
				return requested, checkMember(c, requested, m, Write)
			}
		}
		return "", Hidden("project", requested)
	}
	// The memberships just read say what the caller may do in the
	// project chosen; reading that one again would only cost a query.
	for _, m := range ms {
		if m.ProjectID == DefaultProject {
			return DefaultProject, checkMember(c, DefaultProject, m, Write)
		}
	}
	switch len(ms) {
	case 0:
		return "", status.Error(codes.PermissionDenied, "you are a member of no project; ask a project owner to add you")
	case 1:
		return ms[0].ProjectID, checkMember(c, ms[0].ProjectID, ms[0], Write)
	}
	return "", status.Error(codes.InvalidArgument, "you are a member of several projects; name one in project_id")
}

// Forward returns ctx with the outgoing metadata that makes a call
// forwarded to another replica act as the caller of ctx (the caller's own
// credential in CredentialHeader), plus the extra key-value pairs given.
func Forward(ctx context.Context, kv ...string) context.Context {
	pairs := append([]string(nil), kv...)
	if c, ok := CallerFrom(ctx); ok {
		pairs = append(pairs, CredentialHeader, c.credential)
	}
	return metadata.NewOutgoingContext(ctx, metadata.Pairs(pairs...))
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// CheckSession is Check for the project of session id: an unknown session
// and one the caller may not read get the same NotFound.
func (g *Guard) CheckSession(ctx context.Context, id string, lvl Level) error {
	_, err := g.Session(ctx, id, lvl)
	return err
}

// Session is CheckSession that also returns the session's row it read,
// for a call that needs the row too and so need not read it again. The
// row and the caller's membership of its project are one read
// (store.GetSessionAccess), as fresh as two would be.
func (g *Guard) Session(ctx context.Context, id string, lvl Level) (*store.Session, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	var (
		sess *store.Session
		mem  *store.Member
	)
	if c.Operator {
		sess, err = g.st.GetSession(ctx, id)
	} else {
		sess, mem, err = g.st.GetSessionAccess(ctx, id, c.UserID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, Hidden("session", id)
	}
	if err != nil {
		return nil, storeStatus(err)
	}
	switch {
	case c.Operator:
	case mem == nil:
		return nil, Hidden("session", id)
	default:
		if err := checkMember(c, sess.ProjectID, *mem, lvl); err != nil {
			return nil, err
		}
	}
	return sess, nil
}

// AuditSession records an action of the caller of ctx on session id in
// the audit log of the session's project.
func (g *Guard) AuditSession(ctx context.Context, id, action, detail string) {
	sess, err := g.st.GetSession(ctx, id)
	if err != nil {
		g.log.WarnContext(ctx, "could not write the audit log", "action", action, "session_id", id, "error", err)
		return
	}
	g.Audit(ctx, sess.ProjectID, action, id, detail)
}
