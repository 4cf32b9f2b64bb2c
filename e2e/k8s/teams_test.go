package k8s

import (
	"context"
	"fmt"
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
