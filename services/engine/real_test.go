package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/emulator"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/metrictest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// realProviders routes the model "emu/m" to the provider emulator.
const realProviders = `
providers:
  - name: emu
    type: openai
    base_url: %s/v1
    api_key_env: EMU_KEY
    models:
      - id: m
        context_window: 200000
        max_tokens: 4096
        cost: {input: 3, output: 15, cache_read: 0.3}
`

// realStack is the engine with the real llm service (in front of the
// provider emulator) and the real environment service, each on a
// loopback port.
type realStack struct {
	emu      *emulator.Server
	root     string
	client   penguinv1.EngineServiceClient
	mgr      *session.Manager
	agentDir string
	metrics  *prometheus.Registry
}

func serveOn(t *testing.T, name string, register func(*grpc.Server)) string {
	t.Helper()
	srv, err := grpcserver.New(grpcserver.Options{Name: name, ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	register(srv.GRPC())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return lis.Addr().String()
}

func dialReal(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func newRealStack(t *testing.T, turns ...emulator.Turn) *realStack {
	t.Helper()
	s := &realStack{metrics: prometheus.NewRegistry()}
	s.emu = emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("emu-key"), emulator.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(s.emu.Close)
	dir := t.TempDir()
	provFile := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(provFile, []byte(fmt.Sprintf(realProviders, s.emu.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	llmSvc, err := llm.Setup(llm.Config{ProvidersFile: provFile, Lookup: config.MapLookup(map[string]string{"EMU_KEY": "emu-key"}), IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.root = filepath.Join(dir, "root")
	envSvc, err := environment.New(environment.Options{Root: s.root})
	if err != nil {
		t.Fatal(err)
	}
	llmAddr := serveOn(t, "llm", func(g *grpc.Server) { penguinv1.RegisterLLMServiceServer(g, llmSvc) })
	envAddr := serveOn(t, "environment", func(g *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(g, envSvc) })

	s.agentDir = filepath.Join(dir, "agent")
	if err := os.MkdirAll(s.agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, s.agentDir, testConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(dir, "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := session.New(session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(dialReal(t, llmAddr)), Environment: penguinv1.NewEnvironmentServiceClient(dialReal(t, envAddr)),
		DefaultAgentState: s.agentDir, Logger: slog.New(slog.DiscardHandler), Registerer: s.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.mgr = mgr
	engAddr := serveOn(t, "engine", func(g *grpc.Server) { penguinv1.RegisterEngineServiceServer(g, engine.New(mgr, nil)) })
	s.client = penguinv1.NewEngineServiceClient(dialReal(t, engAddr))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Shutdown(ctx)
		_ = st.Close()
	})
	return s
}

func (s *realStack) create(t *testing.T, mode penguinv1.ApprovalMode) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "emu", ModelId: "m"}, Workspace: "ws", ApprovalMode: mode,
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetSessionId()
}

func (s *realStack) run(t *testing.T, id, prompt string) []*penguinv1.RunEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := s.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := collect(stream)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkStream(t, evs)
	return evs
}

// toolMessages returns the tool_call_ids of the tool results in the
// emulator's nth request body (OpenAI chat format), in order.
func toolMessages(t *testing.T, decoded map[string]any) []string {
	t.Helper()
	body, err := json.Marshal(decoded)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			ids = append(ids, m.ToolCallID)
		}
	}
	return ids
}

func TestRealServicesToolUse(t *testing.T) {
	s := newRealStack(t,
		emulator.Turn{Text: "Writing it.", ToolCalls: []emulator.ToolCall{
			{ID: "slow", Name: "exec_command", Arguments: `{"cmd":"sleep 2; echo slow-done","description":"slow"}`},
			{ID: "fast", Name: "exec_command", Arguments: `{"cmd":"printf hi > hello.txt; echo fast-done","description":"fast"}`},
		}, Usage: emulator.Usage{Input: 100, Output: 10}},
		emulator.Turn{Text: "Wrote hello.txt.", Usage: emulator.Usage{Input: 200, Output: 5}},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "write hello.txt")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	data, err := os.ReadFile(filepath.Join(s.root, "ws", "hello.txt"))
	if err != nil || string(data) != "hi" {
		t.Fatalf("hello.txt = %q, %v", data, err)
	}
	// Outputs stream in completion order (fast first) ...
	var streamed []string
	for _, m := range messages(evs) {
		if o := m.GetToolCallOutput(); o != nil {
			streamed = append(streamed, o.GetToolCallId())
		}
	}
	if !slices.Equal(streamed, []string{"fast", "slow"}) {
		t.Fatalf("stream order %v", streamed)
	}
	// ... and reach the model in call order.
	reqs := s.emu.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	if ids := toolMessages(t, reqs[1].Body); !slices.Equal(ids, []string{"slow", "fast"}) {
		t.Fatalf("tool results sent in order %v", ids)
	}
}

// TestRealServicesCost checks that each request's token usage carries its
// cost from the model's price and the session's running total, and that
// the engine's metrics count tokens and cost per provider and model.
func TestRealServicesCost(t *testing.T) {
	s := newRealStack(t,
		emulator.Turn{Text: "Looking.", ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "exec_command", Arguments: `{"cmd":"echo hi","description":"hi"}`}},
			Usage: emulator.Usage{Input: 1000, Output: 100, CacheRead: 2000}},
		emulator.Turn{Text: "Done.", Usage: emulator.Usage{Input: 500, Output: 50}},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "say hi")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	var usages []*penguinv1.TokenUsage
	for _, m := range messages(evs) {
		if tu := m.GetTokenUsage(); tu != nil {
			usages = append(usages, tu)
		}
	}
	if len(usages) != 2 {
		t.Fatalf("%d token_usage events", len(usages))
	}
	// 1000 uncached input at 3, 2000 cache reads at 0.3, 100 output at 15.
	first := (1000*3 + 2000*0.3 + 100*15) / 1e6
	second := (500*3 + 50*15) / 1e6
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	if u := usages[0]; !near(u.GetRequest().GetCostUsd(), first) || !near(u.GetSession().GetCostUsd(), first) || u.GetProvider() != "emu" || u.GetModelId() != "m" {
		t.Errorf("first usage = %v, want cost %v", u, first)
	}
	if u := usages[1]; !near(u.GetRequest().GetCostUsd(), second) || !near(u.GetSession().GetCostUsd(), first+second) {
		t.Errorf("second usage = %v, want cost %v and a running total of %v", u, second, first+second)
	}
	cost, _ := metrictest.Value(t, s.metrics, "penguin_engine_cost_usd_total", map[string]string{"provider": "emu", "model": "m"})
	out, _ := metrictest.Value(t, s.metrics, "penguin_engine_tokens_total", map[string]string{"provider": "emu", "model": "m", "kind": "output"})
	if !near(cost, first+second) || out != 150 {
		t.Errorf("metrics: cost %v output tokens %v", cost, out)
	}
}

func TestRealServicesForbiddenAndDenied(t *testing.T) {
	s := newRealStack(t,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "exec_command", Arguments: `{"cmd":"rm -rf /","description":"x"}`}}},
		emulator.Turn{Text: "I will not."},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "wipe it")
	var out *penguinv1.ToolCallOutput
	for _, m := range messages(evs) {
		if o := m.GetToolCallOutput(); o != nil {
			out = o
		}
	}
	if out.GetOutput() != "Tool call denied by policy." {
		t.Fatalf("output = %v", out)
	}
}

func TestRealServicesRetryLadder(t *testing.T) {
	s := newRealStack(t,
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 503}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "0"}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultDrop}},
		emulator.Turn{Text: "back"},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "hello")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	var ends []*penguinv1.RequestEnd
	for _, m := range messages(evs) {
		if re := m.GetRequestEnd(); re != nil {
			ends = append(ends, re)
		}
	}
	if len(ends) != 4 {
		t.Fatalf("request_ends = %v", ends)
	}
	for i, re := range ends[:3] {
		if re.GetStatus() == completedS || re.GetAttempt() != int32(i+1) || re.GetRetryInMs() <= 0 || re.GetErrorMessage() == "" {
			t.Fatalf("request_end %d = %v", i, re)
		}
	}
	if ends[3].GetStatus() != completedS || ends[3].GetAttempt() != 4 {
		t.Fatalf("last request_end = %v", ends[3])
	}

	a := newRealStack(t, emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultAuth}})
	aid := a.create(t, allowAll)
	st := end(t, a.run(t, aid, "hello"))
	if st.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || st.GetMessage() == "" {
		t.Fatalf("auth run ended %v", st)
	}
	if n := len(a.emu.Requests()); n != 1 {
		t.Fatalf("%d provider requests after auth, want 1", n)
	}
}

func TestRealServicesCompactionAndSubagent(t *testing.T) {
	s := newRealStack(t,
		// Parent turn 1 delegates; the child answers; the parent closes with
		// a huge input usage, which triggers compaction at the task's end.
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "p1", Name: "run_subagent", Arguments: `{"description":"look","prompt":"say the word"}`}}},
		emulator.Turn{Text: "bird"},
		emulator.Turn{Text: "The word is bird.", Usage: emulator.Usage{Input: 250000, Output: 5}},
		emulator.Turn{Text: "[summary]The user asked for a word; it was bird.[/summary]"},
		emulator.Turn{Text: "Still bird."},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "ask a helper for a word")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	var forwarded, compaction int
	for _, m := range messages(evs) {
		if len(m.GetOrigin()) > 0 {
			forwarded++
		}
		if m.GetCompactionEnd().GetStatus() == completedS {
			compaction++
		}
	}
	if forwarded == 0 || compaction != 1 {
		t.Fatalf("forwarded %d child messages, %d completed compactions", forwarded, compaction)
	}
	end(t, s.run(t, id, "and now?"))
	reqs := s.emu.Requests()
	lastBody, _ := json.Marshal(reqs[len(reqs)-1].Body)
	last := string(lastBody)
	if !strings.Contains(last, "it was bird") || strings.Contains(last, "ask a helper") {
		t.Fatalf("the request after compaction does not start from the summary: %s", last)
	}
}
