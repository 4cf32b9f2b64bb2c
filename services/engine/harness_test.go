package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// testConfig is the agent state of the tests: reconnects on a millisecond
// clock.
const testConfig = `max_turns: -1
retry:
  max_attempts: 3
  base_delay: 1ms
  max_delay: 4ms
`

// env is one engine under test, with fake llm and environment services,
// a real SQLite store and the real gRPC handlers over an in-memory
// connection.
type env struct {
	t        *testing.T
	llm      *fake.LLM
	envSvc   *fake.Env
	store    store.Store
	storeURL string
	agentDir string
	mgr      *session.Manager
	client   penguinv1.EngineServiceClient
	llmConn  *grpc.ClientConn
	envConn  *grpc.ClientConn
}

type envOption func(*session.Options)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, llm: &fake.LLM{}, envSvc: &fake.Env{Tools: []*penguinv1.ToolInfo{
		fake.Tool("read_file", penguinv1.Permission_PERMISSION_R),
		fake.Tool("exec_command", penguinv1.Permission_PERMISSION_RW),
	}}}
	dir := t.TempDir()
	e.agentDir = filepath.Join(dir, "agent")
	if err := os.MkdirAll(e.agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.agentDir, "system_config.yaml"), []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	e.storeURL = filepath.Join(dir, "engine.db")
	e.llmConn = fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, e.llm) })
	e.envConn = fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, e.envSvc) })
	e.start(opts...)
	return e
}

// start opens the store and serves a fresh manager on it, as a restarted
// engine would.
func (e *env) start(opts ...envOption) {
	t := e.t
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, e.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	o := session.Options{
		Store:             st,
		LLM:               penguinv1.NewLLMServiceClient(e.llmConn),
		Environment:       penguinv1.NewEnvironmentServiceClient(e.envConn),
		DefaultAgentState: e.agentDir,
		LeaseTTL:          time.Second,
	}
	for _, f := range opts {
		f(&o)
	}
	mgr, err := session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = mgr
	srv := engine.New(mgr, nil)
	conn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEngineServiceServer(s, srv) })
	e.client = penguinv1.NewEngineServiceClient(conn)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Shutdown(sctx)
		_ = st.Close()
	})
}

// stop shuts the manager down and closes the store.
func (e *env) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.mgr.Shutdown(ctx); err != nil {
		e.t.Fatal(err)
	}
	_ = e.store.Close()
}

func (e *env) ctx() context.Context { return testkit.Context(e.t, 30*time.Second) }

func (e *env) create(mode penguinv1.ApprovalMode) string {
	e.t.Helper()
	resp, err := e.client.CreateSession(e.ctx(), &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, Workspace: "/work/ws", ApprovalMode: mode,
	})
	if err != nil {
		e.t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetSessionId()
}

// run runs a task to its end and returns its events.
func (e *env) run(id, prompt string, opts ...func(*penguinv1.RunRequest)) []*penguinv1.RunEvent {
	e.t.Helper()
	req := &penguinv1.RunRequest{SessionId: id, Prompt: prompt}
	for _, f := range opts {
		f(req)
	}
	stream, err := e.client.Run(e.ctx(), req)
	if err != nil {
		e.t.Fatalf("Run: %v", err)
	}
	evs, err := enginetest.Collect(stream)
	if err != nil {
		e.t.Fatalf("Run stream: %v", err)
	}
	return evs
}

// runAnswering runs a task on the session with prompt "go", answers each
// approval question it asks with d as the question arrives, and returns
// the events streamed until the stream ended.
func (e *env) runAnswering(id string, d penguinv1.Decision) []*penguinv1.RunEvent {
	e.t.Helper()
	stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "go"})
	if err != nil {
		e.t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	for {
		r, err := stream.Recv()
		if err != nil {
			return evs
		}
		ev := r.GetEvent()
		evs = append(evs, ev)
		if ar := ev.GetApprovalRequest(); ar != nil {
			if _, err := e.client.Approve(e.ctx(), &penguinv1.ApproveRequest{SessionId: id, ToolCallId: ar.GetToolCall().GetToolCallId(), Decision: d}); err != nil {
				e.t.Fatalf("Approve: %v", err)
			}
		}
	}
}

// end returns the final state change of a task's events.
func end(t *testing.T, evs []*penguinv1.RunEvent) *penguinv1.RunStateChange {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	st := evs[len(evs)-1].GetState()
	if st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("last event = %v, want the idle state change", evs[len(evs)-1])
	}
	return st
}

// checkStream checks sequence numbers increase and the messages keep the
// streaming discipline.
func checkStream(t *testing.T, evs []*penguinv1.RunEvent) {
	t.Helper()
	c := omni.NewChecker()
	var last int64
	for _, ev := range evs {
		if ev.GetSequence() <= last {
			t.Fatalf("sequence %d after %d", ev.GetSequence(), last)
		}
		last = ev.GetSequence()
		if m := ev.GetMessage(); m != nil {
			if err := c.Check(m); err != nil {
				t.Fatalf("event %d: %v", ev.GetSequence(), err)
			}
		}
	}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
}

func history(t *testing.T, e *env, id string) []*penguinv1.RunEvent {
	t.Helper()
	resp, err := e.client.GetHistory(e.ctx(), &penguinv1.GetHistoryRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetEvents()
}

func code(err error) codes.Code { return status.Code(err) }

// gate blocks fake replies until released.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func writeConfig(t *testing.T, dir, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "system_config.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}
