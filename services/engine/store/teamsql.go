package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// teamSQL implements Teams once for both dialects. The ownership model's
// tables use only types both databases share (TEXT, INTEGER, BIGINT
// microseconds, a byte string), so their statements are one text, written
// with '?' placeholders and numbered for PostgreSQL by rebind. What
// differs between the drivers comes in as functions.
type teamSQL struct {
	// exec runs a statement and returns the number of rows it touched.
	exec func(ctx context.Context, q string, args ...any) (int64, error)
	// queryRow runs a query of one row.
	queryRow func(ctx context.Context, q string, args ...any) scanner
	// query runs a query; the caller calls done when it has read the rows.
	query func(ctx context.Context, q string, args ...any) (rows rowIterator, done func(), err error)
	// tx runs f in one transaction, with exec bound to it.
	tx func(ctx context.Context, f func(exec func(q string, args ...any) (int64, error)) error) error
	// noRows is the driver's error for a query of one row that found none.
	noRows error
	// classify maps the driver's constraint violations to ErrConflict
	// (unique) and ErrNotFound (foreign key), and everything else to the
	// store's vocabulary as the dialect's wrap does.
	classify func(ctx context.Context, op string, err error) error
	// closed reports whether the store was closed.
	closed func() bool
}

// rebind numbers the '?' placeholders of q as $1, $2, ... for PostgreSQL.
// The statements of this file hold no '?' anywhere else.
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// begin checks that the store is open.
func (t *teamSQL) begin(op string) error {
	if t.closed() {
		return closedError(op)
	}
	return nil
}

// one runs a statement that must touch a row; what names the row in the
// ErrNotFound it returns otherwise.
func (t *teamSQL) one(ctx context.Context, op, what string, q string, args ...any) error {
	if err := t.begin(op); err != nil {
		return err
	}
	n, err := t.exec(ctx, q, args...)
	if err != nil {
		return t.classify(ctx, op, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, what)
	}
	return nil
}

// get reads one row with scan; what names it in ErrNotFound.
func (t *teamSQL) get(ctx context.Context, op, what string, scan func(scanner) error, q string, args ...any) error {
	if err := t.begin(op); err != nil {
		return err
	}
	err := scan(t.queryRow(ctx, q, args...))
	if errors.Is(err, t.noRows) {
		return fmt.Errorf("%s: %w: %s", op, ErrNotFound, what)
	}
	if err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// list reads every row of q with scan.
func list[T any](ctx context.Context, t *teamSQL, op string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	if err := t.begin(op); err != nil {
		return nil, err
	}
	rows, done, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, t.classify(ctx, op, err)
	}
	defer done()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, t.classify(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, t.classify(ctx, op, err)
	}
	return out, nil
}

const userColumns = `id, name, email, password_hash, admin, disabled, oidc_subject,
	failed_sign_ins, locked_until, password_changed_at, created_at`

func scanUser(sc scanner) (*User, error) {
	var (
		u                        User
		admin, disabled          int
		locked, changed, created int64
	)
	if err := sc.Scan(&u.ID, &u.Name, &u.Email, &u.PasswordHash, &admin, &disabled, &u.OIDCSubject,
		&u.FailedSignIns, &locked, &changed, &created); err != nil {
		return nil, err
	}
	u.Admin, u.Disabled = admin != 0, disabled != 0
	u.LockedUntil, u.PasswordChangedAt, u.CreatedAt = fromMicros(locked), fromMicros(changed), fromMicros(created)
	return &u, nil
}

// CreateUser implements Teams.
func (t *teamSQL) CreateUser(ctx context.Context, u *User) error {
	const op = "create user"
	if u == nil {
		return fmt.Errorf("%s: %w: nil user", op, ErrInvalid)
	}
	if err := CheckName("user id", u.ID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	now := toMicros(time.Now())
	_, err := t.exec(ctx, `INSERT INTO users (`+userColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.Name, u.Email, u.PasswordHash, boolInt(u.Admin), boolInt(u.Disabled), u.OIDCSubject,
		u.FailedSignIns, micros(u.LockedUntil), micros(u.PasswordChangedAt), now.UnixMicro())
	if err != nil {
		return t.classify(ctx, op, err)
	}
	u.CreatedAt = now
	return nil
}

// GetUser implements Teams.
func (t *teamSQL) GetUser(ctx context.Context, id string) (u *User, err error) {
	err = t.get(ctx, "get user", "user "+id, func(sc scanner) (err error) { u, err = scanUser(sc); return err },
		`SELECT `+userColumns+` FROM users WHERE id = ?`, id)
	return u, err
}

// UserByOIDCSubject implements Teams.
func (t *teamSQL) UserByOIDCSubject(ctx context.Context, subject string) (u *User, err error) {
	if subject == "" {
		return nil, fmt.Errorf("user by oidc subject: %w: empty subject", ErrInvalid)
	}
	err = t.get(ctx, "user by oidc subject", "no user is linked to that subject", func(sc scanner) (err error) { u, err = scanUser(sc); return err },
		`SELECT `+userColumns+` FROM users WHERE oidc_subject = ?`, subject)
	return u, err
}

// ListUsers implements Teams.
func (t *teamSQL) ListUsers(ctx context.Context) ([]*User, error) {
	return list(ctx, t, "list users", scanUser, `SELECT `+userColumns+` FROM users ORDER BY id`)
}

// UpdateUser implements Teams.
func (t *teamSQL) UpdateUser(ctx context.Context, u *User) error {
	if u == nil {
		return fmt.Errorf("update user: %w: nil user", ErrInvalid)
	}
	return t.one(ctx, "update user", "user "+u.ID, `UPDATE users SET name = ?, email = ?, password_hash = ?, admin = ?, disabled = ?,
		oidc_subject = ?, failed_sign_ins = ?, locked_until = ?, password_changed_at = ? WHERE id = ?`,
		u.Name, u.Email, u.PasswordHash, boolInt(u.Admin), boolInt(u.Disabled),
		u.OIDCSubject, u.FailedSignIns, micros(u.LockedUntil), micros(u.PasswordChangedAt), u.ID)
}

// DeleteUser implements Teams.
func (t *teamSQL) DeleteUser(ctx context.Context, id string) error {
	return t.one(ctx, "delete user", "user "+id, `DELETE FROM users WHERE id = ?`, id)
}

const projectColumns = `id, name, created_at`

func scanProject(sc scanner) (*Project, error) {
	var (
		p       Project
		created int64
	)
	if err := sc.Scan(&p.ID, &p.Name, &created); err != nil {
		return nil, err
	}
	p.CreatedAt = fromMicros(created)
	return &p, nil
}

// CreateProject implements Teams.
func (t *teamSQL) CreateProject(ctx context.Context, p *Project, owner string) error {
	const op = "create project"
	if p == nil {
		return fmt.Errorf("%s: %w: nil project", op, ErrInvalid)
	}
	if err := CheckName("project id", p.ID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	now := toMicros(time.Now())
	err := t.tx(ctx, func(exec func(q string, args ...any) (int64, error)) error {
		if _, err := exec(`INSERT INTO projects (`+projectColumns+`) VALUES (?, ?, ?)`, p.ID, p.Name, now.UnixMicro()); err != nil {
			return err
		}
		_, err := exec(`INSERT INTO memberships (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)`,
			p.ID, owner, string(RoleOwner), now.UnixMicro())
		return err
	})
	if err != nil {
		return t.classify(ctx, op, err)
	}
	p.CreatedAt = now
	return nil
}

// GetProject implements Teams.
func (t *teamSQL) GetProject(ctx context.Context, id string) (p *Project, err error) {
	err = t.get(ctx, "get project", "project "+id, func(sc scanner) (err error) { p, err = scanProject(sc); return err },
		`SELECT `+projectColumns+` FROM projects WHERE id = ?`, id)
	return p, err
}

// ListProjects implements Teams.
func (t *teamSQL) ListProjects(ctx context.Context) ([]*Project, error) {
	return list(ctx, t, "list projects", scanProject, `SELECT `+projectColumns+` FROM projects ORDER BY id`)
}

// DeleteProject implements Teams.
func (t *teamSQL) DeleteProject(ctx context.Context, id string) error {
	const op = "delete project"
	if err := t.begin(op); err != nil {
		return err
	}
	var sessions int64
	if err := t.queryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE project_id = ?`, id).Scan(&sessions); err != nil {
		return t.classify(ctx, op, err)
	}
	if sessions > 0 {
		return fmt.Errorf("%s: %w: project %s still has %d sessions; delete them first", op, ErrConflict, id, sessions)
	}
	return t.one(ctx, op, "project "+id,
		`DELETE FROM projects WHERE id = ? AND NOT EXISTS (SELECT 1 FROM sessions WHERE project_id = ?)`, id, id)
}

const memberColumns = `project_id, user_id, role, created_at`

func scanMember(sc scanner) (Member, error) {
	var (
		m       Member
		role    string
		created int64
	)
	if err := sc.Scan(&m.ProjectID, &m.UserID, &role, &created); err != nil {
		return Member{}, err
	}
	m.Role, m.CreatedAt = Role(role), fromMicros(created)
	return m, nil
}

// SetMember implements Teams.
func (t *teamSQL) SetMember(ctx context.Context, m Member) error {
	const op = "set member"
	if !m.Role.Valid() {
		return fmt.Errorf("%s: %w: role %q (want owner or member)", op, ErrInvalid, m.Role)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO memberships (`+memberColumns+`) VALUES (?, ?, ?, ?)
		ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`,
		m.ProjectID, m.UserID, string(m.Role), time.Now().UnixMicro())
	if err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// RemoveMember implements Teams.
func (t *teamSQL) RemoveMember(ctx context.Context, projectID, userID string) error {
	return t.one(ctx, "remove member", "user "+userID+" is not a member of project "+projectID,
		`DELETE FROM memberships WHERE project_id = ? AND user_id = ?`, projectID, userID)
}

// GetMember implements Teams.
func (t *teamSQL) GetMember(ctx context.Context, projectID, userID string) (m Member, err error) {
	err = t.get(ctx, "get member", "user "+userID+" is not a member of project "+projectID,
		func(sc scanner) (err error) { m, err = scanMember(sc); return err },
		`SELECT `+memberColumns+` FROM memberships WHERE project_id = ? AND user_id = ?`, projectID, userID)
	return m, err
}

// ListMembers implements Teams.
func (t *teamSQL) ListMembers(ctx context.Context, projectID string) ([]Member, error) {
	return list(ctx, t, "list members", scanMember,
		`SELECT `+memberColumns+` FROM memberships WHERE project_id = ? ORDER BY user_id`, projectID)
}

// MembershipsOf implements Teams.
func (t *teamSQL) MembershipsOf(ctx context.Context, userID string) ([]Member, error) {
	return list(ctx, t, "memberships of", scanMember,
		`SELECT `+memberColumns+` FROM memberships WHERE user_id = ? ORDER BY project_id`, userID)
}

const tokenColumns = `id, user_id, name, digest, scope, created_at, expires_at, last_used_at`

func scanToken(sc scanner) (*AccessToken, error) {
	var (
		tk                     AccessToken
		scope                  string
		created, expires, used int64
	)
	if err := sc.Scan(&tk.ID, &tk.UserID, &tk.Name, &tk.Digest, &scope, &created, &expires, &used); err != nil {
		return nil, err
	}
	tk.Scope = Scope(scope)
	tk.CreatedAt, tk.ExpiresAt, tk.LastUsedAt = fromMicros(created), fromMicros(expires), fromMicros(used)
	return &tk, nil
}

// CreateAccessToken implements Teams.
func (t *teamSQL) CreateAccessToken(ctx context.Context, tk *AccessToken) error {
	const op = "create access token"
	switch {
	case tk == nil:
		return fmt.Errorf("%s: %w: nil token", op, ErrInvalid)
	case !tk.Scope.Valid():
		return fmt.Errorf("%s: %w: scope %q (want full or read)", op, ErrInvalid, tk.Scope)
	case len(tk.Digest) == 0:
		return fmt.Errorf("%s: %w: no digest", op, ErrInvalid)
	}
	if err := checkID("token id", tk.ID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	now := toMicros(time.Now())
	_, err := t.exec(ctx, `INSERT INTO access_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0)`,
		tk.ID, tk.UserID, tk.Name, tk.Digest, string(tk.Scope), now.UnixMicro(), micros(tk.ExpiresAt))
	if err != nil {
		return t.classify(ctx, op, err)
	}
	tk.CreatedAt = now
	return nil
}

// AccessTokenByDigest implements Teams.
func (t *teamSQL) AccessTokenByDigest(ctx context.Context, digest []byte) (tk *AccessToken, err error) {
	err = t.get(ctx, "access token by digest", "no such token", func(sc scanner) (err error) { tk, err = scanToken(sc); return err },
		`SELECT `+tokenColumns+` FROM access_tokens WHERE digest = ?`, digest)
	return tk, err
}

// TouchAccessToken implements Teams.
func (t *teamSQL) TouchAccessToken(ctx context.Context, id string) error {
	return t.one(ctx, "touch access token", "token "+id, `UPDATE access_tokens SET last_used_at = ? WHERE id = ?`, time.Now().UnixMicro(), id)
}

// ListAccessTokens implements Teams.
func (t *teamSQL) ListAccessTokens(ctx context.Context, userID string) ([]*AccessToken, error) {
	return list(ctx, t, "list access tokens", scanToken,
		`SELECT `+tokenColumns+` FROM access_tokens WHERE user_id = ? ORDER BY created_at DESC, id DESC`, userID)
}

// DeleteAccessToken implements Teams.
func (t *teamSQL) DeleteAccessToken(ctx context.Context, userID, id string) error {
	return t.one(ctx, "delete access token", "token "+id, `DELETE FROM access_tokens WHERE user_id = ? AND id = ?`, userID, id)
}

// CreateLoginSession implements Teams.
func (t *teamSQL) CreateLoginSession(ctx context.Context, s *LoginSession) error {
	const op = "create login session"
	if s == nil || len(s.Digest) == 0 || s.ExpiresAt.IsZero() {
		return fmt.Errorf("%s: %w: a digest and an expiry are required", op, ErrInvalid)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	now := toMicros(time.Now())
	if _, err := t.exec(ctx, `INSERT INTO login_sessions (digest, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		s.Digest, s.UserID, now.UnixMicro(), micros(s.ExpiresAt)); err != nil {
		return t.classify(ctx, op, err)
	}
	s.CreatedAt = now
	return nil
}

// LoginSessionByDigest implements Teams.
func (t *teamSQL) LoginSessionByDigest(ctx context.Context, digest []byte) (*LoginSession, error) {
	var (
		s                LoginSession
		created, expires int64
	)
	err := t.get(ctx, "login session by digest", "no such sign-in",
		func(sc scanner) error { return sc.Scan(&s.Digest, &s.UserID, &created, &expires) },
		`SELECT digest, user_id, created_at, expires_at FROM login_sessions WHERE digest = ?`, digest)
	if err != nil {
		return nil, err
	}
	s.CreatedAt, s.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &s, nil
}

// DeleteLoginSession implements Teams.
func (t *teamSQL) DeleteLoginSession(ctx context.Context, digest []byte) error {
	const op = "delete login session"
	if err := t.begin(op); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `DELETE FROM login_sessions WHERE digest = ?`, digest); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// DeleteLoginSessionsOf implements Teams.
func (t *teamSQL) DeleteLoginSessionsOf(ctx context.Context, userID string) error {
	const op = "delete login sessions of"
	if err := t.begin(op); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `DELETE FROM login_sessions WHERE user_id = ?`, userID); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// CreateSignInState implements Teams.
func (t *teamSQL) CreateSignInState(ctx context.Context, s *SignInState, pending int) error {
	const op = "create sign-in state"
	if s == nil || len(s.StateDigest) == 0 || len(s.BindingDigest) == 0 || s.ExpiresAt.IsZero() {
		return fmt.Errorf("%s: %w: a state, a binding and an expiry are required", op, ErrInvalid)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `DELETE FROM sign_in_states WHERE expires_at < ?`, time.Now().UnixMicro()); err != nil {
		return t.classify(ctx, op, err)
	}
	var open int
	if err := t.queryRow(ctx, `SELECT count(*) FROM sign_in_states`).Scan(&open); err != nil {
		return t.classify(ctx, op, err)
	}
	if open >= pending {
		return fmt.Errorf("%s: %w: %d sign-ins are under way", op, ErrConflict, open)
	}
	if _, err := t.exec(ctx, `INSERT INTO sign_in_states (state_digest, binding_digest, nonce, verifier, loopback, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		s.StateDigest, s.BindingDigest, s.Nonce, s.Verifier, s.Loopback, micros(s.ExpiresAt)); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// TakeSignInState implements Teams. The row is read, then deleted: of
// two calls with the same state, only the one whose DELETE removed it
// gets it.
func (t *teamSQL) TakeSignInState(ctx context.Context, stateDigest []byte) (*SignInState, error) {
	const op = "take sign-in state"
	s, err := t.signInState(ctx, op, stateDigest)
	if err != nil {
		return nil, err
	}
	if err := t.one(ctx, op, "no such sign-in", `DELETE FROM sign_in_states WHERE state_digest = ?`, stateDigest); err != nil {
		return nil, err
	}
	return s, nil
}

// PeekSignInState implements Teams.
func (t *teamSQL) PeekSignInState(ctx context.Context, stateDigest []byte) (*SignInState, error) {
	return t.signInState(ctx, "peek sign-in state", stateDigest)
}

// signInState reads the started sign-in whose state has the given digest.
func (t *teamSQL) signInState(ctx context.Context, op string, stateDigest []byte) (*SignInState, error) {
	var (
		s       SignInState
		expires int64
	)
	err := t.get(ctx, op, "no such sign-in", func(sc scanner) error {
		return sc.Scan(&s.StateDigest, &s.BindingDigest, &s.Nonce, &s.Verifier, &s.Loopback, &expires)
	}, `SELECT state_digest, binding_digest, nonce, verifier, loopback, expires_at FROM sign_in_states WHERE state_digest = ?`, stateDigest)
	if err != nil {
		return nil, err
	}
	s.ExpiresAt = fromMicros(expires)
	return &s, nil
}

// AppendAudit implements Teams.
func (t *teamSQL) AppendAudit(ctx context.Context, r AuditRecord) error {
	const op = "append audit"
	if r.Action == "" {
		return fmt.Errorf("%s: %w: no action", op, ErrInvalid)
	}
	if err := t.begin(op); err != nil {
		return err
	}
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	if _, err := t.exec(ctx, `INSERT INTO audit_log (at, actor, project_id, action, target, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		at.UnixMicro(), r.Actor, r.ProjectID, r.Action, r.Target, r.Detail); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// ListAudit implements Teams.
func (t *teamSQL) ListAudit(ctx context.Context, projectID string, before int64, limit int) ([]AuditRecord, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	return list(ctx, t, "list audit", func(sc scanner) (AuditRecord, error) {
		var (
			r  AuditRecord
			at int64
		)
		err := sc.Scan(&r.ID, &at, &r.Actor, &r.ProjectID, &r.Action, &r.Target, &r.Detail)
		r.At = fromMicros(at)
		return r, err
	}, `SELECT id, at, actor, project_id, action, target, detail FROM audit_log
		WHERE project_id = ? AND id < ? ORDER BY id DESC LIMIT ?`, projectID, before, normalizePageSize(limit))
}

// PruneAudit implements Teams.
func (t *teamSQL) PruneAudit(ctx context.Context, keep int, before time.Time) (int64, error) {
	const op = "prune audit"
	if err := t.begin(op); err != nil {
		return 0, err
	}
	var n int64
	if !before.IsZero() {
		d, err := t.exec(ctx, `DELETE FROM audit_log WHERE at < ?`, before.UnixMicro())
		if err != nil {
			return 0, t.classify(ctx, op, err)
		}
		n += d
	}
	if keep > 0 {
		// The subquery is NULL, and nothing goes, while there are no more
		// than keep records.
		d, err := t.exec(ctx, `DELETE FROM audit_log WHERE id <= (SELECT id FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?)`, keep)
		if err != nil {
			return n, t.classify(ctx, op, err)
		}
		n += d
	}
	return n, nil
}
