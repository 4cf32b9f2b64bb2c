package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// realStack is the engine, in the test process, with the real llm service
// (in front of the provider emulator) and the real environment service,
// each on a loopback port.
type realStack struct {
	emu      *emulator.Server
	root     string
	client   penguinv1.EngineServiceClient
	mgr      *session.Manager
	agentDir string
	metrics  *prometheus.Registry
	// envMetrics are the environment service's.
	envMetrics *prometheus.Registry
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
	return newRealStackWith(t, nil, turns...)
}

// newRealStackWith is newRealStack with the manager's options changed by
// opts.
func newRealStackWith(t *testing.T, opts func(*session.Options), turns ...emulator.Turn) *realStack {
	t.Helper()
	b := enginetest.NewBackends(t, turns...)
	s := &realStack{emu: b.Emulator, root: b.Root, envMetrics: b.EnvironmentMetrics, agentDir: filepath.Join(t.TempDir(), "agent"), metrics: prometheus.NewRegistry()}
	if err := os.MkdirAll(s.agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, s.agentDir, testConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	o := session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(dialReal(t, b.LLM)), Environment: penguinv1.NewEnvironmentServiceClient(dialReal(t, b.Environment)),
		DefaultAgentState: s.agentDir, Logger: slog.New(slog.DiscardHandler), Registerer: s.metrics,
	}
	if opts != nil {
		opts(&o)
	}
	mgr, err := session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	s.mgr = mgr
	engAddr := enginetest.Serve(t, "engine", func(g *grpc.Server) { penguinv1.RegisterEngineServiceServer(g, engine.New(mgr, nil)) })
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
		Model: enginetest.Model, Workspace: "ws", ApprovalMode: mode,
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
	evs, err := enginetest.Collect(stream)
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
	// "slow" cannot finish before the test has seen "fast"'s output: it
	// blocks reading a fifo that the test writes only then. That orders
	// the two outputs without guessing how long anything takes.
	s := newRealStack(t,
		emulator.Turn{Text: "Writing it.", ToolCalls: []emulator.ToolCall{
			{ID: "slow", Name: "exec_command", Arguments: `{"cmd":"read line < gate.fifo; echo slow-$line","description":"slow"}`},
			{ID: "fast", Name: "exec_command", Arguments: `{"cmd":"printf hi > hello.txt; echo fast-done","description":"fast"}`},
		}, Usage: emulator.Usage{Input: 100, Output: 10}},
		emulator.Turn{Text: "Wrote hello.txt.", Usage: emulator.Usage{Input: 200, Output: 5}},
	)
	id := s.create(t, allowAll)
	gate := filepath.Join(s.root, "ws", "gate.fifo")
	mkfifo(t, gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := s.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "write hello.txt"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	var streamed []string
	opened := make(chan error, 1)
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs = append(evs, r.GetEvent())
		o := r.GetEvent().GetMessage().GetToolCallOutput()
		if o == nil {
			continue
		}
		streamed = append(streamed, o.GetToolCallId())
		if o.GetToolCallId() == "fast" {
			// Opening a fifo for writing waits for its reader, which
			// "slow" is or is about to be.
			go func() {
				f, err := os.OpenFile(gate, os.O_WRONLY, 0)
				if err == nil {
					_, err = f.WriteString("done\n")
					err = errors.Join(err, f.Close())
				}
				opened <- err
			}()
		}
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("writing the gate: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the gate was never opened")
	}
	checkStream(t, evs)
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	data, err := os.ReadFile(filepath.Join(s.root, "ws", "hello.txt"))
	if err != nil || string(data) != "hi" {
		t.Fatalf("hello.txt = %q, %v", data, err)
	}
	// Outputs stream in completion order (fast first) ...
	if !slices.Equal(streamed, []string{"fast", "slow"}) {
		t.Fatalf("stream order %v", streamed)
	}
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o.GetToolCallId() == "slow" && !strings.Contains(o.GetOutput(), "slow-done") {
			t.Fatalf("slow's output = %q", o.GetOutput())
		}
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

func TestRealServicesForbiddenAndDenied(t *testing.T) {
	s := newRealStack(t,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "exec_command", Arguments: `{"cmd":"rm -rf /","description":"x"}`}}},
		emulator.Turn{Text: "I will not."},
	)
	id := s.create(t, allowAll)
	evs := s.run(t, id, "wipe it")
	var out *penguinv1.ToolCallOutput
	for _, m := range enginetest.Messages(evs) {
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
	for _, m := range enginetest.Messages(evs) {
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
	for _, m := range enginetest.Messages(evs) {
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
	for _, m := range enginetest.Messages(evs) {
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
	if u := usages[0]; !near(u.GetRequest().GetCostUsd(), first) || !near(u.GetSession().GetCostUsd(), first) ||
		u.GetProvider() != enginetest.Model.GetProvider() || u.GetModelId() != enginetest.Model.GetModelId() {
		t.Errorf("first usage = %v, want cost %v", u, first)
	}
	if u := usages[1]; !near(u.GetRequest().GetCostUsd(), second) || !near(u.GetSession().GetCostUsd(), first+second) {
		t.Errorf("second usage = %v, want cost %v and a running total of %v", u, second, first+second)
	}
	labels := map[string]string{"provider": enginetest.Model.GetProvider(), "model": enginetest.Model.GetModelId()}
	cost, _ := metrictest.Value(t, s.metrics, "penguin_engine_cost_usd_total", labels)
	labels["kind"] = "output"
	out, _ := metrictest.Value(t, s.metrics, "penguin_engine_tokens_total", labels)
	if !near(cost, first+second) || out != 150 {
		t.Errorf("metrics: cost %v output tokens %v", cost, out)
	}
}
