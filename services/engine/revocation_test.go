package engine_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/processtest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/gateway"
	"github.com/penguin-agent/penguin/services/llm"
)

// streamEndBound is how long an open stream may go on after its caller
// lost access through the replica that serves it: the change is checked
// at once, so this is only the slack of a loaded machine.
const streamEndBound = 5 * time.Second

// teamServer is a team server on a real port, with its HTTP gateway on
// another, and Alice's project apollo holding her session s-alice.
type teamServer struct {
	ctx      context.Context
	addr     string
	web      string
	storeURL string
	svc      string
}

// startTeamServer starts a team server whose open streams are checked
// again every recheck (besides at each change made through it).
func startTeamServer(t *testing.T, recheck time.Duration) *teamServer {
	t.Helper()
	dir := t.TempDir()
	ts := &teamServer{storeURL: filepath.Join(dir, "penguin.db"), svc: "revocation-service-token"}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = lis.Addr().String()
	p, err := assemble.New(t.Context(), teamConfig(t, dir, lis, ts.svc, recheck))
	if err != nil {
		t.Fatal(err)
	}
	processtest.Serve(t, p)
	ctx := testkit.Context(t, 2*time.Minute)
	ts.ctx = ctx
	gw := gateway.New(penguinv1.NewEngineServiceClient(p.Local()), gateway.Options{
		AuthToken: ts.svc, Team: true, Accounts: penguinv1.NewAuthServiceClient(p.Local()),
		Heartbeat: 100 * time.Millisecond,
	})
	web := httptest.NewServer(gw)
	t.Cleanup(web.Close)
	ts.web = web.URL

	alice := ts.signIn(t, "alice")
	if _, err := penguinv1.NewProjectServiceClient(ts.dial(t, alice)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "apollo"}); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, ts.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	hello := store.Event{Sequence: 1, Message: &penguinv1.OmniMessage{Timestamp: timestamppb.Now(),
		Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: "hello"}}}}
	if err := st.CreateSession(ctx, &store.Session{ID: "s-alice", ProjectID: "apollo", Workspace: filepath.Join(dir, "ws")}, hello); err != nil {
		t.Fatal(err)
	}
	return ts
}

// teamConfig is a team server's configuration as the tests here start
// it: the three services in one process on lis, with the service token
// svc, the store and the workspaces in dir, no sandbox, and open streams
// checked again every recheck (zero: the server's default).
func teamConfig(t *testing.T, dir string, lis net.Listener, svc string, recheck time.Duration) assemble.Config {
	addr := lis.Addr().String()
	return assemble.Config{
		Name: "penguin", Listener: lis, AuthToken: svc, ShutdownTimeout: 5 * time.Second,
		LLM: &llm.Config{ProvidersFile: filepath.Join(dir, "providers.yaml"), Lookup: config.MapLookup(nil),
			RouteStore: filepath.Join(dir, "routes.db"), RouteSecret: []byte("team-test-route-key-secret-0123456789")},
		Environment: &environment.Config{Root: dir, ScratchDir: t.TempDir(), NoCgroups: true, DefaultSandbox: "none", Advertise: addr},
		Engine: &engine.Config{StoreURL: filepath.Join(dir, "penguin.db"), AgentState: filepath.Join(dir, "agent"), Advertise: addr, Team: true,
			AdminPasswordFile: filepath.Join(dir, "initial-admin-password"), AccessRecheck: recheck},
	}
}

func (ts *teamServer) dial(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpcclient.New(ts.addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// signIn creates the account user and returns the secret of a password
// sign-in of theirs.
func (ts *teamServer) signIn(t *testing.T, user string) string {
	t.Helper()
	op := ts.dial(t, ts.svc)
	if _, err := penguinv1.NewUserServiceClient(op).CreateUser(ts.ctx, &penguinv1.CreateUserRequest{UserId: user, Password: user + "-password"}); err != nil {
		t.Fatal(err)
	}
	s, err := penguinv1.NewAuthServiceClient(op).SignIn(ts.ctx, &penguinv1.SignInRequest{UserId: user, Password: user + "-password"})
	if err != nil {
		t.Fatal(err)
	}
	return s.GetSessionToken()
}

// member makes user a member of apollo.
func (ts *teamServer) member(t *testing.T, user string) {
	t.Helper()
	admin := ts.dial(t, ts.svc)
	if _, err := penguinv1.NewProjectServiceClient(admin).SetMember(ts.ctx, &penguinv1.SetMemberRequest{ProjectId: "apollo", UserId: user}); err != nil {
		t.Fatal(err)
	}
}

// token creates a personal access token of the user signed in with
// signIn.
func (ts *teamServer) token(t *testing.T, signIn string) (id, secret string) {
	t.Helper()
	tk, err := penguinv1.NewTokenServiceClient(ts.dial(t, signIn)).CreateToken(ts.ctx, &penguinv1.CreateTokenRequest{Name: "stream"})
	if err != nil {
		t.Fatal(err)
	}
	return tk.GetToken().GetTokenId(), tk.GetSecret()
}

// openAttach opens an Attach of s-alice with cred and waits for its first
// event, so that the stream is known to be open and authorized; the
// returned channel gets the error the stream ends with.
func (ts *teamServer) openAttach(t *testing.T, cred string) <-chan error {
	t.Helper()
	s, err := penguinv1.NewEngineServiceClient(ts.dial(t, cred)).Attach(ts.ctx, &penguinv1.AttachRequest{SessionId: "s-alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("the first event of an Attach of a member: %v", err)
	}
	return drain(func() error { _, err := s.Recv(); return err })
}

// openWatch opens a WatchSessions with cred and waits for the end of its
// snapshot.
func (ts *teamServer) openWatch(t *testing.T, cred string) <-chan error {
	t.Helper()
	s, err := penguinv1.NewEngineServiceClient(ts.dial(t, cred)).WatchSessions(ts.ctx, &penguinv1.WatchSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		ev, err := s.Recv()
		if err != nil || i == 100 {
			t.Fatalf("no snapshot end in the first %d events of a watch: %v", i, err)
		}
		if ev.GetSnapshotEnd() != nil {
			break
		}
	}
	return drain(func() error { _, err := s.Recv(); return err })
}

// drain receives until recv fails and sends that error.
func drain(recv func() error) <-chan error {
	ended := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	return ended
}

// expectEnd waits up to bound for a stream to end with code.
func (ts *teamServer) expectEnd(t *testing.T, ended <-chan error, code codes.Code, bound time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-ended:
		if status.Code(err) != code {
			t.Fatalf("the stream ended with %v; want %v", err, code)
		}
		t.Logf("the stream ended after %v: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(bound):
		t.Fatalf("the stream is still open %v after access ended; want it ended with %v", bound, code)
	}
}

// TestStreamsEndWithAccess checks that an open stream (gRPC Attach and
// WatchSessions, the gateway's SSE stream of a session) ends as soon as
// its caller loses access through the server that serves it: removed
// from the project, a token revoked, signed out, the account disabled or
// deleted, the password reset (docs/security.md, "Open streams"). The
// server checks streams again only once an hour, so every end here is
// the change's.
func TestStreamsEndWithAccess(t *testing.T) {
	ts := startTeamServer(t, time.Hour)
	admin := ts.dial(t, ts.svc)
	users := penguinv1.NewUserServiceClient(admin)

	t.Run("removed from the project", func(t *testing.T) {
		bob := ts.signIn(t, "bob")
		ts.member(t, "bob")
		attach := ts.openAttach(t, bob)
		if _, err := penguinv1.NewProjectServiceClient(admin).RemoveMember(ts.ctx, &penguinv1.RemoveMemberRequest{ProjectId: "apollo", UserId: "bob"}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.PermissionDenied, streamEndBound)
	})
	t.Run("token revoked", func(t *testing.T) {
		signIn := ts.signIn(t, "carol")
		ts.member(t, "carol")
		id, tok := ts.token(t, signIn)
		attach, watch := ts.openAttach(t, tok), ts.openWatch(t, tok)
		// Another token of hers, revoked first, ends neither.
		other, _ := ts.token(t, signIn)
		tokens := penguinv1.NewTokenServiceClient(ts.dial(t, signIn))
		if _, err := tokens.RevokeToken(ts.ctx, &penguinv1.RevokeTokenRequest{TokenId: other}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-attach:
			t.Fatalf("revoking another token ended the stream: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := tokens.RevokeToken(ts.ctx, &penguinv1.RevokeTokenRequest{TokenId: id}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.Unauthenticated, streamEndBound)
		ts.expectEnd(t, watch, codes.Unauthenticated, streamEndBound)
	})
	t.Run("signed out", func(t *testing.T) {
		signIn := ts.signIn(t, "dave")
		ts.member(t, "dave")
		attach := ts.openAttach(t, signIn)
		if _, err := penguinv1.NewAuthServiceClient(ts.dial(t, signIn)).SignOut(ts.ctx, &penguinv1.SignOutRequest{}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.Unauthenticated, streamEndBound)
	})
	t.Run("disabled", func(t *testing.T) {
		signIn := ts.signIn(t, "erin")
		ts.member(t, "erin")
		_, tok := ts.token(t, signIn)
		attach, watch := ts.openAttach(t, signIn), ts.openWatch(t, tok)
		disabled := true
		if _, err := users.UpdateUser(ts.ctx, &penguinv1.UpdateUserRequest{UserId: "erin", Disabled: &disabled}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.Unauthenticated, streamEndBound)
		ts.expectEnd(t, watch, codes.Unauthenticated, streamEndBound)
	})
	t.Run("deleted", func(t *testing.T) {
		signIn := ts.signIn(t, "frank")
		ts.member(t, "frank")
		_, tok := ts.token(t, signIn)
		attach := ts.openAttach(t, tok)
		if _, err := users.DeleteUser(ts.ctx, &penguinv1.DeleteUserRequest{UserId: "frank"}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.Unauthenticated, streamEndBound)
	})
	t.Run("password reset", func(t *testing.T) {
		signIn := ts.signIn(t, "grace")
		ts.member(t, "grace")
		attach := ts.openAttach(t, signIn)
		if _, err := users.ResetPassword(ts.ctx, &penguinv1.ResetPasswordRequest{UserId: "grace", Password: "a-new-password-of-grace"}); err != nil {
			t.Fatal(err)
		}
		ts.expectEnd(t, attach, codes.Unauthenticated, streamEndBound)
	})
	t.Run("SSE", func(t *testing.T) {
		signIn := ts.signIn(t, "heidi")
		ts.member(t, "heidi")
		closed := ts.openSSE(t, signIn)
		if _, err := penguinv1.NewProjectServiceClient(admin).RemoveMember(ts.ctx, &penguinv1.RemoveMemberRequest{ProjectId: "apollo", UserId: "heidi"}); err != nil {
			t.Fatal(err)
		}
		ts.expectSSEClosed(t, closed, streamEndBound)
	})
}

// TestStreamsEndWithAccessElsewhere checks the bound on a change the
// server does not see being made (through another replica, or in the
// store directly): the streams are checked again every second, and end
// within a few.
func TestStreamsEndWithAccessElsewhere(t *testing.T) {
	const recheck = time.Second
	ts := startTeamServer(t, recheck)
	signIn := ts.signIn(t, "bob")
	ts.member(t, "bob")
	attach := ts.openAttach(t, signIn)
	closed := ts.openSSE(t, signIn)
	st, err := store.Open(ts.ctx, ts.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if err := st.RemoveMember(ts.ctx, "apollo", "bob"); err != nil {
		t.Fatal(err)
	}
	ts.expectEnd(t, attach, codes.PermissionDenied, 3*recheck)
	ts.expectSSEClosed(t, closed, 3*recheck)

	// A token revoked in the store: the watch, which needs no project,
	// ends too.
	carol := ts.signIn(t, "carol")
	id, tok := ts.token(t, carol)
	watch := ts.openWatch(t, tok)
	if err := st.DeleteAccessToken(ts.ctx, "carol", id); err != nil {
		t.Fatal(err)
	}
	ts.expectEnd(t, watch, codes.Unauthenticated, 3*recheck)
}

// openSSE opens the gateway's SSE stream of s-alice with cred as the
// bearer token and waits for its first event; the returned channel gets
// the stream's last line once the server closes the connection.
func (ts *teamServer) openSSE(t *testing.T, cred string) <-chan string {
	t.Helper()
	req, err := http.NewRequestWithContext(ts.ctx, http.MethodGet, ts.web+"/api/sessions/s-alice/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the SSE stream of a member: %s", resp.Status)
	}
	lines := bufio.NewScanner(resp.Body)
	first := time.AfterFunc(streamEndBound, func() { _ = resp.Body.Close() })
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "data: ") {
			break
		}
	}
	if !first.Stop() {
		t.Fatalf("no event on the SSE stream of a member within %v", streamEndBound)
	}
	closed := make(chan string, 1)
	go func() {
		var last string
		for lines.Scan() {
			if l := lines.Text(); l != "" && !strings.HasPrefix(l, ":") {
				last = l
			}
		}
		closed <- last
	}()
	return closed
}

// expectSSEClosed waits up to bound for the server to close an SSE
// stream, with an error event saying access ended.
func (ts *teamServer) expectSSEClosed(t *testing.T, closed <-chan string, bound time.Duration) {
	t.Helper()
	select {
	case last := <-closed:
		if !strings.Contains(last, `"permission_denied"`) && !strings.Contains(last, `"unauthenticated"`) {
			t.Fatalf("the SSE stream closed after %q; want an error event saying access ended", last)
		}
	case <-time.After(bound):
		t.Fatalf("the SSE stream is still open %v after access ended", bound)
	}
}
