package engine_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// readsPerTask is what a task of the end-to-end benchmark's shape reads
// here: at CreateSession the caller's memberships, the agent's version
// and the project's model settings, in one statement
// (store.ReadForNewSession); at Run the row with the caller's membership
// of its project (one statement). The row, the log, the model settings
// and the agent's version a Run prepares from are read on the writer's
// connection (PeekLease), not on the readers.
const readsPerTask = 2

// A task (a new session, then a Run of two model turns and one tool call)
// runs at most readsPerTask statements on the store's readers, its calls
// authorized by a local server's Guard and its agent kept in a working
// copy of the store's, as `penguin serve` runs them. Before CreateSession
// read its three things in one statement, a task ran 4; before the Run's
// read of the agent's version was made with the row (PeekLease), 5.
// Before that, without the copy: 7 before the row and the membership were
// one statement and the row and the log were read with the lease, 4
// before the model settings were read with the row.
func TestTaskReads(t *testing.T) {
	e := newEnv(t, withAgents(t))
	e.guard()
	reply := func() []*fake.Reply {
		return []*fake.Reply{
			fake.NewReply().ToolCall("c1", "read_file", `{"path":"hello.txt"}`).Done(),
			fake.NewReply().Text("It says hello.").Done(),
		}
	}
	e.llm.Generate = fake.Script(append(reply(), reply()...)...)
	task := func() {
		id := e.create(readOnly)
		if st := end(t, e.run(id, "Read hello.txt and tell me what it says")); st.GetStatus() != completedS {
			t.Fatalf("the task ended %v: %s", st.GetStatus(), st.GetMessage())
		}
	}
	task() // the first session of a spec also learns the tools
	c := e.store.(store.ReadCounter)
	before := c.Reads()
	task()
	if n := c.Reads() - before; n > readsPerTask {
		t.Fatalf("a task ran %d statements on the store's readers, want at most %d", n, readsPerTask)
	}
}

// A change of the session's agent, made through another replica or a
// command on the same store between two runs, holds at the very next
// run: the run reads the agent's version with the session's row
// (PeekLease), and the working copy brings itself up to date from it. An
// agent deleted meanwhile is no longer run.
func TestAgentChangeHoldsAtTheNextRun(t *testing.T) {
	e := newEnv(t, withAgents(t))
	e.guard()
	ctx := e.ctx()
	agents := e.store.(store.AgentStore)
	const agent = "reviewer"
	if _, err := agents.CreateAgent(ctx, store.DefaultProject, agent, []store.AgentFile{{Path: "system_config.yaml", Data: []byte(testConfig)}}); err != nil {
		t.Fatal(err)
	}
	e.llm.Generate = fake.Script(fake.NewReply().Text("ok").Done(), fake.NewReply().Text("ok").Done(), fake.NewReply().Text("ok").Done())
	created, err := e.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, Workspace: "/work/ws", AgentState: agent,
		ApprovalMode: allowAll,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	run := func(window int64) {
		t.Helper()
		asked := len(e.llm.Requests())
		if st := end(t, e.run(id, "hi")); st.GetStatus() != completedS {
			t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
		}
		if got := e.llm.Requests()[asked].GetContextWindow(); got != window {
			t.Fatalf("the request carries the context window %d, want the agent's %d", got, window)
		}
	}
	change := func(window int64) {
		t.Helper()
		cfg := fmt.Sprintf("%smodel:\n  context_window: %d\n", testConfig, window)
		if _, err := agents.ChangeAgent(ctx, store.DefaultProject, agent, []store.AgentChange{
			{Path: "system_config.yaml", Data: []byte(cfg), IfVersion: store.AnyVersion}}); err != nil {
			t.Fatal(err)
		}
	}
	run(0)
	change(4096)
	run(4096)
	change(8192)
	run(8192)
	if err := agents.DeleteAgent(ctx, store.DefaultProject, agent); err != nil {
		t.Fatal(err)
	}
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "hi"})
	if err == nil {
		_, err = enginetest.Collect(stream)
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a run of a session whose agent was deleted = %v, want InvalidArgument: the agent's copy does not exist", err)
	}
}

// guard serves e's engine behind a local server's Guard, as `penguin
// serve` does: the Guard reads each call's session row, which a Run
// starts from.
func (e *env) guard() {
	g := access.New(e.store, access.Options{Mode: access.Local})
	e.client = penguinv1.NewEngineServiceClient(dialGuarded(e.t, g, engine.New(e.mgr, nil, engine.WithGuard(g))))
}

// withAgents keeps the engine's agents in the store, with working copies
// beside the default agent's directory, as `penguin serve` keeps them:
// the default agent is adopted into the store.
func withAgents(t *testing.T) envOption {
	return func(o *session.Options) {
		m, err := agentmirror.New(o.Store.(store.AgentStore), filepath.Dir(o.DefaultAgentState), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Adopt(t.Context()); err != nil {
			t.Fatal(err)
		}
		o.Agents = m
	}
}

// dialGuarded serves srv over an in-memory connection behind g's
// authentication, as the server's interceptors put it.
func dialGuarded(t *testing.T, g *access.Guard, srv penguinv1.EngineServiceServer) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := g.Authenticate(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := g.Authenticate(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &callerStream{ServerStream: ss, ctx: ctx})
		}))
	penguinv1.RegisterEngineServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
	})
	return conn
}

// callerStream is a server stream whose context carries the caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }
