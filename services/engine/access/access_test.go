package access_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/store"
)

const service = "the-service-token"

// stores opens a fresh SQLite and a fresh PostgreSQL store.
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	out := map[string]store.Store{}
	for name, url := range map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "p.db"),
		"postgres": pgtest.URL(t, "teams_access"),
	} {
		st, err := store.Open(t.Context(), url)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		t.Cleanup(func() { _ = st.Close() })
		out[name] = st
	}
	return out
}

// as returns ctx authenticated by g with cred as the bearer token.
func as(t *testing.T, g *access.Guard, cred string) (context.Context, error) {
	t.Helper()
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("authorization", "Bearer "+cred))
	return g.Authenticate(ctx, "/penguin.v1.EngineService/GetSession")
}

func mustAs(t *testing.T, g *access.Guard, cred string) context.Context {
	t.Helper()
	ctx, err := as(t, g, cred)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return ctx
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("%s: %v; want %v", what, err, want)
	}
}

func TestGuard(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			testGuard(t, st)
		})
	}
}

func testGuard(t *testing.T, st store.Store) {
	ctx := t.Context()
	g := access.New(st, access.Options{Mode: access.Team, ServiceToken: service})
	first, err := g.SeedAdmin(ctx, filepath.Join(t.TempDir(), "initial-admin-password"), "")
	if err != nil || !strings.HasPrefix(first, "penguin-") {
		t.Fatalf("SeedAdmin = %q, %v", first, err)
	}
	// Nothing, a wrong token, a guessed prefix: refused.
	for _, cred := range []string{"", "wrong", "pgn_pat_guess", "pgn_ses_guess"} {
		_, err := as(t, g, cred)
		wantCode(t, "credential "+cred, err, codes.Unauthenticated)
	}
	// The admin signs in with the seeded password.
	adminSecret, _, _, err := g.SignIn(ctx, store.AdminUser, first)
	if err != nil {
		t.Fatalf("SignIn(admin): %v", err)
	}
	admin := mustAs(t, g, adminSecret)
	if _, err := g.CreateUser(admin, "alice", "Alice", "alice-password-1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateUser(admin, "bob", "Bob", "bob-password-12", false); err != nil {
		t.Fatal(err)
	}
	aliceSecret, _, _, err := g.SignIn(ctx, "alice", "alice-password-1")
	if err != nil {
		t.Fatal(err)
	}
	alice := mustAs(t, g, aliceSecret)
	bobSecret, _, _, err := g.SignIn(ctx, "bob", "bob-password-12")
	if err != nil {
		t.Fatal(err)
	}
	bob := mustAs(t, g, bobSecret)

	// Users do not manage users.
	_, err = g.CreateUser(alice, "eve", "", "eve-password-1", false)
	wantCode(t, "alice creates a user", err, codes.PermissionDenied)

	// Alice's project is hidden from Bob, and from the admin.
	if _, err := g.CreateProject(alice, "apollo", "Apollo"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, &store.Session{ID: "s-alice", ProjectID: "apollo"}); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckSession(alice, "s-alice", access.Own); err != nil {
		t.Fatalf("alice owns her session's project: %v", err)
	}
	for who, c := range map[string]context.Context{"bob": bob, "admin": admin} {
		for _, lvl := range []access.Level{access.Read, access.Write, access.Own} {
			err := g.CheckSession(c, "s-alice", lvl)
			wantCode(t, who+" "+lvl.String(), err, codes.NotFound)
			// Exactly the words of a session that does not exist.
			if missing := g.CheckSession(c, "s-none", lvl); strings.ReplaceAll(status.Convert(err).Message(), "s-alice", "X") !=
				strings.ReplaceAll(status.Convert(missing).Message(), "s-none", "X") {
				t.Fatalf("hidden %q and missing %q differ", err, missing)
			}
		}
	}
	projects, err := g.Readable(bob)
	if err != nil || len(projects) != 0 || projects == nil {
		t.Fatalf("Readable(bob) = %#v, %v; want empty, non-nil", projects, err)
	}
	_, err = g.ProjectForNew(bob, "", nil)
	wantCode(t, "bob creates in no project", err, codes.PermissionDenied)
	_, err = g.ProjectForNew(bob, "apollo", nil)
	wantCode(t, "bob creates in apollo", err, codes.NotFound)
	_, err = g.ListMembers(bob, "apollo")
	wantCode(t, "bob lists apollo's members", err, codes.NotFound)
	wantCode(t, "bob adds himself", g.SetMember(bob, "apollo", "bob", store.RoleOwner), codes.NotFound)

	// A member writes but does not own.
	if err := g.SetMember(alice, "apollo", "bob", store.RoleMember); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckSession(bob, "s-alice", access.Write); err != nil {
		t.Fatalf("member bob writes: %v", err)
	}
	wantCode(t, "member bob owns", g.CheckSession(bob, "s-alice", access.Own), codes.PermissionDenied)
	wantCode(t, "member bob removes alice", g.RemoveMember(bob, "apollo", "alice"), codes.PermissionDenied)
	wantCode(t, "alice removes herself, the last owner", g.RemoveMember(alice, "apollo", "alice"), codes.FailedPrecondition)

	// A read-only token reads only, and creates no token.
	tk, secret, err := g.CreateToken(bob, "ci", store.ScopeRead, time.Hour)
	if err != nil || !strings.HasPrefix(secret, "pgn_pat_") {
		t.Fatalf("CreateToken = %v, %q, %v", tk, secret, err)
	}
	ro := mustAs(t, g, secret)
	if err := g.CheckSession(ro, "s-alice", access.Read); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "read-only token writes", g.CheckSession(ro, "s-alice", access.Write), codes.PermissionDenied)
	// A new session goes in the one project of its caller, who must be
	// able to write it.
	if p, err := g.ProjectForNew(bob, "", nil); err != nil || p != "apollo" {
		t.Fatalf("ProjectForNew(bob) = %q, %v; want apollo", p, err)
	}
	_, err = g.ProjectForNew(ro, "", nil)
	wantCode(t, "read-only token creates in its project", err, codes.PermissionDenied)
	_, _, err = g.CreateToken(ro, "more", store.ScopeFull, 0)
	wantCode(t, "read-only token creates a token", err, codes.PermissionDenied)
	// The token is stored as its digest only.
	list, err := st.ListAccessTokens(ctx, "bob")
	if err != nil || len(list) != 1 || strings.Contains(string(list[0].Digest), secret) || len(list[0].Digest) != 32 {
		t.Fatalf("stored token = %+v, %v", list, err)
	}
	// Alice cannot revoke Bob's token; Bob can.
	wantCode(t, "alice revokes bob's token", g.RevokeToken(alice, tk.ID), codes.NotFound)
	if err := g.RevokeToken(bob, tk.ID); err != nil {
		t.Fatal(err)
	}
	_, err = as(t, g, secret)
	wantCode(t, "revoked token", err, codes.Unauthenticated)

	// An expired token is refused.
	_, old, err := g.CreateToken(bob, "old", store.ScopeFull, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	later := access.New(st, access.Options{Mode: access.Team, ServiceToken: service, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	_, err = as(t, later, old)
	wantCode(t, "expired token", err, codes.Unauthenticated)

	// The operator's token reaches every project; a user's token does not
	// reach the environment service.
	op := mustAs(t, g, service)
	if err := g.CheckSession(op, "s-alice", access.Own); err != nil {
		t.Fatalf("operator: %v", err)
	}
	_, err = g.Authenticate(metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+bobSecret)), "/penguin.v1.EnvironmentService/ExecuteTool")
	wantCode(t, "user calls the environment service", err, codes.PermissionDenied)
	// A forwarded call acts as its caller, not as the connection's token.
	fwd := access.Forward(bob)
	md, _ := metadata.FromOutgoingContext(fwd)
	in := metadata.NewIncomingContext(ctx, metadata.Join(md, metadata.Pairs("authorization", "Bearer "+service)))
	onOwner, err := g.Authenticate(in, "/penguin.v1.EngineService/Approve")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := access.CallerFrom(onOwner); c.Operator || c.UserID != "bob" {
		t.Fatalf("forwarded caller = %+v; want bob", c)
	}

	// Signing out ends the sign-in; a password reset ends all of them.
	if err := g.SignOut(alice); err != nil {
		t.Fatal(err)
	}
	_, err = as(t, g, aliceSecret)
	wantCode(t, "signed-out session", err, codes.Unauthenticated)
	if err := g.ResetPassword(admin, "bob", "bob-password-new"); err != nil {
		t.Fatal(err)
	}
	_, err = as(t, g, bobSecret)
	wantCode(t, "session after a reset", err, codes.Unauthenticated)
	// Disabled users are refused.
	yes := true
	if _, err := g.UpdateUser(admin, "bob", &yes, nil); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = g.SignIn(ctx, "bob", "bob-password-new")
	wantCode(t, "disabled user signs in", err, codes.Unauthenticated)

	// The audit log records membership changes for the owner, not for a
	// member.
	records, err := g.ListAudit(alice2(t, g), "apollo", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range records {
		actions = append(actions, r.Action)
	}
	if !strings.Contains(strings.Join(actions, ","), "member.set") || !strings.Contains(strings.Join(actions, ","), "project.create") {
		t.Fatalf("audit of apollo = %v", actions)
	}
	for _, r := range records {
		if strings.Contains(r.Detail+r.Target, "pgn_") || strings.Contains(r.Detail+r.Target, "password") {
			t.Fatalf("audit record holds a secret: %+v", r)
		}
	}
	// The global log (sign-ins, accounts) is the admins': alice is
	// refused it; the admin reads her sign-ins and bob's refused one.
	_, err = g.ListAudit(alice2(t, g), "", 0, 0)
	wantCode(t, "alice reads the global audit log", err, codes.PermissionDenied)
	global, err := g.ListAudit(admin, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range global {
		seen[r.Actor+" "+r.Action] = true
		if r.ProjectID != "" || strings.Contains(r.Detail+r.Target, "pgn_") || strings.Contains(r.Detail, "bob-password") {
			t.Fatalf("global audit record %+v: another project's, or a secret", r)
		}
	}
	for _, want := range []string{"alice sign_in", "bob sign_in.failed", "admin user.create", "bob token.create"} {
		if !seen[want] {
			t.Errorf("the global audit log lacks %q: %v", want, seen)
		}
	}
}

// alice2 signs alice in again (her first sign-in ended).
func alice2(t *testing.T, g *access.Guard) context.Context {
	t.Helper()
	secret, _, _, err := g.SignIn(t.Context(), "alice", "alice-password-1")
	if err != nil {
		t.Fatal(err)
	}
	return mustAs(t, g, secret)
}

func TestLockout(t *testing.T) {
	st, err := store.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := access.New(st, access.Options{Mode: access.Team, ServiceToken: service})
	admin := mustAs(t, g, service)
	if _, err := g.CreateUser(admin, "carol", "", "carol-password", false); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, _, _, err := g.SignIn(t.Context(), "carol", "wrong-guess")
		wantCode(t, "wrong password", err, codes.Unauthenticated)
		if i == 0 {
			// An unknown user gets the same words.
			_, _, _, e2 := g.SignIn(t.Context(), "nobody", "wrong-guess")
			if status.Convert(e2).Message() != status.Convert(err).Message() {
				t.Fatalf("unknown user %q vs wrong password %q", e2, err)
			}
		}
	}
	// Locked now, even with the right password.
	_, _, _, err = g.SignIn(t.Context(), "carol", "carol-password")
	wantCode(t, "right password while locked", err, codes.ResourceExhausted)
	u, _ := st.GetUser(t.Context(), "carol")
	if !strings.HasPrefix(u.PasswordHash, "$argon2id$") || strings.Contains(u.PasswordHash, "carol-password") {
		t.Fatalf("stored hash %q", u.PasswordHash)
	}
}

func TestLocalMode(t *testing.T) {
	st, err := store.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := access.New(st, access.Options{Mode: access.Local})
	ctx := mustAs(t, g, "")
	c, _ := access.CallerFrom(ctx)
	if c.UserID != store.AdminUser || !c.Local {
		t.Fatalf("local caller = %+v", c)
	}
	if p, err := g.ProjectForNew(ctx, "", nil); err != nil || p != store.DefaultProject {
		t.Fatalf("ProjectForNew = %q, %v", p, err)
	}
	// With a service token set, the local server wants it, as before.
	g = access.New(st, access.Options{Mode: access.Local, ServiceToken: service})
	_, err = as(t, g, "")
	wantCode(t, "local server with a token, no credential", err, codes.Unauthenticated)
	if c, _ := access.CallerFrom(mustAs(t, g, service)); c.UserID != store.AdminUser {
		t.Fatalf("service token on a local server = %+v", c)
	}
}

func TestSeedAdminPinnedAndChanged(t *testing.T) {
	st, err := store.Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := access.New(st, access.Options{Mode: access.Team, ServiceToken: service})
	file := filepath.Join(t.TempDir(), "initial-admin-password")
	first, err := g.SeedAdmin(t.Context(), file, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != first {
		t.Fatalf("file holds %q, %v", b, err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v", fi.Mode())
	}
	again, err := g.SeedAdmin(t.Context(), file, "")
	if err != nil || again != first {
		t.Fatalf("second start = %q, %v; want the same password", again, err)
	}
	secret, _, _, err := g.SignIn(t.Context(), store.AdminUser, first)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ChangePassword(mustAs(t, g, secret), first, "a-better-password"); err != nil {
		t.Fatal(err)
	}
	if again, err := g.SeedAdmin(t.Context(), file, ""); err != nil || again != "" {
		t.Fatalf("after the change = %q, %v", again, err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the file outlived the change: %v", err)
	}
	// A pinned password on a fresh store.
	st2, _ := store.Open(t.Context(), ":memory:")
	defer st2.Close()
	g2 := access.New(st2, access.Options{Mode: access.Team, ServiceToken: service})
	if p, err := g2.SeedAdmin(t.Context(), filepath.Join(t.TempDir(), "f"), "pinned-password-1"); err != nil || p != "" {
		t.Fatalf("pinned = %q, %v", p, err)
	}
	if _, _, _, err := g2.SignIn(t.Context(), store.AdminUser, "pinned-password-1"); err != nil {
		t.Fatal(err)
	}
}
