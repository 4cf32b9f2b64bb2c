// Package oidclogin signs users in through an OpenID Connect identity
// provider (Google, Okta, Entra ID, Keycloak, Dex, ...) with the
// authorization code flow and PKCE, and decides whether the person the
// provider vouches for may sign in here at all.
//
// A sign-in has two steps, each one call of the engine's AuthService
// (the HTTP gateway makes them for the browser):
//
//   - [Login.Begin] draws a state, a nonce and a PKCE code verifier, keeps
//     them in the store (store.SignInState) beside the digest of a secret
//     that the browser which started the sign-in keeps (the gateway's
//     short-lived HttpOnly cookie), and returns the provider's
//     authorization URL.
//   - [Login.Complete], given the provider's answer (state and code) and
//     the browser's secret, takes the state from the store (once: a second
//     answer with the same state is refused), checks that the same browser
//     started it, exchanges the code with the verifier, verifies the ID
//     token (signature against the provider's published keys, issuer,
//     audience, expiry) and its nonce, and applies the policy: a verified
//     email, an allowed domain, an allowed group. It returns who signed
//     in; package access matches them to an account by issuer and subject.
//
// A command-line client (`penguin login --oidc`) signs in the same way,
// as native apps do under RFC 8252: it listens on a loopback address,
// passes that address to Begin with a binding secret that only it knows,
// and opens the authorization URL in a browser. The provider sends the
// browser to the gateway's callback, as for any sign-in; there
// [Login.Loopback] finds the sign-in was started by a command-line client
// and the gateway sends the browser on, with the state and the code, to
// the client's loopback address. The client then completes the sign-in
// itself with its binding secret, so the login session's secret goes to
// no one else: not the browser, not another process that catches the
// loopback request (it lacks the binding), not a client on another
// machine (the address must be loopback).
//
// The states live in the store, not in one process, so that a sign-in
// begun through one engine replica completes through another.
package oidclogin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// DefaultGroupsClaim is the ID token (or userinfo) claim that lists a
// user's groups when the configuration names none.
const DefaultGroupsClaim = "groups"

const (
	// stateTTL is how long a person has at the provider between the
	// start of a sign-in and its answer.
	stateTTL = 10 * time.Minute
	// maxPending bounds the sign-ins under way, which anyone may start:
	// enough for a large team signing in at once, not a table that grows
	// without end.
	maxPending = 10000
	// minBinding is the shortest browser secret accepted.
	minBinding = 32
	// httpTimeout bounds each call to the provider.
	httpTimeout = 15 * time.Second
)

// Config is the identity provider's configuration. The server is
// configured for OIDC sign-in when Issuer is set; the rest but the
// allow-lists and the admin group is then required.
type Config struct {
	// Issuer is the provider's issuer URL, where its discovery document
	// (/.well-known/openid-configuration) is found.
	Issuer string
	// ClientID and ClientSecret are this server's registration with the
	// provider. The secret is never logged.
	ClientID, ClientSecret string
	// RedirectURL is the gateway's callback, as registered with the
	// provider: https://<host>/api/auth/oidc/callback.
	RedirectURL string
	// Name is what the sign-in page's button says ("Sign in with
	// <Name>"); empty means the issuer's host name.
	Name string
	// AllowedDomains, when not empty, are the email domains that may sign
	// in; AllowedGroups, when not empty, the groups (of GroupsClaim) of
	// which a user must be in one. When both are set, both must hold.
	AllowedDomains, AllowedGroups []string
	// GroupsClaim names the claim that lists a user's groups; empty means
	// DefaultGroupsClaim.
	GroupsClaim string
	// AdminGroup, when set, decides the admin role at every sign-in:
	// members of this group are admins, everyone else is not.
	AdminGroup string
}

// Enabled reports whether OIDC sign-in is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// check reports what is missing or malformed in an enabled c.
func (c Config) check() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"client id", c.ClientID}, {"client secret", c.ClientSecret}, {"redirect URL", c.RedirectURL},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("oidc sign-in: the issuer is set but not the %s", strings.Join(missing, ", "))
	}
	for what, raw := range map[string]string{"issuer": c.Issuer, "redirect URL": c.RedirectURL} {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("oidc sign-in: the %s %q is not an http(s) URL", what, raw)
		}
	}
	return nil
}

// States is what a Login keeps its sign-ins under way in: the store.
type States interface {
	CreateSignInState(ctx context.Context, s *store.SignInState, pending int) error
	TakeSignInState(ctx context.Context, stateDigest []byte) (*store.SignInState, error)
	PeekSignInState(ctx context.Context, stateDigest []byte) (*store.SignInState, error)
}

// Login runs OIDC sign-ins. Create it with [New].
type Login struct {
	cfg    Config
	states States
	client *http.Client
	now    func() time.Time

	// mu guards the provider, discovered at the first sign-in (and again
	// after a failed discovery), so that an engine starts while its
	// provider is unreachable.
	mu       sync.Mutex
	provider *oidc.Provider
}

// New returns a Login for cfg, which must be enabled and complete.
func New(cfg Config, states States) (*Login, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = DefaultGroupsClaim
	}
	if cfg.Name == "" {
		u, _ := url.Parse(cfg.Issuer)
		cfg.Name = u.Hostname()
	}
	for i, d := range cfg.AllowedDomains {
		cfg.AllowedDomains[i] = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(d), "@"))
	}
	return &Login{cfg: cfg, states: states, client: &http.Client{Timeout: httpTimeout}, now: time.Now}, nil
}

// Name is the provider's name for the sign-in page.
func (l *Login) Name() string { return l.cfg.Name }

// ctx returns a context whose HTTP calls to the provider use l's client.
func (l *Login) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, l.client)
}

// discover returns the provider, fetching its discovery document the
// first time.
func (l *Login) discover(ctx context.Context) (*oidc.Provider, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.provider != nil {
		return l.provider, nil
	}
	// The provider keeps the context of discovery for its key fetches:
	// it must outlive this call.
	p, err := oidc.NewProvider(l.ctx(context.WithoutCancel(ctx)), l.cfg.Issuer)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the identity provider cannot be reached: %v", err)
	}
	l.provider = p
	return p, nil
}

// oauth returns the OAuth 2.0 configuration of a discovered provider.
func (l *Login) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: l.cfg.ClientID, ClientSecret: l.cfg.ClientSecret, RedirectURL: l.cfg.RedirectURL,
		Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

func digest(s string) []byte {
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// random returns 32 random bytes, base64url-encoded.
func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// CheckLoopback reports whether raw may be where a command-line client
// listens for the provider's answer: an http URL on the loopback address
// 127.0.0.1 or [::1] with a port, and no user, query or fragment. A name
// such as localhost is refused, since it may resolve elsewhere.
func CheckLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "loopback_redirect %q is not a URL", raw)
	}
	ip := net.ParseIP(u.Hostname())
	if u.Scheme != "http" || ip == nil || !ip.IsLoopback() || u.Port() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return status.Errorf(codes.InvalidArgument, "loopback_redirect %q must be http://127.0.0.1:PORT/... or http://[::1]:PORT/..., with no query", raw)
	}
	return nil
}

// Begin starts a sign-in for the browser (or, when loopback is not
// empty, the command-line client listening there) that keeps binding,
// and returns the URL to send the browser to.
func (l *Login) Begin(ctx context.Context, binding, loopback string) (string, error) {
	if len(binding) < minBinding {
		return "", status.Errorf(codes.InvalidArgument, "the browser binding must have at least %d characters", minBinding)
	}
	if loopback != "" {
		if err := CheckLoopback(loopback); err != nil {
			return "", err
		}
	}
	p, err := l.discover(ctx)
	if err != nil {
		return "", err
	}
	state, nonce, verifier := random(), random(), oauth2.GenerateVerifier()
	err = l.states.CreateSignInState(ctx, &store.SignInState{
		StateDigest: digest(state), BindingDigest: digest(binding), Nonce: nonce, Verifier: verifier,
		Loopback: loopback, ExpiresAt: l.now().Add(stateTTL),
	}, maxPending)
	switch {
	case errors.Is(err, store.ErrConflict):
		return "", status.Error(codes.ResourceExhausted, "too many sign-ins are under way; try again in a few minutes")
	case errors.Is(err, store.ErrUnavailable):
		return "", status.Error(codes.Unavailable, "the store cannot be reached; try again")
	case err != nil:
		return "", status.Error(codes.Internal, "could not record the sign-in; see the engine's log")
	}
	return l.oauth(p).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// refused is the error of a sign-in that did not prove who the person is.
func refused(format string, args ...any) error {
	return status.Errorf(codes.Unauthenticated, "sign-in refused: "+format, args...)
}

// denied is the error of a person the provider vouched for who may not
// sign in here.
func denied(format string, args ...any) error {
	return status.Errorf(codes.PermissionDenied, "sign-in refused: "+format, args...)
}

// errUnknownState is the answer for a state that is not (or no longer)
// one of a sign-in under way.
var errUnknownState = refused("this sign-in is unknown or was completed already; start again")

// Loopback returns, for the provider's answer to a sign-in that a
// command-line client started, where to send the browser on with it: the
// client's loopback address with the state and the code. It returns ""
// for a browser's sign-in, which the gateway completes itself. The
// sign-in stays under way for the client to complete.
func (l *Login) Loopback(ctx context.Context, state, code string) (string, error) {
	if state == "" || code == "" {
		return "", refused("the identity provider's answer has no state or no code")
	}
	st, err := l.states.PeekSignInState(ctx, digest(state))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", errUnknownState
	case err != nil:
		return "", status.Error(codes.Unavailable, "the store cannot be reached; try again")
	case st.Loopback == "":
		return "", nil
	}
	return st.Loopback + "?" + url.Values{"state": {state}, "code": {code}}.Encode(), nil
}

// Complete finishes the sign-in of state with the provider's code, for
// the browser that keeps binding (or the command-line client that keeps
// it and listens at loopback), and returns who signed in.
func (l *Login) Complete(ctx context.Context, state, code, binding, loopback string) (*access.ExternalIdentity, error) {
	if state == "" || code == "" {
		return nil, refused("the identity provider's answer has no state or no code")
	}
	st, err := l.states.TakeSignInState(ctx, digest(state))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errUnknownState
	case err != nil:
		return nil, status.Error(codes.Unavailable, "the store cannot be reached; try again")
	}
	if subtle.ConstantTimeCompare(digest(binding), st.BindingDigest) != 1 {
		return nil, refused("this sign-in was started in another browser; start again")
	}
	if loopback != st.Loopback {
		return nil, refused("this sign-in was started by another client; start again")
	}
	if !l.now().Before(st.ExpiresAt) {
		return nil, refused("this sign-in took too long; start again")
	}
	p, err := l.discover(ctx)
	if err != nil {
		return nil, err
	}
	hctx := l.ctx(ctx)
	tok, err := l.oauth(p).Exchange(hctx, code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return nil, refused("the identity provider did not accept the code: %v", oauthError(err))
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return nil, refused("the identity provider sent no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: l.cfg.ClientID, Now: l.now}).Verify(hctx, raw)
	if err != nil {
		return nil, refused("the ID token is not valid: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.Nonce)) != 1 {
		return nil, refused("the ID token's nonce is not this sign-in's")
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			return nil, refused("the access token does not match the ID token: %v", err)
		}
	}
	cl, err := l.claims(hctx, p, idt, tok)
	if err != nil {
		return nil, err
	}
	return l.admit(idt, cl)
}

// oauthError is what an exchange's error may show: the provider's error
// code and description, never the request or the response body.
func oauthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		if re.ErrorDescription != "" {
			return re.ErrorCode + ": " + re.ErrorDescription
		}
		return re.ErrorCode
	}
	return "the token endpoint failed"
}

// claims are what the policy looks at.
type claims struct {
	Email             string
	EmailVerified     bool
	Name              string
	PreferredUsername string
	Groups            []string
	hasGroups         bool
}

// read fills in what c lacks from a claims object.
func (c *claims) read(m map[string]any, groupsClaim string) {
	if c.Email == "" {
		c.Email, _ = m["email"].(string)
		switch v := m["email_verified"].(type) {
		case bool:
			c.EmailVerified = v
		case string: // as some providers send it
			c.EmailVerified = v == "true"
		}
	}
	if c.Name == "" {
		c.Name, _ = m["name"].(string)
	}
	if c.PreferredUsername == "" {
		c.PreferredUsername, _ = m["preferred_username"].(string)
	}
	if !c.hasGroups {
		switch v := m[groupsClaim].(type) {
		case []any:
			c.hasGroups = true
			for _, g := range v {
				if s, ok := g.(string); ok {
					c.Groups = append(c.Groups, s)
				}
			}
		case string:
			c.hasGroups, c.Groups = true, []string{v}
		}
	}
}

// claims reads the ID token's claims and, for what it lacks (many
// providers put the email and the groups only in the userinfo answer),
// the provider's userinfo for the same subject.
func (l *Login) claims(ctx context.Context, p *oidc.Provider, idt *oidc.IDToken, tok *oauth2.Token) (*claims, error) {
	var c claims
	var m map[string]any
	if err := idt.Claims(&m); err != nil {
		return nil, refused("the ID token's claims cannot be read")
	}
	c.read(m, l.cfg.GroupsClaim)
	needGroups := len(l.cfg.AllowedGroups) > 0 || l.cfg.AdminGroup != ""
	if c.Email != "" && (c.hasGroups || !needGroups) {
		return &c, nil
	}
	if p.UserInfoEndpoint() == "" {
		return &c, nil
	}
	ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, refused("the identity provider's userinfo could not be read: %v", err)
	}
	if ui.Subject != idt.Subject {
		return nil, refused("the userinfo answer is about another subject than the ID token")
	}
	m = nil
	if err := ui.Claims(&m); err != nil {
		return nil, refused("the userinfo claims cannot be read")
	}
	c.read(m, l.cfg.GroupsClaim)
	return &c, nil
}

// admit applies the policy to a verified person.
func (l *Login) admit(idt *oidc.IDToken, c *claims) (*access.ExternalIdentity, error) {
	if c.Email == "" {
		return nil, denied("the identity provider sent no email address")
	}
	if !c.EmailVerified {
		return nil, denied("the email address %s is not verified by the identity provider", c.Email)
	}
	if len(l.cfg.AllowedDomains) > 0 {
		at := strings.LastIndexByte(c.Email, '@')
		if at < 0 || !slices.Contains(l.cfg.AllowedDomains, strings.ToLower(c.Email[at+1:])) {
			return nil, denied("the email domain of %s is not one this server admits", c.Email)
		}
	}
	if len(l.cfg.AllowedGroups) > 0 && !slices.ContainsFunc(c.Groups, func(g string) bool { return slices.Contains(l.cfg.AllowedGroups, g) }) {
		return nil, denied("%s is in none of the groups this server admits", c.Email)
	}
	id := &access.ExternalIdentity{
		Subject: idt.Issuer + " " + idt.Subject, Email: c.Email, Name: c.Name,
		Username: c.PreferredUsername, How: "oidc",
	}
	if l.cfg.AdminGroup != "" {
		admin := slices.Contains(c.Groups, l.cfg.AdminGroup)
		id.Admin = &admin
	}
	return id, nil
}
