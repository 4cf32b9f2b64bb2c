package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
)

// dial connects to addr presenting token; the connection closes when the
// test ends.
func dial(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpcclient.New(addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// userPAT creates the account id with a password (as the operator, at
// addr), signs it in there, and returns a full personal access token the
// user created with that sign-in.
func (c *cluster) userPAT(ctx context.Context, t *testing.T, addr, id string) string {
	t.Helper()
	pw := "k8s-password-" + id
	if _, err := penguinv1.NewUserServiceClient(dial(t, addr, c.token)).CreateUser(ctx, &penguinv1.CreateUserRequest{UserId: id, Password: pw}); err != nil {
		t.Fatalf("create user %s: %v", id, err)
	}
	in, err := penguinv1.NewAuthServiceClient(dial(t, addr, "")).SignIn(ctx, &penguinv1.SignInRequest{UserId: id, Password: pw})
	if err != nil {
		t.Fatalf("sign in as %s: %v", id, err)
	}
	tok, err := penguinv1.NewTokenServiceClient(dial(t, addr, in.GetSessionToken())).CreateToken(ctx, &penguinv1.CreateTokenRequest{
		Name: "k8s", Scope: penguinv1.TokenScope_TOKEN_SCOPE_FULL, TtlSeconds: 3600,
	})
	if err != nil {
		t.Fatalf("create %s's token: %v", id, err)
	}
	return tok.GetSecret()
}

// sessionOfAInvisibleToB: users A and B, each with a personal access
// token made through the first engine pod. A makes a project and a
// session in it through the first pod; the second pod shows it to A, and
// neither pod shows it to B, by id (NOT_FOUND, in the words of a session
// that does not exist) or in B's listing.
func (c *cluster) sessionOfAInvisibleToB(ctx context.Context, t *testing.T) {
	one, two := c.twoEngines(t)
	n := time.Now().UnixNano() % 1_000_000_000
	alice, bob := fmt.Sprintf("alice-%d", n), fmt.Sprintf("bob-%d", n)
	alicePAT, bobPAT := c.userPAT(ctx, t, one+":7420", alice), c.userPAT(ctx, t, one+":7420", bob)
	project := "teams-" + alice
	if _, err := penguinv1.NewProjectServiceClient(dial(t, one+":7420", alicePAT)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: project}); err != nil {
		t.Fatalf("alice creates her project: %v", err)
	}
	made, err := penguinv1.NewEngineServiceClient(dial(t, one+":7420", alicePAT)).CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"}, Workspace: "teams-k8s", ProjectId: project,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatalf("alice creates a session on %s: %v", one, err)
	}
	id := made.GetSession().GetSessionId()
	if _, err := penguinv1.NewEngineServiceClient(dial(t, two+":7420", alicePAT)).GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id}); err != nil {
		t.Fatalf("alice reads her session through %s: %v", two, err)
	}
	_, unknown := penguinv1.NewEngineServiceClient(dial(t, two+":7420", bobPAT)).GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: "no-such-session"})
	for _, pod := range []string{one, two} {
		eng := penguinv1.NewEngineServiceClient(dial(t, pod+":7420", bobPAT))
		_, err := eng.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
		if status.Code(err) != codes.NotFound || status.Convert(err).Message() != strings.ReplaceAll(status.Convert(unknown).Message(), "no-such-session", id) {
			t.Fatalf("bob reads alice's session through %s: %v; want NOT_FOUND as for a session that does not exist (%v)", pod, err, unknown)
		}
		list, err := eng.ListSessions(ctx, &penguinv1.ListSessionsRequest{})
		if err != nil {
			t.Fatalf("bob lists his sessions through %s: %v", pod, err)
		}
		for _, s := range list.GetSessions() {
			if s.GetSessionId() == id {
				t.Fatalf("bob's listing through %s shows alice's session", pod)
			}
		}
	}
	t.Logf("alice's session %s (project %s) made on %s, read by her on %s, hidden from bob on both", id, project, one, two)
}

// The suite's identity provider (overlay/oidcop.yaml) and the engine
// Service, by the names the engines are configured with: the issuer URL
// and the callback registered with the provider.
const (
	oidcIssuer = "http://penguin-oidcop:9998"
	engineWeb  = "http://penguin-engine:7480"
)

// browser is an HTTP client with a cookie jar that follows redirects, as
// a browser does, and reaches the engine and the identity provider by the
// names the engines were configured with: it resolves them to their
// Services' addresses, as the cluster's DNS does for the pods (the test
// process is in the cluster's network, not its DNS). It records every
// URL it is redirected to.
type browser struct {
	*http.Client
	visited []*url.URL
}

func (c *cluster) newBrowser(t *testing.T) *browser {
	t.Helper()
	hosts := map[string]string{}
	for _, svc := range []string{engineDeploy, "penguin-oidcop"} {
		hosts[svc] = c.kubectl(t, "get", "service", svc, "-o", "jsonpath={.spec.clusterIP}")
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{}
	b.Client = &http.Client{Jar: jar, Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if ip, ok := hosts[host]; ok {
				addr = net.JoinHostPort(ip, port)
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	b.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		b.visited = append(b.visited, req.URL)
		return nil
	}
	return b
}

// get GETs u with the browser (and, when cookie is set, that cookie
// as well, for an address the jar does not know) and returns the status
// and the body.
func (b *browser) get(ctx context.Context, t *testing.T, u string, cookie *http.Cookie) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, string(body)
}

// oidcUserSeesOwnProjectNotOthers signs a browser in through the engine
// Service by the authorization code flow with PKCE at the identity
// provider's pod (following the redirects there and back: the sign-in
// begun on one engine replica may be completed by the other, through the
// store), with the engines' issuer and client id from their
// configuration and the client secret from a Secret. The user the
// provider vouches for (alice@example.com) creates a project from the
// browser and sees it listed; user A's session is invisible to them
// through either engine pod, over HTTP with the browser's cookie and over
// gRPC with the same sign-in.
func (c *cluster) oidcUserSeesOwnProjectNotOthers(ctx context.Context, t *testing.T) {
	one, two := c.twoEngines(t)
	b := c.newBrowser(t)
	code, body := b.get(ctx, t, engineWeb+"/api/auth/oidc/start", nil)
	if len(b.visited) == 0 {
		t.Fatalf("the sign-in start was not redirected: %d %s", code, body)
	}
	var authorize, callback *url.URL
	for _, u := range b.visited {
		switch {
		case authorize == nil && strings.HasPrefix(u.String(), oidcIssuer+"/"):
			authorize = u
		case u.Path == "/api/auth/oidc/callback":
			callback = u
		}
	}
	end := b.visited[len(b.visited)-1]
	if authorize == nil || callback == nil || callback.Host != "penguin-engine:7480" || end.Path != "/" || end.Query().Get("signin_error") != "" {
		t.Fatalf("the sign-in went %v (%d); want the provider, the engine's callback, then the app", b.visited, code)
	}
	if q := authorize.Query(); q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "penguin" {
		t.Fatalf("the authorization request %s has no S256 PKCE challenge or not the configured client id", authorize)
	}
	code, body = b.get(ctx, t, engineWeb+"/api/auth", nil)
	var st struct {
		SignedIn  bool   `json:"signed_in"`
		CSRFToken string `json:"csrf_token"`
		OIDCName  string `json:"oidc_name"`
		User      *struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK || !st.SignedIn || st.User == nil || st.OIDCName != "Example SSO" {
		t.Fatalf("after the sign-in GET /api/auth: %d %s (%v); want signed in through Example SSO", code, body, err)
	}
	web, _ := url.Parse(engineWeb)
	var session *http.Cookie
	for _, ck := range b.Jar.Cookies(web) {
		if ck.Name == "penguin_session" {
			session = ck
		}
	}
	if session == nil || !strings.HasPrefix(session.Value, "pgn_ses_") {
		t.Fatalf("no login-session cookie after the sign-in: %v", b.Jar.Cookies(web))
	}

	// Their own project, made from the browser, is theirs to see.
	n := time.Now().UnixNano() % 1_000_000_000
	project := fmt.Sprintf("oidc-%d", n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, engineWeb+"/api/projects", strings.NewReader(`{"project_id":"`+project+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", st.CSRFToken)
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("%s creates a project from the browser: %s", st.User.ID, resp.Status)
	}
	if code, body := b.get(ctx, t, engineWeb+"/api/projects", nil); code != http.StatusOK || !strings.Contains(body, project) {
		t.Fatalf("%s's projects: %d %s; want %s", st.User.ID, code, body, project)
	}

	// User A's session, made through the first pod.
	alice := fmt.Sprintf("alice-%d", n)
	alicePAT := c.userPAT(ctx, t, one+":7420", alice)
	if _, err := penguinv1.NewProjectServiceClient(dial(t, one+":7420", alicePAT)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "teams-" + alice}); err != nil {
		t.Fatalf("%s creates her project: %v", alice, err)
	}
	made, err := penguinv1.NewEngineServiceClient(dial(t, one+":7420", alicePAT)).CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"}, Workspace: "teams-oidc-k8s", ProjectId: "teams-" + alice,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatalf("%s creates a session: %v", alice, err)
	}
	id := made.GetSession().GetSessionId()
	for _, pod := range []string{one, two} {
		base := "http://" + net.JoinHostPort(pod, "7480")
		if code, body := b.get(ctx, t, base+"/api/sessions/"+id, session); code != http.StatusNotFound || strings.Contains(body, alice) {
			t.Fatalf("%s reads %s's session through %s: %d %s; want 404", st.User.ID, alice, pod, code, body)
		}
		if code, body := b.get(ctx, t, base+"/api/sessions", session); code != http.StatusOK || strings.Contains(body, id) {
			t.Fatalf("%s's session list through %s: %d %s; want it without %s", st.User.ID, pod, code, body, id)
		}
		_, err := penguinv1.NewEngineServiceClient(dial(t, pod+":7420", session.Value)).GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("%s's GetSession of %s's session through %s: %v; want NOT_FOUND", st.User.ID, alice, pod, err)
		}
	}
	t.Logf("%s signed in through %s by %v; sees project %s, not %s's session %s on %s or %s",
		st.User.ID, oidcIssuer, b.visited, project, alice, id, one, two)
}
