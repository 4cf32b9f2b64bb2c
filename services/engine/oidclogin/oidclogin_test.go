package oidclogin_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/oidcop"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/oidclogin"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// redirectURL is the client's callback; the test's HTTP client stops
// there instead of fetching it.
const redirectURL = "http://127.0.0.1:1/api/auth/oidc/callback"

var users = []oidcop.User{
	{ID: "sub-alice", Username: "alice@example.com", Email: "alice@example.com", EmailVerified: true, Groups: []string{"eng"}},
	{ID: "sub-bob", Username: "bob", Email: "bob@example.com", EmailVerified: true, Groups: []string{"eng", "penguin-admins"}},
	{ID: "sub-carol", Username: "carol", Email: "carol@example.com", EmailVerified: false, Groups: []string{"eng"}},
	{ID: "sub-dave", Username: "dave", Email: "dave@elsewhere.org", EmailVerified: true, Groups: []string{"eng"}},
	{ID: "sub-erin", Username: "erin", Email: "erin@example.com", EmailVerified: true, Groups: []string{"sales"}},
}

// binding is a browser's secret, long enough.
const binding = "browser-binding-0123456789abcdefghijklmnop"

type fixture struct {
	op    *oidcop.Provider
	st    store.Store
	guard *access.Guard
	login *oidclogin.Login
}

// setup starts a provider and a Login over a fresh store with cfg's
// policy (issuer, client and redirect are filled in).
func setup(t *testing.T, cfg oidclogin.Config) *fixture {
	t.Helper()
	ctx := testkit.Context(t, time.Minute)
	f := &fixture{op: oidcop.Start(t, users...)}
	var err error
	if f.st, err = store.Open(ctx, filepath.Join(t.TempDir(), "penguin.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.st.Close() })
	f.guard = access.New(f.st, access.Options{Mode: access.Team, ServiceToken: "service-token"})
	cfg.Issuer, cfg.RedirectURL = f.op.Issuer, redirectURL
	cfg.ClientID, cfg.ClientSecret = f.op.Client(redirectURL)
	if f.login, err = oidclogin.New(cfg, f.st); err != nil {
		t.Fatal(err)
	}
	return f
}

// authorize begins a sign-in as the provider's user sub and follows the
// browser's way through the provider up to the redirect back: it returns
// the state and code of that redirect.
func (f *fixture) authorize(t *testing.T, ctx context.Context, sub, browser string) (state, code string) {
	t.Helper()
	return f.authorizeFor(t, ctx, sub, browser, "")
}

// authorizeFor is authorize for a sign-in begun with the loopback address
// of a command-line client (none when empty).
func (f *fixture) authorizeFor(t *testing.T, ctx context.Context, sub, browser, loopback string) (state, code string) {
	t.Helper()
	f.op.SignInAs(sub)
	u, err := f.login.Begin(ctx, browser, loopback)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), redirectURL) {
		t.Fatalf("the provider answered %s, Location %q; want a redirect to the callback", resp.Status, resp.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("code") == "" || q.Get("state") == "" {
		t.Fatalf("the redirect back %s has no code or state", loc)
	}
	return q.Get("state"), q.Get("code")
}

// signIn runs a whole sign-in as sub and returns the account signed in.
func (f *fixture) signIn(t *testing.T, ctx context.Context, sub string) (*store.User, error) {
	t.Helper()
	state, code := f.authorize(t, ctx, sub, binding)
	id, err := f.login.Complete(ctx, state, code, binding, "")
	if err != nil {
		return nil, err
	}
	secret, _, u, err := f.guard.SignInExternal(ctx, id)
	if err != nil {
		t.Fatalf("SignInExternal: %v", err)
	}
	// The secret is a login session like a password sign-in's.
	in := metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+secret))
	actx, err := f.guard.Authenticate(in, "/penguin.v1.AuthService/WhoAmI")
	if err != nil {
		t.Fatalf("the sign-in's secret does not authenticate: %v", err)
	}
	if c, _ := access.CallerFrom(actx); c == nil || c.UserID != u.ID {
		t.Fatalf("the sign-in's secret is %+v; want user %s", c, u.ID)
	}
	return u, nil
}

func wantRefused(t *testing.T, what string, err error, code codes.Code, words string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), words) {
		t.Fatalf("%s: %v; want %v saying %q", what, err, code, words)
	}
}

func TestSignInCreatesThenMatchesTheUser(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{})
	u, err := f.signIn(t, ctx, "sub-alice")
	if err != nil {
		t.Fatal(err)
	}
	if u.ID != "alice" || u.Email != "alice@example.com" || u.Admin || u.PasswordHash != "" || u.OIDCSubject != f.op.Issuer+" sub-alice" {
		t.Fatalf("first sign-in created %+v", u)
	}
	again, err := f.signIn(t, ctx, "sub-alice")
	if err != nil || again.ID != "alice" {
		t.Fatalf("second sign-in: %+v, %v; want the same user", again, err)
	}
	all, err := f.st.ListUsers(ctx)
	if err != nil || len(all) != 2 { // admin and alice
		t.Fatalf("users after two sign-ins: %d, %v", len(all), err)
	}
	// A local account named like the provider's user is not taken over:
	// the next person called bob gets another id.
	if _, _, _, err := f.guard.SignInExternal(ctx, &access.ExternalIdentity{Subject: "other-issuer sub-alice", Email: "alice@example.com", Username: "alice", How: "oidc"}); err != nil {
		t.Fatal(err)
	}
	other, err := f.st.UserByOIDCSubject(ctx, "other-issuer sub-alice")
	if err != nil || other.ID != "alice-2" {
		t.Fatalf("a second issuer's alice: %+v, %v; want a new user alice-2", other, err)
	}
	// A disabled account cannot sign in through the provider either.
	alice, _ := f.st.GetUser(ctx, "alice")
	alice.Disabled = true
	if err := f.st.UpdateUser(ctx, alice); err != nil {
		t.Fatal(err)
	}
	state, code := f.authorize(t, ctx, "sub-alice", binding)
	id, err := f.login.Complete(ctx, state, code, binding, "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = f.guard.SignInExternal(ctx, id)
	wantRefused(t, "disabled account", err, codes.PermissionDenied, "disabled")
}

func TestAdminFromGroup(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{AdminGroup: "penguin-admins"})
	bob, err := f.signIn(t, ctx, "sub-bob")
	if err != nil || !bob.Admin {
		t.Fatalf("bob, in the admin group: %+v, %v; want an admin", bob, err)
	}
	alice, err := f.signIn(t, ctx, "sub-alice")
	if err != nil || alice.Admin {
		t.Fatalf("alice, not in it: %+v, %v; want no admin", alice, err)
	}
	f.op.SetGroups("sub-bob", "eng")
	bob, err = f.signIn(t, ctx, "sub-bob")
	if err != nil || bob.Admin {
		t.Fatalf("bob, out of the admin group: %+v, %v; want the role gone", bob, err)
	}
}

func TestPolicyRefusals(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{AllowedDomains: []string{"Example.com"}, AllowedGroups: []string{"eng"}})
	for _, c := range []struct {
		sub, words string
	}{
		{"sub-carol", "is not verified"},
		{"sub-dave", "email domain"},
		{"sub-erin", "none of the groups"},
	} {
		_, err := f.signIn(t, ctx, c.sub)
		wantRefused(t, c.sub, err, codes.PermissionDenied, c.words)
		if _, err := f.st.UserByOIDCSubject(ctx, f.op.Issuer+" "+c.sub); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s was refused but has an account: %v", c.sub, err)
		}
	}
	// The same provider's admitted user signs in.
	if _, err := f.signIn(t, ctx, "sub-alice"); err != nil {
		t.Fatal(err)
	}
}

func TestBadIDTokens(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{})
	for _, c := range []struct {
		name  string
		edit  func(map[string]any) oidcop.Key
		words string
	}{
		{"wrong audience", func(m map[string]any) oidcop.Key { m["aud"] = []string{"someone-else"}; return oidcop.Trusted }, "audience"},
		{"expired", func(m map[string]any) oidcop.Key {
			m["exp"] = time.Now().Add(-time.Hour).Unix()
			m["iat"] = time.Now().Add(-2 * time.Hour).Unix()
			return oidcop.Trusted
		}, "expired"},
		{"signed by another key", func(map[string]any) oidcop.Key { return oidcop.Stranger }, "signature"},
		{"another issuer", func(m map[string]any) oidcop.Key { m["iss"] = "http://evil.invalid"; return oidcop.Trusted }, "different provider"},
		{"nonce mismatch", func(m map[string]any) oidcop.Key { m["nonce"] = "someone-elses-nonce"; return oidcop.Trusted }, "nonce"},
	} {
		f.op.Tamper(c.edit)
		_, err := f.signIn(t, ctx, "sub-alice")
		wantRefused(t, c.name, err, codes.Unauthenticated, c.words)
	}
	// The control: a token signed again with the trusted key, claims
	// untouched, passes, so each refusal above is its claim's.
	f.op.Tamper(func(map[string]any) oidcop.Key { return oidcop.Trusted })
	if _, err := f.signIn(t, ctx, "sub-alice"); err != nil {
		t.Fatalf("a re-signed, unchanged token: %v", err)
	}
}

func TestStateIsBoundAndSingleUse(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{})
	// Another browser's answer, or an answer without the browser's secret.
	state, code := f.authorize(t, ctx, "sub-alice", binding)
	_, err := f.login.Complete(ctx, state, code, "another-browser-0123456789abcdefghijklmnop", "")
	wantRefused(t, "another browser", err, codes.Unauthenticated, "another browser")
	// The state was used up by that attempt.
	_, err = f.login.Complete(ctx, state, code, binding, "")
	wantRefused(t, "a used state", err, codes.Unauthenticated, "unknown or was completed")
	// A state this server never issued.
	_, code = f.authorize(t, ctx, "sub-alice", binding)
	_, err = f.login.Complete(ctx, "forged-state", code, binding, "")
	wantRefused(t, "a forged state", err, codes.Unauthenticated, "unknown")
	// A good answer completes once.
	state, code = f.authorize(t, ctx, "sub-alice", binding)
	if _, err := f.login.Complete(ctx, state, code, binding, ""); err != nil {
		t.Fatal(err)
	}
	_, err = f.login.Complete(ctx, state, code, binding, "")
	wantRefused(t, "the same answer again", err, codes.Unauthenticated, "unknown or was completed")
	// A short browser secret is refused before anything is stored.
	_, err = f.login.Begin(ctx, "short", "")
	wantRefused(t, "a short binding", err, codes.InvalidArgument, "binding")
}

// TestLoopbackSignIn covers a sign-in that a command-line client started:
// the provider's answer reaching the gateway is sent on to the client's
// loopback address and stays under way; only a completion with the
// client's binding and loopback address signs in, once; and an address
// that is not loopback is refused before anything is stored.
func TestLoopbackSignIn(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	f := setup(t, oidclogin.Config{})
	const loopback = "http://127.0.0.1:4711/callback"

	// A browser's sign-in is the gateway's to complete.
	state, code := f.authorize(t, ctx, "sub-alice", binding)
	if to, err := f.login.Loopback(ctx, state, code); err != nil || to != "" {
		t.Fatalf("Loopback(a browser's sign-in) = %q, %v; want none", to, err)
	}

	state, code = f.authorizeFor(t, ctx, "sub-alice", binding, loopback)
	to, err := f.login.Loopback(ctx, state, code)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(to)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != loopback || u.Query().Get("state") != state || u.Query().Get("code") != code {
		t.Fatalf("Loopback = %q, %v; want %s with the state and the code", to, err, loopback)
	}
	// Asked twice (a reload of the callback page), the same answer: the
	// sign-in is still under way.
	if again, err := f.login.Loopback(ctx, state, code); err != nil || again != to {
		t.Fatalf("Loopback again = %q, %v", again, err)
	}
	id, err := f.login.Complete(ctx, state, code, binding, loopback)
	if err != nil || id.Email != "alice@example.com" {
		t.Fatalf("the client's completion: %+v, %v", id, err)
	}
	// The code and the state are used up.
	_, err = f.login.Complete(ctx, state, code, binding, loopback)
	wantRefused(t, "the same answer again", err, codes.Unauthenticated, "unknown or was completed")
	_, err = f.login.Loopback(ctx, state, code)
	wantRefused(t, "the callback of a completed sign-in", err, codes.Unauthenticated, "unknown or was completed")

	// Completed by anyone but the client that started it: without its
	// binding (a process that caught the loopback request), or by a
	// browser-like call with the binding but not the address; either
	// attempt ends the sign-in.
	state, code = f.authorizeFor(t, ctx, "sub-alice", binding, loopback)
	_, err = f.login.Complete(ctx, state, code, "another-client-0123456789abcdefghijklmnop", loopback)
	wantRefused(t, "another client's binding", err, codes.Unauthenticated, "another browser")
	_, err = f.login.Complete(ctx, state, code, binding, loopback)
	wantRefused(t, "after a refused attempt", err, codes.Unauthenticated, "unknown or was completed")
	state, code = f.authorizeFor(t, ctx, "sub-alice", binding, loopback)
	_, err = f.login.Complete(ctx, state, code, binding, "")
	wantRefused(t, "without the loopback address", err, codes.Unauthenticated, "another client")
	state, code = f.authorizeFor(t, ctx, "sub-alice", binding, "")
	_, err = f.login.Complete(ctx, state, code, binding, loopback)
	wantRefused(t, "a browser's sign-in completed as a client's", err, codes.Unauthenticated, "another client")

	for _, bad := range []string{
		"http://evil.example:4711/callback", "http://localhost:4711/callback", "https://127.0.0.1:4711/callback",
		"http://127.0.0.1/callback", "http://10.0.0.1:4711/callback", "http://127.0.0.1:4711/callback?next=x",
		"http://me@127.0.0.1:4711/callback", "http://127.0.0.1:4711/callback#x", "127.0.0.1:4711",
	} {
		_, err := f.login.Begin(ctx, binding, bad)
		wantRefused(t, "Begin(loopback "+bad+")", err, codes.InvalidArgument, "loopback_redirect")
	}
	if err := oidclogin.CheckLoopback("http://[::1]:4711/callback"); err != nil {
		t.Fatalf("CheckLoopback(IPv6 loopback) = %v", err)
	}
}

func TestConfigChecks(t *testing.T) {
	for _, c := range []struct {
		cfg   oidclogin.Config
		words string
	}{
		{oidclogin.Config{Issuer: "https://idp.example.com"}, "client id, client secret, redirect URL"},
		{oidclogin.Config{Issuer: "idp.example.com", ClientID: "c", ClientSecret: "s", RedirectURL: "https://p.example.com/cb"}, "issuer"},
		{oidclogin.Config{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "s", RedirectURL: "/cb"}, "redirect URL"},
	} {
		_, err := oidclogin.New(c.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), c.words) {
			t.Errorf("New(%+v) = %v; want an error about %q", c.cfg, err, c.words)
		}
		if err != nil && strings.Contains(err.Error(), "\"s\"") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}
