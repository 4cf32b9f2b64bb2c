package engine_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/internal/testkit/processtest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/access"
)

// TestIsolationAcrossReplicas runs two team engine replicas, each with
// its HTTP gateway, on one PostgreSQL store. Alice's task waits for her
// approval on replica B, which holds the session's lease. Through replica
// A, whose calls for that run are forwarded to B, Bob (no member of her
// project) gets for every call on her session (Attach, Steer, Approve,
// Abort, RetryNow, GetSession, GetHistory, and the gateway's SSE stream)
// the very answer he gets from B itself, NOT_FOUND in the words of a
// session that does not exist, while Alice's own calls through A do reach
// her run on B. A call forwarded into B with Bob's credential (as a
// replica passes it on, with the cluster's service token) is refused by
// B in the same words: the service token lends it nothing.
func TestIsolationAcrossReplicas(t *testing.T) {
	b := enginetest.NewBackends(t,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "exec_command", Arguments: `{"cmd":"echo ` + secret + `","description":"x"}`}}},
		emulator.Turn{Text: "Done: " + secret},
	)
	storeURL := pgtest.URL(t, "replicaiso")
	const svc = "replica-isolation-service-token"
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	type replica struct{ addr, web string }
	start := func(name string) replica {
		t.Helper()
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		webAddr := make(chan string, 1)
		p, err := assemble.New(ctx, assemble.Config{
			Name: name, Listener: lis, AuthToken: svc, ShutdownTimeout: 5 * time.Second,
			LLMAddr: b.LLM, EnvironmentAddr: b.Environment,
			Engine: &engine.Config{StoreURL: storeURL, AgentState: filepath.Join(dir, "agent"), Advertise: lis.Addr().String(), Team: true,
				AdminPasswordFile: filepath.Join(dir, "initial-admin-password")},
			Gateway: &assemble.GatewayConfig{Listen: "127.0.0.1:0", Listening: func(a net.Addr) { webAddr <- a.String() }},
		})
		if err != nil {
			t.Fatal(err)
		}
		processtest.Serve(t, p)
		return replica{addr: lis.Addr().String(), web: "http://" + <-webAddr}
	}
	ra, rb := start("engine-a"), start("engine-b")

	dial := func(r replica, token string) *grpc.ClientConn {
		t.Helper()
		conn, err := grpcclient.New(r.addr, grpcclient.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	op := dial(ra, svc)
	tokenOf := func(user string) string {
		t.Helper()
		if _, err := penguinv1.NewUserServiceClient(op).CreateUser(ctx, &penguinv1.CreateUserRequest{UserId: user, Password: user + "-password"}); err != nil {
			t.Fatal(err)
		}
		s, err := penguinv1.NewAuthServiceClient(op).SignIn(ctx, &penguinv1.SignInRequest{UserId: user, Password: user + "-password"})
		if err != nil {
			t.Fatal(err)
		}
		return s.GetSessionToken()
	}
	alice, bob := tokenOf("alice"), tokenOf("bob")
	if _, err := penguinv1.NewProjectServiceClient(dial(ra, alice)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "apollo"}); err != nil {
		t.Fatal(err)
	}

	// Alice's task runs on B and waits for her approval.
	aliceB := penguinv1.NewEngineServiceClient(dial(rb, alice))
	created, err := aliceB.CreateSession(ctx, &penguinv1.CreateSessionRequest{ProjectId: "apollo", Model: enginetest.Model, Workspace: "ws", ApprovalMode: alwaysAsk})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	run, err := aliceB.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "say " + secret})
	if err != nil {
		t.Fatal(err)
	}
	var ask *penguinv1.ApprovalRequest
	for ask == nil {
		resp, err := run.Recv()
		if err != nil {
			t.Fatalf("Alice's run before its approval request: %v", err)
		}
		ask = resp.GetEvent().GetApprovalRequest()
	}
	callID := ask.GetToolCall().GetToolCallId()

	// Every call Bob may try on her run, on a replica's engine.
	type call struct {
		name string
		do   func(penguinv1.EngineServiceClient, context.Context) error
	}
	calls := []call{
		{"Attach", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			s, err := c.Attach(ctx, &penguinv1.AttachRequest{SessionId: id})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
		{"Steer", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "hijack"})
			return err
		}},
		{"Approve", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: callID, Decision: penguinv1.Decision_DECISION_ALLOW})
			return err
		}},
		{"Abort", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.Abort(ctx, &penguinv1.AbortRequest{SessionId: id})
			return err
		}},
		{"RetryNow", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.RetryNow(ctx, &penguinv1.RetryNowRequest{SessionId: id})
			return err
		}},
		{"GetSession", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
			return err
		}},
		{"GetHistory", func(c penguinv1.EngineServiceClient, ctx context.Context) error {
			_, err := c.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id})
			return err
		}},
	}
	bobA, bobB := penguinv1.NewEngineServiceClient(dial(ra, bob)), penguinv1.NewEngineServiceClient(dial(rb, bob))
	// A call as a replica forwards it: the cluster's service token on
	// the connection, Bob's credential and the forwarding mark in the
	// metadata.
	forwardedToB := penguinv1.NewEngineServiceClient(dial(rb, svc))
	asForwarded := metadata.AppendToOutgoingContext(ctx, access.CredentialHeader, bob, "penguin-forwarded-by", ra.addr)
	for _, c := range calls {
		callCtx, cancelCall := context.WithTimeout(ctx, 20*time.Second)
		local := c.do(bobB, callCtx)
		viaA := c.do(bobA, callCtx)
		forwarded := c.do(forwardedToB, asForwarded)
		cancelCall()
		if status.Code(local) != codes.NotFound || !strings.Contains(status.Convert(local).Message(), "not found") {
			t.Errorf("Bob's %s on the owning replica: %v; want NOT_FOUND", c.name, local)
		}
		for how, err := range map[string]error{"through replica A": viaA, "forwarded into B": forwarded} {
			if status.Code(err) != status.Code(local) || status.Convert(err).Message() != status.Convert(local).Message() {
				t.Errorf("Bob's %s %s: %v; want what the owner answers him: %v", c.name, how, err, local)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("Bob's %s %s leaks the secret: %v", c.name, how, err)
			}
		}
	}

	// The SSE stream of A's gateway: 404 for Bob, the run for Alice.
	stream := func(token string) (int, string) {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
		defer scancel()
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, ra.web+"/api/sessions/"+id+"/stream", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for lines := 0; lines < 1000 && !strings.Contains(got.String(), secret) && sc.Scan(); lines++ {
			got.WriteString(sc.Text() + "\n")
		}
		return resp.StatusCode, got.String()
	}
	if code, body := stream(bob); code != http.StatusNotFound || strings.Contains(body, secret) {
		t.Errorf("Bob's SSE stream of Alice's session through replica A: %d %q; want 404 without her secret", code, body)
	}
	if code, body := stream(alice); code != http.StatusOK || !strings.Contains(body, secret) {
		t.Errorf("Alice's SSE stream through replica A: %d %q; want her run", code, body)
	}

	// Alice's own calls through A reach her run on B: her steer goes to
	// the model, her approval lets the task end.
	aliceA := penguinv1.NewEngineServiceClient(dial(ra, alice))
	if _, err := aliceA.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "steered through A"}); err != nil {
		t.Fatalf("Alice's Steer through replica A: %v", err)
	}
	if _, err := aliceA.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: callID, Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
		t.Fatalf("Alice's Approve through replica A: %v", err)
	}
	evs, err := enginetest.Collect(run)
	if err != nil {
		t.Fatal(err)
	}
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("Alice's run ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	if reqs := b.Emulator.Requests(); len(reqs) < 2 || !strings.Contains(string(reqs[len(reqs)-1].RawBody), "steered through A") {
		t.Fatalf("the model's last request does not carry Alice's steer through replica A")
	}
}
