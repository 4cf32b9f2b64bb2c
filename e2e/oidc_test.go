package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/oidcop"
)

// TestOIDCSignIn signs a browser (an HTTP client with a cookie jar that
// follows redirects, as a browser does) in through a real OpenID Provider
// on loopback: `penguin serve` configured by flags and the client secret
// by its environment variable. The sign-in page is told the provider's
// name; a good sign-in ends with the gateway's login-session cookie and
// the user it created, a second with the same user; a person of a domain
// not admitted comes back to the sign-in page with the reason and no
// cookie; a flood of sign-in starts from one address is refused without
// keeping another address from signing in; and the client secret shows
// up in no log.
func TestOIDCSignIn(t *testing.T) {
	t.Parallel()
	op := oidcop.Start(t,
		oidcop.User{ID: "sub-alice", Username: "alice", Email: "alice@example.com", EmailVerified: true},
		oidcop.User{ID: "sub-mallory", Username: "mallory", Email: "mallory@elsewhere.org", EmailVerified: true},
	)
	srv, base, secret := serveWithOIDC(t, op, "--oidc-name", "Example SSO", "--oidc-allowed-domains", "example.com")

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

	// A flood of starts from one address is cut off (429) long before
	// the engine's bound on pending sign-ins; a person at another
	// address still signs in.
	flooded := false
	for i := 0; i < 60 && !flooded; i++ {
		resp, err := noFollow.Get(base + "/api/auth/oidc/start")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		flooded = resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != ""
	}
	if !flooded {
		t.Fatal("60 sign-in starts from one address in a row were all let through")
	}
	elsewhere := browser()
	elsewhere.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	if end := signIn(elsewhere, "sub-alice"); end.Path != "/" || end.Query().Get("signin_error") != "" || !authState(elsewhere).SignedIn {
		t.Fatalf("a sign-in from another address during the flood ended at %s", end)
	}

	if strings.Contains(srv.Output(), secret) {
		t.Fatalf("the client secret is in the server's log")
	}
}

// TestOIDCLoginCLI signs `penguin login --oidc` in through a real OpenID
// Provider: the CLI process listens on loopback and prints the URL; a
// browser (an HTTP client following redirects) goes through the
// provider and the gateway's callback to the CLI's listener, and the CLI
// completes the sign-in and keeps the login session in its credentials
// file. An answer with another state sent to the listener first is
// refused and does not end the wait; replaying the provider's answer
// afterwards (at the callback, or straight to the engine) is refused; a
// redirect address that is not loopback is refused.
func TestOIDCLoginCLI(t *testing.T) {
	t.Parallel()
	op := oidcop.Start(t, oidcop.User{ID: "sub-alice", Username: "alice", Email: "alice@example.com", EmailVerified: true})
	srv, base, secret := serveWithOIDC(t, op)
	addr := grpcAddr(srv, "penguin")

	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	cli := start(t, "penguin login --oidc", env, "login", "--oidc", "--no-browser", "--engine", addr)
	cli.WaitOutput("Waiting for the sign-in", time.Minute)
	authURL := regexp.MustCompile(`(?m)^  (http://\S+)$`).FindStringSubmatch(cli.Output())
	if authURL == nil || !strings.HasPrefix(authURL[1], op.Issuer) {
		t.Fatalf("the CLI printed no authorization URL of the provider:\n%s", cli.Output())
	}
	u, _ := url.Parse(authURL[1])
	loopback, err := url.Parse(u.Query().Get("redirect_uri"))
	if err != nil || loopback.String() != base+"/api/auth/oidc/callback" {
		t.Fatalf("the provider is asked to return to %q; want the gateway's callback", u.Query().Get("redirect_uri"))
	}

	// The browser: it follows every redirect and records the provider's
	// answer to the gateway and the gateway's to the CLI.
	var callback, toCLI *url.URL
	browser := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		switch {
		case req.URL.Path == "/api/auth/oidc/callback":
			callback = req.URL
		case req.URL.Path == "/callback":
			toCLI = req.URL
		}
		return nil
	}}
	get := func(c *http.Client, u string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// A page that learnt the listener's port (here: its address, read
	// from the process) sends it an answer of its own: refused, and the
	// CLI keeps waiting.
	cliAddr := listeningAddr(t, cli.Pid())
	resp, body := get(http.DefaultClient, "http://"+cliAddr+"/callback?state=forged&code=forged")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "state mismatch") {
		t.Fatalf("a forged answer to the CLI: %s %q; want 400 state mismatch", resp.Status, body)
	}
	select {
	case <-cli.Exited():
		t.Fatalf("the CLI gave up on a forged answer:\n%s", cli.Output())
	default:
	}

	op.SignInAs("sub-alice")
	resp, body = get(browser, authURL[1])
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Signed in to "+addr+" as alice") {
		t.Fatalf("the browser ended at %s: %s %q", resp.Request.URL, resp.Status, body)
	}
	if toCLI == nil || toCLI.Host != cliAddr || callback == nil {
		t.Fatalf("the browser went to the gateway at %v and to the CLI at %v; want the CLI at %s", callback, toCLI, cliAddr)
	}
	if cli.Wait(time.Minute) != 0 || !strings.Contains(cli.Output(), "Signed in to "+addr+" as alice") {
		t.Fatalf("the CLI:\n%s", cli.Output())
	}
	creds := filepath.Join(home, ".config", "penguin", "credentials.json")
	fi, err := os.Stat(creds)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v, %v; want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(creds); !strings.Contains(string(b), "pgn_ses_") || !strings.Contains(string(b), `"user": "alice"`) {
		t.Fatalf("the credentials file holds:\n%s", b)
	}
	who := start(t, "penguin whoami", env, "whoami", "--engine", addr)
	if who.Wait(time.Minute) != 0 || !strings.Contains(who.Output(), "alice") {
		t.Fatalf("whoami with the kept sign-in:\n%s", who.Output())
	}
	// The session cookie went to no browser: the login session is the
	// CLI's alone.
	if strings.Contains(cli.Output(), "pgn_ses_") {
		t.Fatalf("the CLI printed the session secret:\n%s", cli.Output())
	}

	// The provider's answer, replayed at the gateway or straight to the
	// engine, signs no one in.
	resp, _ = get(http.DefaultClient, callback.String())
	if !strings.Contains(resp.Request.URL.Query().Get("signin_error"), "unknown or was completed") {
		t.Fatalf("the replayed callback ended at %s", resp.Request.URL)
	}
	conn, err := grpcclient.New(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := penguinv1.NewAuthServiceClient(conn)
	ctx := testkit.Context(t, time.Minute)
	_, err = auth.CompleteOIDCSignIn(ctx, &penguinv1.CompleteOIDCSignInRequest{
		State: toCLI.Query().Get("state"), Code: toCLI.Query().Get("code"),
		BrowserBinding: strings.Repeat("x", 43), LoopbackRedirect: "http://" + cliAddr + "/callback",
	})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "unknown or was completed") {
		t.Fatalf("the replayed code: %v; want UNAUTHENTICATED, unknown or completed", err)
	}
	// A redirect that is not loopback is refused.
	_, err = auth.BeginOIDCSignIn(ctx, &penguinv1.BeginOIDCSignInRequest{BrowserBinding: strings.Repeat("x", 43), LoopbackRedirect: "http://evil.example:8080/callback"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "loopback_redirect") {
		t.Fatalf("a non-loopback redirect: %v; want INVALID_ARGUMENT naming loopback_redirect", err)
	}
	if strings.Contains(srv.Output(), secret) {
		t.Fatalf("the client secret is in the server's log")
	}
}

// TestOIDCStartLimitOverGRPC floods AuthService.BeginOIDCSignIn over
// gRPC from one address: it is cut off with RESOURCE_EXHAUSTED long
// before the engine's bound on pending sign-ins, while a client at
// another address still begins a sign-in, and so does a browser through
// the gateway (which reaches the engine in-process and limits each of its
// clients itself, so the gRPC flood does not count against it).
func TestOIDCStartLimitOverGRPC(t *testing.T) {
	t.Parallel()
	op := oidcop.Start(t, oidcop.User{ID: "sub-alice", Username: "alice", Email: "alice@example.com", EmailVerified: true})
	srv, base, _ := serveWithOIDC(t, op)
	addr := grpcAddr(srv, "penguin")
	ctx := testkit.Context(t, time.Minute)
	dialFrom := func(ip net.IP) penguinv1.AuthServiceClient {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		conn, err := grpcclient.New(addr, grpcclient.Options{DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, target string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", target)
		})}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return penguinv1.NewAuthServiceClient(conn)
	}
	begin := func(c penguinv1.AuthServiceClient) error {
		_, err := c.BeginOIDCSignIn(ctx, &penguinv1.BeginOIDCSignInRequest{BrowserBinding: strings.Repeat("x", 43)})
		return err
	}

	flooder := dialFrom(net.IPv4(127, 0, 0, 1))
	var refused error
	for i := 0; i < 60 && refused == nil; i++ {
		if err := begin(flooder); status.Code(err) == codes.ResourceExhausted {
			refused = err
		} else if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
	}
	if refused == nil {
		t.Fatal("60 sign-in starts over gRPC from one address in a row were all let through")
	}
	if !strings.Contains(refused.Error(), "too many sign-ins") {
		t.Fatalf("the refusal says %q", refused)
	}
	if err := begin(dialFrom(net.IPv4(127, 0, 0, 2))); err != nil {
		t.Fatalf("a start from another address during the flood: %v", err)
	}
	noFollow := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(base + "/api/auth/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), op.Issuer) {
		t.Fatalf("a browser's start through the gateway during the flood: %s to %q; want a redirect to the provider", resp.Status, resp.Header.Get("Location"))
	}
}

// listeningAddr returns the one TCP address on 127.0.0.1 that process
// pid listens on, from /proc.
func listeningAddr(t *testing.T, pid int) string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", "tcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// local_address is hex ip:port; state 0A is LISTEN.
		if len(f) > 9 && f[3] == "0A" && inodes[f[9]] && strings.HasPrefix(f[1], "0100007F:") {
			port, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0100007F:"), 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			return "127.0.0.1:" + strconv.Itoa(int(port))
		}
	}
	t.Fatalf("process %d listens on no loopback TCP port", pid)
	return ""
}

// serveWithOIDC starts penguin serve signing in through op, with extra
// flags, and returns it once its gateway listens, the gateway's base URL
// and the client secret it was given. The gateway's address goes into the redirect URL, registered with
// the provider before the server starts.
func serveWithOIDC(t *testing.T, op *oidcop.Provider, extra ...string) (*netns.Proc, string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	_ = ln.Close()
	base := "http://" + httpAddr
	clientID, secret := op.Client(base + "/api/auth/oidc/callback")
	srv := start(t, "penguin serve --oidc-issuer", []string{"PENGUIN_HOME=" + t.TempDir(), "PENGUIN_OIDC_CLIENT_SECRET=" + secret},
		append([]string{"serve", "--listen", "127.0.0.1:0", "--http-listen", httpAddr, "--root", "/",
			"--oidc-issuer", op.Issuer, "--oidc-client-id", clientID, "--oidc-redirect-url", base + "/api/auth/oidc/callback"}, extra...)...)
	srv.WaitLog("HTTP gateway listening", nil, "addr", time.Minute)
	return srv, base, secret
}
