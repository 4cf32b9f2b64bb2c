package access

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// Sign-in, accounts, projects and tokens: what the gRPC services of
// package accounts do, decided here beside the checks they rely on.

// Lockout after wrong passwords: from the lockAfter-th wrong password in
// a row, password sign-in to the account closes for lockBase, doubling
// with each further failure up to lockMax. A right password (once the
// lock has passed) resets the count.
const (
	lockAfter = 5
	lockBase  = 30 * time.Second
	lockMax   = time.Hour
	// maxTokenTTL and defaultTokenTTL bound personal access tokens.
	maxTokenTTL     = 366 * 24 * time.Hour
	defaultTokenTTL = 90 * 24 * time.Hour
)

// errWrongPassword is the one answer to a wrong user id, a wrong password
// and a disabled account, so that sign-in tells nobody which users exist.
var errWrongPassword = status.Error(codes.Unauthenticated, "wrong user id or password")

// Caller returns the caller of ctx and, unless it is the operator, their
// account.
func (g *Guard) Caller(ctx context.Context) (*Caller, *store.User, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, nil, err
	}
	if c.Operator {
		return c, nil, nil
	}
	u, err := g.st.GetUser(ctx, c.UserID)
	if err != nil {
		return nil, nil, storeStatus(err)
	}
	return c, u, nil
}

// SignIn checks a password and starts a login session; it returns the
// session's secret, shown once, and when it ends.
func (g *Guard) SignIn(ctx context.Context, userID, password string) (string, time.Time, *store.User, error) {
	now := g.now()
	u, err := g.st.GetUser(ctx, userID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return "", time.Time{}, nil, storeStatus(err)
		}
		VerifyPassword(dummyHash(), password) // as long as a wrong password takes
		g.audit(ctx, store.AuditRecord{Actor: "", Action: "sign_in.failed", Detail: "unknown user"})
		return "", time.Time{}, nil, errWrongPassword
	}
	if now.Before(u.LockedUntil) {
		g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "sign_in.locked"})
		return "", time.Time{}, nil, status.Errorf(codes.ResourceExhausted,
			"too many wrong passwords; password sign-in to this account opens again in %s", u.LockedUntil.Sub(now).Round(time.Second))
	}
	if !VerifyPassword(u.PasswordHash, password) || u.Disabled {
		u.FailedSignIns++
		if u.FailedSignIns >= lockAfter {
			lock := lockBase << min(u.FailedSignIns-lockAfter, 10)
			u.LockedUntil = now.Add(min(lock, lockMax))
		}
		if err := g.st.UpdateUser(ctx, u); err != nil {
			g.log.WarnContext(ctx, "could not count a wrong password", "user", u.ID, "error", err)
		}
		g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "sign_in.failed", Detail: fmt.Sprintf("%d in a row", u.FailedSignIns)})
		return "", time.Time{}, nil, errWrongPassword
	}
	if u.FailedSignIns != 0 || !u.LockedUntil.IsZero() {
		u.FailedSignIns, u.LockedUntil = 0, time.Time{}
		if err := g.st.UpdateUser(ctx, u); err != nil {
			return "", time.Time{}, nil, storeStatus(err)
		}
	}
	secret, expires, err := g.StartLoginSession(ctx, u.ID, "password")
	if err != nil {
		return "", time.Time{}, nil, err
	}
	return secret, expires, u, nil
}

// StartLoginSession starts a login session for a user who has proven who
// they are (how says with what, for the audit log), and returns its
// secret and end.
func (g *Guard) StartLoginSession(ctx context.Context, userID, how string) (string, time.Time, error) {
	secret := newSecret(sessionPrefix)
	expires := g.now().Add(defaultLoginSession)
	if err := g.st.CreateLoginSession(ctx, &store.LoginSession{Digest: digestOf(secret), UserID: userID, ExpiresAt: expires}); err != nil {
		return "", time.Time{}, storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: userID, Action: "sign_in", Detail: how})
	return secret, expires, nil
}

// SignOut ends the login session the call was made with.
func (g *Guard) SignOut(ctx context.Context) error {
	c, err := caller(ctx)
	if err != nil {
		return err
	}
	if c.sessionDigest == nil {
		return status.Error(codes.FailedPrecondition, "this call was not made with a sign-in; a token is revoked with RevokeToken")
	}
	if err := g.st.DeleteLoginSession(ctx, c.sessionDigest); err != nil {
		return storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.UserID, Action: "sign_out"})
	return nil
}

// requireUser returns the caller of ctx when it is a user with a full
// credential: tokens and passwords are a user's own business.
func requireUser(ctx context.Context) (*Caller, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Operator:
		return nil, status.Error(codes.FailedPrecondition, "the service token is no user; call with a user's token or sign-in")
	case c.Scope != store.ScopeFull:
		return nil, status.Error(codes.PermissionDenied, "this token is read-only")
	}
	return c, nil
}

// ChangePassword changes the caller's password and ends their other
// sign-ins.
func (g *Guard) ChangePassword(ctx context.Context, oldPassword, newPassword string) error {
	c, err := requireUser(ctx)
	if err != nil {
		return err
	}
	u, err := g.st.GetUser(ctx, c.UserID)
	if err != nil {
		return storeStatus(err)
	}
	if u.PasswordHash != "" && !VerifyPassword(u.PasswordHash, oldPassword) {
		g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "password.change_failed"})
		return status.Error(codes.PermissionDenied, "the current password is wrong")
	}
	if err := CheckPassword(newPassword); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if u.PasswordHash, err = HashPassword(newPassword); err != nil {
		return status.Error(codes.Internal, "could not hash the password")
	}
	u.PasswordChangedAt = g.now()
	if err := g.st.UpdateUser(ctx, u); err != nil {
		return storeStatus(err)
	}
	if err := g.endSignInsBut(ctx, u.ID, c.sessionDigest); err != nil {
		return err
	}
	g.audit(ctx, store.AuditRecord{Actor: u.ID, Action: "password.change"})
	return nil
}

// endSignInsBut ends every login session of a user but keep's (which may
// be nil).
func (g *Guard) endSignInsBut(ctx context.Context, userID string, keep []byte) error {
	var kept *store.LoginSession
	if keep != nil {
		ls, err := g.st.LoginSessionByDigest(ctx, keep)
		if err == nil {
			kept = ls
		}
	}
	if err := g.st.DeleteLoginSessionsOf(ctx, userID); err != nil {
		return storeStatus(err)
	}
	if kept != nil {
		if err := g.st.CreateLoginSession(ctx, kept); err != nil {
			return storeStatus(err)
		}
	}
	return nil
}

// requireAdmin returns the caller of ctx when they may manage users: an
// admin with a full credential, or the operator.
func requireAdmin(ctx context.Context) (*Caller, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if c.Operator {
		return c, nil
	}
	if !c.Admin {
		return nil, status.Error(codes.PermissionDenied, "only an admin manages users")
	}
	if c.Scope != store.ScopeFull {
		return nil, status.Error(codes.PermissionDenied, "this token is read-only")
	}
	return c, nil
}

// ListUsers lists every account; admins only.
func (g *Guard) ListUsers(ctx context.Context) ([]*store.User, error) {
	if _, err := requireAdmin(ctx); err != nil {
		return nil, err
	}
	us, err := g.st.ListUsers(ctx)
	return us, storeStatus(err)
}

// CreateUser creates an account with a first password; admins only.
func (g *Guard) CreateUser(ctx context.Context, id, name, password string, admin bool) (*store.User, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := store.CheckName("user id", id); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := CheckPassword(password); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, status.Error(codes.Internal, "could not hash the password")
	}
	u := &store.User{ID: id, Name: name, PasswordHash: hash, Admin: admin}
	if err := g.st.CreateUser(ctx, u); err != nil {
		return nil, storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.Actor(), Action: "user.create", Target: id, Detail: fmt.Sprintf("admin %t", admin)})
	return u, nil
}

// UpdateUser disables or enables an account and makes it admin or not;
// admins only. Disabling ends the user's sign-ins.
func (g *Guard) UpdateUser(ctx context.Context, id string, disabled, admin *bool) (*store.User, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if id == c.UserID && ((disabled != nil && *disabled) || (admin != nil && !*admin)) {
		return nil, status.Error(codes.FailedPrecondition, "you cannot disable yourself or take your own admin role; ask another admin")
	}
	u, err := g.st.GetUser(ctx, id)
	if err != nil {
		return nil, storeStatus(err)
	}
	if disabled != nil {
		u.Disabled = *disabled
	}
	if admin != nil {
		u.Admin = *admin
	}
	if err := g.st.UpdateUser(ctx, u); err != nil {
		return nil, storeStatus(err)
	}
	if u.Disabled {
		if err := g.st.DeleteLoginSessionsOf(ctx, id); err != nil {
			return nil, storeStatus(err)
		}
	}
	g.audit(ctx, store.AuditRecord{Actor: c.Actor(), Action: "user.update", Target: id, Detail: fmt.Sprintf("disabled %t admin %t", u.Disabled, u.Admin)})
	return u, nil
}

// ResetPassword sets a user's password and ends their sign-ins; admins
// only.
func (g *Guard) ResetPassword(ctx context.Context, id, password string) error {
	c, err := requireAdmin(ctx)
	if err != nil {
		return err
	}
	if err := CheckPassword(password); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	u, err := g.st.GetUser(ctx, id)
	if err != nil {
		return storeStatus(err)
	}
	if u.PasswordHash, err = HashPassword(password); err != nil {
		return status.Error(codes.Internal, "could not hash the password")
	}
	u.PasswordChangedAt, u.FailedSignIns, u.LockedUntil = time.Time{}, 0, time.Time{}
	if err := g.st.UpdateUser(ctx, u); err != nil {
		return storeStatus(err)
	}
	if err := g.st.DeleteLoginSessionsOf(ctx, id); err != nil {
		return storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.Actor(), Action: "user.reset_password", Target: id})
	return nil
}

// DeleteUser deletes an account; admins only, and not their own.
func (g *Guard) DeleteUser(ctx context.Context, id string) error {
	c, err := requireAdmin(ctx)
	if err != nil {
		return err
	}
	if id == c.UserID {
		return status.Error(codes.FailedPrecondition, "you cannot delete yourself; ask another admin")
	}
	if err := g.st.DeleteUser(ctx, id); err != nil {
		return storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.Actor(), Action: "user.delete", Target: id})
	return nil
}

// ProjectView is a project as its caller sees it.
type ProjectView struct {
	*store.Project
	// Role is the caller's; empty for the operator.
	Role store.Role
}

// ListProjects returns the caller's projects (every project for the
// operator).
func (g *Guard) ListProjects(ctx context.Context) ([]ProjectView, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	all, err := g.st.ListProjects(ctx)
	if err != nil {
		return nil, storeStatus(err)
	}
	roles := map[string]store.Role{}
	if !c.Operator {
		ms, err := g.st.MembershipsOf(ctx, c.UserID)
		if err != nil {
			return nil, storeStatus(err)
		}
		for _, m := range ms {
			roles[m.ProjectID] = m.Role
		}
	}
	var out []ProjectView
	for _, p := range all {
		if r, ok := roles[p.ID]; ok || c.Operator {
			out = append(out, ProjectView{Project: p, Role: r})
		}
	}
	return out, nil
}

// CreateProject creates a project owned by the caller (by AdminUser when
// the operator creates it).
func (g *Guard) CreateProject(ctx context.Context, id, name string) (ProjectView, error) {
	c, err := caller(ctx)
	if err != nil {
		return ProjectView{}, err
	}
	if c.Scope != store.ScopeFull {
		return ProjectView{}, status.Error(codes.PermissionDenied, "this token is read-only")
	}
	owner := c.UserID
	if c.Operator {
		owner = store.AdminUser
	}
	if err := store.CheckName("project id", id); err != nil {
		return ProjectView{}, status.Error(codes.InvalidArgument, err.Error())
	}
	p := &store.Project{ID: id, Name: name}
	if err := g.st.CreateProject(ctx, p, owner); err != nil {
		return ProjectView{}, storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.Actor(), ProjectID: id, Action: "project.create", Target: id, Detail: "owner " + owner})
	return ProjectView{Project: p, Role: store.RoleOwner}, nil
}

// DeleteProject deletes an empty project; owners only. The default
// project stays.
func (g *Guard) DeleteProject(ctx context.Context, id string) error {
	if err := g.Check(ctx, id, Own, "project", id); err != nil {
		return err
	}
	if id == DefaultProject {
		return status.Error(codes.FailedPrecondition, "the default project cannot be deleted")
	}
	if err := g.st.DeleteProject(ctx, id); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return storeStatus(err)
	}
	g.Audit(ctx, id, "project.delete", id, "")
	return nil
}

// ListMembers lists a project's members; any member may.
func (g *Guard) ListMembers(ctx context.Context, project string) ([]store.Member, error) {
	if err := g.Check(ctx, project, Read, "project", project); err != nil {
		return nil, err
	}
	ms, err := g.st.ListMembers(ctx, project)
	return ms, storeStatus(err)
}

// SetMember adds a member or changes their role; owners only. The last
// owner cannot become a mere member.
func (g *Guard) SetMember(ctx context.Context, project, userID string, role store.Role) error {
	if err := g.Check(ctx, project, Own, "project", project); err != nil {
		return err
	}
	if !role.Valid() {
		return status.Error(codes.InvalidArgument, "role must be owner or member")
	}
	if role != store.RoleOwner {
		if err := g.keepAnOwner(ctx, project, userID); err != nil {
			return err
		}
	}
	if err := g.st.SetMember(ctx, store.Member{ProjectID: project, UserID: userID, Role: role}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.NotFound, "user %s not found", userID)
		}
		return storeStatus(err)
	}
	g.Audit(ctx, project, "member.set", userID, "role "+string(role))
	return nil
}

// RemoveMember ends a membership; owners only, and the last owner stays.
func (g *Guard) RemoveMember(ctx context.Context, project, userID string) error {
	if err := g.Check(ctx, project, Own, "project", project); err != nil {
		return err
	}
	if err := g.keepAnOwner(ctx, project, userID); err != nil {
		return err
	}
	if err := g.st.RemoveMember(ctx, project, userID); err != nil {
		return storeStatus(err)
	}
	g.Audit(ctx, project, "member.remove", userID, "")
	return nil
}

// keepAnOwner refuses to take the owner role from userID when they are
// the project's last owner.
func (g *Guard) keepAnOwner(ctx context.Context, project, userID string) error {
	ms, err := g.st.ListMembers(ctx, project)
	if err != nil {
		return storeStatus(err)
	}
	owners, isOwner := 0, false
	for _, m := range ms {
		if m.Role == store.RoleOwner {
			owners++
			isOwner = isOwner || m.UserID == userID
		}
	}
	if isOwner && owners == 1 {
		return status.Errorf(codes.FailedPrecondition, "%s is the last owner of project %s; make someone else owner first", userID, project)
	}
	return nil
}

// ListAudit returns a page of a project's audit log, for its owners, or
// of the global one (sign-ins, accounts, tokens, the global provider
// routes: project empty), for admins.
func (g *Guard) ListAudit(ctx context.Context, project string, before int64, limit int) ([]store.AuditRecord, error) {
	if project == "" {
		c, err := caller(ctx)
		if err != nil {
			return nil, err
		}
		if !c.Operator && !c.Admin {
			return nil, status.Error(codes.PermissionDenied, "only an admin reads the global audit log; name a project you own to read its log")
		}
	} else if err := g.Check(ctx, project, Own, "project", project); err != nil {
		return nil, err
	}
	rs, err := g.st.ListAudit(ctx, project, before, limit)
	return rs, storeStatus(err)
}

// ListTokens lists the caller's personal access tokens.
func (g *Guard) ListTokens(ctx context.Context) ([]*store.AccessToken, error) {
	c, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if c.Operator {
		return nil, nil
	}
	ts, err := g.st.ListAccessTokens(ctx, c.UserID)
	return ts, storeStatus(err)
}

// CreateToken creates a personal access token for the caller; the secret
// it returns is shown once and stored nowhere.
func (g *Guard) CreateToken(ctx context.Context, name string, scope store.Scope, ttl time.Duration) (*store.AccessToken, string, error) {
	c, err := requireUser(ctx)
	if err != nil {
		return nil, "", err
	}
	switch {
	case ttl < 0 || ttl > maxTokenTTL:
		return nil, "", status.Errorf(codes.InvalidArgument, "a token lasts at most %d days", int(maxTokenTTL.Hours()/24))
	case ttl == 0:
		ttl = defaultTokenTTL
	case len(name) > 200:
		return nil, "", status.Error(codes.InvalidArgument, "a token's name has at most 200 bytes")
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	secret := newSecret(tokenPrefix)
	tk := &store.AccessToken{ID: hex.EncodeToString(id[:]), UserID: c.UserID, Name: name, Digest: digestOf(secret), Scope: scope, ExpiresAt: g.now().Add(ttl)}
	if err := g.st.CreateAccessToken(ctx, tk); err != nil {
		return nil, "", storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.UserID, Action: "token.create", Target: tk.ID, Detail: "scope " + string(scope)})
	return tk, secret, nil
}

// RevokeToken deletes one of the caller's tokens.
func (g *Guard) RevokeToken(ctx context.Context, id string) error {
	c, err := caller(ctx)
	if err != nil {
		return err
	}
	if c.Operator {
		return status.Errorf(codes.NotFound, "token %s not found", id)
	}
	if err := g.st.DeleteAccessToken(ctx, c.UserID, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.NotFound, "token %s not found", id)
		}
		return storeStatus(err)
	}
	g.audit(ctx, store.AuditRecord{Actor: c.UserID, Action: "token.revoke", Target: id})
	return nil
}

// SeedAdmin gives the account AdminUser its first password when it has
// none, in team mode: pinned (from PENGUIN_SEED_ADMIN_PASSWORD) when not
// empty, else a random one, which is written to file (readable by its
// owner alone) and returned so the server can print it. Until the admin
// changes it, every start returns it again from file; once changed, the
// file is removed and nothing is returned.
func (g *Guard) SeedAdmin(ctx context.Context, file, pinned string) (string, error) {
	u, err := g.st.GetUser(ctx, store.AdminUser)
	if err != nil {
		return "", fmt.Errorf("read the admin account: %w", err)
	}
	if !u.PasswordChangedAt.IsZero() {
		if file != "" {
			_ = os.Remove(file)
		}
		return "", nil
	}
	if u.PasswordHash != "" {
		if pinned != "" && VerifyPassword(u.PasswordHash, pinned) {
			return "", nil
		}
		if b, err := os.ReadFile(file); err == nil && VerifyPassword(u.PasswordHash, strings.TrimSpace(string(b))) {
			return strings.TrimSpace(string(b)), nil
		}
		if pinned == "" {
			// Set by an admin's reset, or the file is gone: the admin
			// knows it, or another admin resets it.
			return "", nil
		}
	}
	password := pinned
	if password == "" {
		password = "penguin-" + newSecret("")[:16]
		if file == "" {
			return "", errors.New("seed the admin account: no file to keep its first password in")
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", fmt.Errorf("seed the admin account: %w", err)
		}
		if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("seed the admin account: %w", err)
		}
	} else if err := CheckPassword(pinned); err != nil {
		return "", fmt.Errorf("PENGUIN_SEED_ADMIN_PASSWORD: %w", err)
	}
	if u.PasswordHash, err = HashPassword(password); err != nil {
		return "", err
	}
	if err := g.st.UpdateUser(ctx, u); err != nil {
		return "", fmt.Errorf("seed the admin account: %w", err)
	}
	g.audit(ctx, store.AuditRecord{Action: "user.seed_admin", Target: store.AdminUser})
	if pinned != "" {
		return "", nil
	}
	return password, nil
}
