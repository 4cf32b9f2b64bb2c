package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/oidcop"
)

// TestOIDCSignIn signs a browser (an HTTP client with a cookie jar that
// follows redirects, as a browser does) in through a real OpenID Provider
// on loopback: `penguin serve` configured by flags and the client secret
// by its environment variable. The sign-in page is told the provider's
// name; a good sign-in ends with the gateway's login-session cookie and
// the user it created, a second with the same user; a person of a domain
// not admitted comes back to the sign-in page with the reason and no
// cookie; and the client secret shows up in no log.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	op := oidcop.Start(t,
		oidcop.User{ID: "sub-alice", Username: "alice", Email: "alice@example.com", EmailVerified: true},
		oidcop.User{ID: "sub-mallory", Username: "mallory", Email: "mallory@elsewhere.org", EmailVerified: true},
	)
	// The gateway's address goes into the redirect URL, registered with
	// the provider before the server starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	_ = ln.Close()
	base := "http://" + httpAddr
	clientID, secret := op.Client(base + "/api/auth/oidc/callback")
	srv := start(t, "penguin serve --oidc-issuer", []string{"PENGUIN_HOME=" + t.TempDir(), "PENGUIN_OIDC_CLIENT_SECRET=" + secret},
		"serve", "--listen", "127.0.0.1:0", "--http-listen", httpAddr, "--root", "/",
		"--oidc-issuer", op.Issuer, "--oidc-client-id", clientID, "--oidc-redirect-url", base+"/api/auth/oidc/callback",
		"--oidc-name", "Example SSO", "--oidc-allowed-domains", "example.com")
	srv.WaitLog("HTTP gateway listening", nil, "addr", time.Minute)

	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 20 * time.Second}
	}
	type state struct {
		Mode     string `json:"mode"`
		SignedIn bool   `json:"signed_in"`
		OIDCName string `json:"oidc_name"`
		User     *struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	authState := func(c *http.Client) state {
		t.Helper()
		resp, err := c.Get(base + "/api/auth")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st state
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	// signIn goes through the provider and returns where the browser
	// ended up.
	signIn := func(c *http.Client, sub string) *url.URL {
		t.Helper()
		op.SignInAs(sub)
		resp, err := c.Get(base + "/api/auth/oidc/start")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.Request.URL
	}

	anon := browser()
	if st := authState(anon); st.SignedIn || st.OIDCName != "Example SSO" || st.Mode != "team" {
		t.Fatalf("before sign-in /api/auth says %+v; want the provider's name, team mode, not signed in", st)
	}

	alice := browser()
	if end := signIn(alice, "sub-alice"); end.Path != "/" || end.Query().Get("signin_error") != "" {
		t.Fatalf("alice's sign-in ended at %s", end)
	}
	st := authState(alice)
	if !st.SignedIn || st.User == nil || st.User.ID != "alice" {
		t.Fatalf("after sign-in /api/auth says %+v; want alice", st)
	}
	u, _ := url.Parse(base)
	for _, c := range alice.Jar.Cookies(u) {
		if c.Name == "penguin_session" && !strings.HasPrefix(c.Value, "pgn_ses_") {
			t.Fatalf("the session cookie is not a login session: %q", c.Value)
		}
	}
	// Her sign-in reaches the API, as a password sign-in's does.
	resp, err := alice.Get(base + "/api/projects")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("alice lists her projects: %v, %v", resp, err)
	}
	_ = resp.Body.Close()

	// A second sign-in, in another browser, is the same user.
	again := browser()
	signIn(again, "sub-alice")
	if st := authState(again); st.User == nil || st.User.ID != "alice" {
		t.Fatalf("second sign-in: %+v; want alice again", st)
	}

	// Mallory's domain is not admitted: back to the sign-in page, with
	// the reason, and no session.
	mallory := browser()
	end := signIn(mallory, "sub-mallory")
	if end.Path != "/" || !strings.Contains(end.Query().Get("signin_error"), "email domain") {
		t.Fatalf("mallory's sign-in ended at %s; want the sign-in page with the domain refusal", end)
	}
	if st := authState(mallory); st.SignedIn {
		t.Fatalf("mallory is signed in: %+v", st)
	}

	// A callback without the browser's cookie (another browser's answer)
	// is refused.
	op.SignInAs("sub-alice")
	noFollow := browser()
	noFollow.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/api/auth/oidc/callback" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err = noFollow.Get(base + "/api/auth/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	callback := resp.Header.Get("Location")
	if !strings.Contains(callback, "/api/auth/oidc/callback?") {
		t.Fatalf("the provider's redirect back: %s %q", resp.Status, callback)
	}
	stranger := browser()
	resp, err = stranger.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !strings.Contains(resp.Request.URL.Query().Get("signin_error"), "another browser") || authState(stranger).SignedIn {
		t.Fatalf("another browser's callback ended at %s", resp.Request.URL)
	}

	if strings.Contains(srv.Output(), secret) {
		t.Fatalf("the client secret is in the server's log")
	}
}
