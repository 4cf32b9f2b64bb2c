package assemble_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/internal/testkit/processtest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
)

// TestMain checks that the processes the tests build leave no goroutine
// behind once served and stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The pgx pool and otel's batch processors are not used here;
		// the SQLite driver keeps none. Connections grpc-go closes end
		// their reader a moment later, which goleak waits for.
		goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
	)
}

const token = "t0ken"

// script is the model of the tests: a command to run, an answer once the
// command's output is back, and a turn that stalls until the run is
// aborted.
const script = `
turns:
  - match: "run a command"
    tool_calls:
      - name: exec_command
        arguments: '{"cmd":"echo re-dialled"}'
  - match: "re-dialled"
    text: "done"
  - match: "stall"
    fault: {kind: stall, duration: 0s}
`

// fixture is what the tests of a cluster share: the model, the store and
// a root for workspaces.
type fixture struct {
	model     *emulator.Server
	providers string
	store     string
	root      string
}

func newFixture(t *testing.T, storeURL string) *fixture {
	t.Helper()
	sc, err := emulator.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	model := emulator.NewServer(sc, emulator.WithAPIKey("sk-test"))
	t.Cleanup(model.Close)
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(providers, []byte("providers:\n  - name: mock\n    type: openai\n    base_url: "+
		model.OpenAIBaseURL()+"\n    api_key_env: MOCK_API_KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fixture{model: model, providers: providers, store: storeURL, root: t.TempDir()}
}

// lookup is the environment the llm service reads the model's key from.
func lookup(name string) (string, bool) {
	if name == "MOCK_API_KEY" {
		return "sk-test", true
	}
	return "", false
}

// replica is one all-in-one process, served until the test ends.
type replica struct {
	addr    string
	engine  penguinv1.EngineServiceClient
	metrics prometheus.Gatherer
}

// allInOne builds and serves the three services in one process, exactly
// as `penguin serve --advertise ADDR --lease-ttl TTL` does, on a port of
// its own, and returns a client of its engine over TCP, as another
// process would have.
func (f *fixture) allInOne(t *testing.T, ttl time.Duration) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	// Sandbox none: the test binary does not play penguin's sandbox
	// trampoline, which confined commands start through.
	p, err := assemble.New(context.Background(), assemble.Config{
		Name: "penguin", Listener: lis, AuthToken: token, ShutdownTimeout: 10 * time.Second,
		LLM:         &llm.Config{ProvidersFile: f.providers, Lookup: lookup},
		Environment: &environment.Config{Root: f.root, ScratchDir: t.TempDir(), Advertise: addr, NoCgroups: true, DefaultSandbox: "none"},
		Engine:      &engine.Config{StoreURL: f.store, AgentState: t.TempDir(), Advertise: addr, LeaseTTL: ttl},
	})
	if err != nil {
		t.Fatal(err)
	}
	processtest.Serve(t, p)
	conn, err := grpcclient.New(addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &replica{addr: addr, engine: penguinv1.NewEngineServiceClient(conn), metrics: p.Metrics()}
}

// TestAllInOneReplicasShareRuns runs two all-in-one servers over one
// PostgreSQL store, as two replicas behind a load balancer: a session
// created on one runs on the other, whose engine reaches the session's
// environment on the first at the address it advertised (the re-dial);
// an Abort sent to the replica that does not run the task is forwarded
// to the one that does; and the run's lease lasts the TTL the server was
// given. The split engine is built by the same code (assemble.New with
// only the Engine set), so this is what both deployments do.
func TestAllInOneReplicasShareRuns(t *testing.T) {
	const ttl = 3 * time.Second
	f := newFixture(t, pgtest.URL(t, "assemble"))
	a, b := f.allInOne(t, ttl), f.allInOne(t, ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Created on A: its environment lives on A.
	ws := filepath.Join(f.root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	id := createSession(ctx, t, a.engine, ws)

	t.Run("re-dial", func(t *testing.T) {
		r := run(ctx, t, b.engine, id, "run a command").wait(t)
		if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			t.Fatalf("run on B ended %v (%q), stream error %v", r.final.GetStatus(), r.final.GetMessage(), r.err)
		}
		out := r.toolOutput()
		if !strings.Contains(out.GetOutput(), "re-dialled\n") || !strings.Contains(out.GetOutput(), "[exit code 0]") {
			t.Fatalf("the command's output on B = %v; want it run in the session's environment on A", out)
		}
		// The command ran on A, in the environment created there; B
		// created none (as it would to recover a session whose
		// environment it cannot reach).
		for _, c := range []struct {
			on     *replica
			name   string
			labels map[string]string
			want   float64
		}{
			{a, "penguin_environment_environments_created_total", nil, 1},
			{a, "penguin_environment_tool_runs_total", map[string]string{"tool": "exec_command", "stop_reason": "completed"}, 1},
			{b, "penguin_environment_environments_created_total", nil, 0},
		} {
			// The environment counts a call just after its output has
			// left, so poll a moment for it.
			got := metrictest.Get(t, c.on.metrics, c.name, c.labels)
			for deadline := time.Now().Add(10 * time.Second); got != c.want && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				got = metrictest.Get(t, c.on.metrics, c.name, c.labels)
			}
			if got != c.want {
				t.Errorf("%s %v on %s = %v, want %v", c.name, c.labels, c.on.addr, got, c.want)
			}
		}
	})

	t.Run("forwarding and lease", func(t *testing.T) {
		id := createSession(ctx, t, a.engine, ws)
		before := len(f.model.Requests())
		stalled := run(ctx, t, a.engine, id, "stall")
		// The model has the request: A holds the run and its lease.
		if _, err := f.model.WaitRequests(ctx, before+1); err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, f.store)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		_, holder, expires, err := st.LeaseHolder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if holder != a.addr {
			t.Errorf("the lease is held at %q, want A at %s", holder, a.addr)
		}
		if left := time.Until(expires); left <= 0 || left > ttl {
			t.Errorf("the lease expires in %s; want at most the %s TTL the server was given", left, ttl)
		}

		resp, err := b.engine.Abort(ctx, &penguinv1.AbortRequest{SessionId: id, Reason: "test"})
		if err != nil || !resp.GetAborted() {
			t.Fatalf("Abort on B = %v, %v; want it forwarded to A and the task aborted", resp, err)
		}
		r := stalled.wait(t)
		if r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED {
			t.Fatalf("the run on A ended %v (%q), stream error %v; want aborted", r.final.GetStatus(), r.final.GetMessage(), r.err)
		}
	})
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// TestAllInOneCallsItsServicesInProcess runs a task, with a tool call, on
// an all-in-one server with a token, through its own in-process
// connection: the engine's calls to the llm and environment services
// cross no TCP connection (the listener accepts none), pass the auth
// check, and continue the turn's trace.
func TestAllInOneCallsItsServicesInProcess(t *testing.T) {
	f := newFixture(t, filepath.Join(t.TempDir(), "penguin.db"))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: tcp}
	p, err := assemble.New(context.Background(), assemble.Config{
		Name: "penguin", Listener: lis, AuthToken: token, TracerProvider: tp,
		LLM:         &llm.Config{ProvidersFile: f.providers, Lookup: lookup},
		Environment: &environment.Config{Root: f.root, ScratchDir: t.TempDir(), NoCgroups: true, DefaultSandbox: "none"},
		Engine:      &engine.Config{StoreURL: f.store, AgentState: t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	processtest.Serve(t, p)
	ctx := testkit.Context(t, time.Minute)
	e := penguinv1.NewEngineServiceClient(p.Local())
	id := createSession(ctx, t, e, f.root)
	r := run(ctx, t, e, id, "run a command").wait(t)
	if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("run ended %v (%q), stream error %v", r.final.GetStatus(), r.final.GetMessage(), r.err)
	}
	if n := lis.accepted.Load(); n != 0 {
		t.Errorf("the gRPC listener accepted %d TCP connections; the services must call each other in-process", n)
	}

	turns := map[oteltrace.TraceID]bool{}
	for _, s := range rec.Ended() {
		if s.Name() == "engine.turn" {
			turns[s.SpanContext().TraceID()] = true
		}
	}
	for _, method := range []string{"penguin.v1.LLMService/StreamGenerate", "penguin.v1.EnvironmentService/ExecuteTool"} {
		found := false
		for _, s := range rec.Ended() {
			if s.Name() == method && s.SpanKind() == oteltrace.SpanKindServer {
				found = found || turns[s.SpanContext().TraceID()]
			}
		}
		if !found {
			t.Errorf("no server span of %s in a turn's trace", method)
		}
	}
}

func createSession(ctx context.Context, t *testing.T, e penguinv1.EngineServiceClient, ws string) string {
	t.Helper()
	resp, err := e.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"}, Workspace: ws,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetSessionId()
}

// runResult is what one Run stream carried.
type runResult struct {
	events []*penguinv1.RunEvent
	final  *penguinv1.RunStateChange // the idle state change; nil when the stream broke first
	err    error
}

// toolOutput returns the run's last complete tool output.
func (r runResult) toolOutput() *penguinv1.ToolCallOutput {
	var out *penguinv1.ToolCallOutput
	for _, ev := range r.events {
		if o := ev.GetMessage().GetToolCallOutput(); o != nil {
			out = o
		}
	}
	return out
}

type pending chan runResult

// run starts a Run and reads it to its end in the background.
func run(ctx context.Context, t *testing.T, e penguinv1.EngineServiceClient, id, prompt string) pending {
	t.Helper()
	stream, err := e.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: prompt})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	done := make(pending, 1)
	go func() { done <- readRun(stream) }()
	return done
}

func readRun(stream grpc.ServerStreamingClient[penguinv1.RunResponse]) runResult {
	var r runResult
	for {
		resp, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) || r.final == nil {
				r.err = err
			}
			return r
		}
		ev := resp.GetEvent()
		r.events = append(r.events, ev)
		if st := ev.GetState(); st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			r.final = st
		}
	}
}

// wait returns the run's result, failing the test after a minute.
func (p pending) wait(t *testing.T) runResult {
	t.Helper()
	select {
	case r := <-p:
		return r
	case <-time.After(time.Minute):
		t.Fatal("the run did not end within a minute")
		return runResult{}
	}
}

// TestNewRefusesBadConfigs checks that a Config that cannot work is
// refused with an error that says why, and that the listener it was given
// is closed, not leaked.
func TestNewRefusesBadConfigs(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "penguin.db")
	for _, c := range []struct {
		name string
		cfg  assemble.Config
		want string
	}{
		{"no service", assemble.Config{Name: "penguin"}, "no service"},
		{"engine without llm", assemble.Config{Name: "engine", EnvironmentAddr: "127.0.0.1:1",
			Engine: &engine.Config{StoreURL: store, AgentState: dir}}, "llm service's address"},
		{"engine without environment", assemble.Config{Name: "engine", LLMAddr: "127.0.0.1:1",
			Engine: &engine.Config{StoreURL: store, AgentState: dir}}, "environment service's address"},
		{"lease too short", assemble.Config{Name: "engine", LLMAddr: "127.0.0.1:1", EnvironmentAddr: "127.0.0.1:1",
			Engine: &engine.Config{StoreURL: store, AgentState: dir, LeaseTTL: 500 * time.Millisecond}}, "too short"},
		{"negative environment idle timeout", assemble.Config{Name: "engine", LLMAddr: "127.0.0.1:1", EnvironmentAddr: "127.0.0.1:1",
			Engine: &engine.Config{StoreURL: store, AgentState: dir, EnvironmentIdleTimeout: -time.Second}}, "environment idle timeout -1s is negative"},
		{"bad store", assemble.Config{Name: "engine", LLMAddr: "127.0.0.1:1", EnvironmentAddr: "127.0.0.1:1",
			Engine: &engine.Config{StoreURL: "mysql://x", AgentState: dir}}, "unsupported store URL scheme"},
		{"profiles off loopback", assemble.Config{Name: "engine", LLMAddr: "127.0.0.1:1", EnvironmentAddr: "127.0.0.1:1",
			ProfilesListen: "0.0.0.0:0", Engine: &engine.Config{StoreURL: store, AgentState: dir}}, "only a loopback address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			c.cfg.Listener = lis
			p, err := assemble.New(context.Background(), c.cfg)
			if err == nil {
				_ = p.Close()
				t.Fatalf("New accepted %+v", c.cfg)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v; want it to say %q", err, c.want)
			}
			if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the listener is still open after New failed (Accept: %v)", err)
			}
		})
	}
}

// TestUndeclaredEnumsAreRefused sends enum values no contract declares to
// the all-in-one server over TCP: every service refuses them with
// INVALID_ARGUMENT naming the field, before any handler runs, and nothing
// is changed or created.
func TestUndeclaredEnumsAreRefused(t *testing.T) {
	f := newFixture(t, filepath.Join(t.TempDir(), "engine.db"))
	r := f.allInOne(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := filepath.Join(f.root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	id := createSession(ctx, t, r.engine, ws)

	// A server stream (Run): the request is refused and the session keeps
	// its mode.
	stream, err := r.engine.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "run a command", ApprovalMode: 42})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "approval_mode: 42 is not a value of penguin.v1.ApprovalMode") {
		t.Fatalf("Run with approval_mode 42: %v", err)
	}
	got, err := r.engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetSession(); s.GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL || s.GetLastSequence() != 1 {
		t.Fatalf("after the refused Run the session has mode %v and last sequence %d", s.GetApprovalMode(), s.GetLastSequence())
	}

	// A unary call of another service (the environment's builtin
	// override).
	conn, err := grpcclient.New(r.addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	envs := penguinv1.NewEnvironmentServiceClient(conn)
	_, err = envs.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: ws, Tools: &penguinv1.ToolConfig{
		Builtin: []*penguinv1.ToolSpec{{Name: "read_file", Permission: 77}},
	}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "tools.builtin[0].permission: 77 is not a value of penguin.v1.Permission") {
		t.Fatalf("CreateEnvironment with permission 77: %v", err)
	}

	// The llm service's StreamGenerate, its request marked shared as the
	// engine's loop marks its own in process: over TCP the mark does
	// nothing, and a history's undeclared value is refused (see
	// internal/enumcheck).
	llm := penguinv1.NewLLMServiceClient(conn)
	gen, err := llm.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{History: []*penguinv1.OmniMessage{
		omni.UserText("hi"), omni.ToolCallOutput("c", "out", 99),
	}}, grpcserver.ShareRequest())
	if err == nil {
		_, err = gen.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "history[1].tool_call_output.stop_reason: 99 is not a value of penguin.v1.StopReason") {
		t.Fatalf("StreamGenerate with stop_reason 99: %v", err)
	}
}

// holdingHandler is a log handler that holds the environment's set-up at
// its first line (how commands are tracked) until the engine's set-up has
// adopted the agent directory, or until patience runs out.
type holdingHandler struct {
	adopted   chan struct{}
	once      sync.Once
	patience  time.Duration
	mu        sync.Mutex
	heldAlone bool
}

func (h *holdingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdingHandler) WithGroup(string) slog.Handler            { return h }

func (h *holdingHandler) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Message == "agent directory adopted into the store":
		h.once.Do(func() { close(h.adopted) })
	case strings.HasPrefix(r.Message, "commands are tracked by"):
		select {
		case <-h.adopted:
		case <-time.After(h.patience):
			h.mu.Lock()
			h.heldAlone = true
			h.mu.Unlock()
		}
	}
	return nil
}

// TestEnvironmentSetsUpBesideTheEngine: the environment's set-up runs
// beside the engine's, not before it. The environment's set-up is held
// at its first log line until the engine has adopted the agent
// directory (on a new home), which could not happen if the two ran one
// after the other (then the hold ends only with its patience, and the test
// fails). The process built so is whole: its health says SERVING, and
// a session is created over TCP at once.
func TestEnvironmentSetsUpBesideTheEngine(t *testing.T) {
	f := newFixture(t, filepath.Join(t.TempDir(), "penguin.db"))
	h := &holdingHandler{adopted: make(chan struct{}), patience: 20 * time.Second}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	p, err := assemble.New(context.Background(), assemble.Config{
		Name: "penguin", Listener: lis, AuthToken: token, Logger: slog.New(h),
		LLM:         &llm.Config{ProvidersFile: f.providers, Lookup: lookup},
		Environment: &environment.Config{Root: f.root, ScratchDir: t.TempDir(), NoCgroups: true, DefaultSandbox: "none"},
		Engine:      &engine.Config{StoreURL: f.store, AgentState: filepath.Join(t.TempDir(), "agents", "default")},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if h.heldAlone {
		t.Error("the environment's set-up waited for the engine's adoption, which came only after it: they ran one after the other")
	}
	h.mu.Unlock()
	servesAndCreates(t, p, addr, f.root)
}

// servesAndCreates serves p until the test ends, and checks that it
// answers SERVING at addr and then creates a session in root at once.
func servesAndCreates(t *testing.T, p *assemble.Process, addr, root string) {
	t.Helper()
	processtest.Serve(t, p)
	ctx := testkit.Context(t, time.Minute)
	conn, err := grpcclient.New(addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		if r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		time.Sleep(time.Millisecond)
	}
	createSession(ctx, t, penguinv1.NewEngineServiceClient(conn), root)
}

// engineTracer is a tracer provider that says when the engine's set-up
// asks it for the engine's tracer (its session manager's, built after
// the store's open and migration).
type engineTracer struct {
	oteltrace.TracerProvider
	asked chan struct{}
	once  sync.Once
}

func (tp *engineTracer) Tracer(name string, opts ...oteltrace.TracerOption) oteltrace.Tracer {
	if name == "github.com/penguin-agent/penguin/services/engine" {
		tp.once.Do(func() { close(tp.asked) })
	}
	return tp.TracerProvider.Tracer(name, opts...)
}

// TestLLMSetsUpBesideTheEngine: on an existing home, whose SQLite file
// holds the route store's tables and the engine's, the llm service's
// set-up runs beside the engine's, not before it. The second start's llm
// set-up is held at its first look at the environment (after the route
// store's open) until the engine's set-up has asked for its tracer,
// which could not happen if the two ran one after the other (then the
// hold ends only with its patience, and the test fails). The first
// start, on a new home, is not held: there the llm service's set-up
// still goes first. The process built so is whole: its health says
// SERVING, and a session is created at once.
func TestLLMSetsUpBesideTheEngine(t *testing.T) {
	f := newFixture(t, filepath.Join(t.TempDir(), "penguin.db"))
	agents := filepath.Join(t.TempDir(), "agents", "default")
	var (
		heldAlone atomic.Bool
		once      sync.Once
	)
	tp := &engineTracer{TracerProvider: sdktrace.NewTracerProvider(), asked: make(chan struct{})}
	var second *engineTracer // the second start's, once it starts
	held := func(name string) (string, bool) {
		if second != nil {
			once.Do(func() {
				select {
				case <-second.asked:
				case <-time.After(20 * time.Second):
					heldAlone.Store(true)
				}
			})
		}
		return lookup(name)
	}
	start := func() (*assemble.Process, string) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p, err := assemble.New(context.Background(), assemble.Config{
			Name: "penguin", Listener: lis, AuthToken: token, TracerProvider: tp,
			LLM: &llm.Config{ProvidersFile: f.providers, Lookup: held, RouteStore: f.store,
				RouteKeyFile: filepath.Join(filepath.Dir(f.store), "routes.key"), MakeRouteKey: true},
			Environment: &environment.Config{Root: f.root, ScratchDir: t.TempDir(), NoCgroups: true, DefaultSandbox: "none"},
			Engine:      &engine.Config{StoreURL: f.store, AgentState: agents},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p, lis.Addr().String()
	}
	first, _ := start()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second = &engineTracer{TracerProvider: tp.TracerProvider, asked: make(chan struct{})}
	tp = second
	p, addr := start()
	if heldAlone.Load() {
		t.Error("the llm service's set-up waited for the engine's, which came only after it: they ran one after the other")
	}
	servesAndCreates(t, p, addr, f.root)
}
