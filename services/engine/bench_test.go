package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// turnsPerTask is the length of the tasks the overhead benchmark runs; the
// history grows within a task, and the baseline replays the very same
// requests, so both sides carry the same payloads.
const turnsPerTask = 20

// instantModel answers every request at once: a tool call, until the
// task's last turn, which answers in text. It records when each request
// arrived.
type instantModel struct {
	penguinv1.UnimplementedLLMServiceServer
	mu       sync.Mutex
	requests []*penguinv1.StreamGenerateRequest
	arrived  []time.Time
}

func (m *instantModel) StreamGenerate(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.arrived = append(m.arrived, time.Now())
	m.mu.Unlock()
	return reply(req).Send(s)
}

// reply is the model's answer to req: turn n of a task calls a tool unless
// it is the last.
func reply(req *penguinv1.StreamGenerateRequest) *fake.Reply {
	turn := 0
	for _, m := range req.GetHistory() {
		if m.GetToolCall() != nil {
			turn++
		}
	}
	if turn >= turnsPerTask-1 {
		return fake.NewReply().Text("done").Done()
	}
	return fake.NewReply().ToolCall(fmt.Sprintf("call-%d", turn), "exec_command", `{"cmd":"true"}`).Done()
}

func (m *instantModel) ListModels(context.Context, *penguinv1.ListModelsRequest) (*penguinv1.ListModelsResponse, error) {
	return &penguinv1.ListModelsResponse{}, nil
}

func (m *instantModel) reset() {
	m.mu.Lock()
	m.requests, m.arrived = nil, nil
	m.mu.Unlock()
}

func dialTCP(b *testing.B, addr string) *grpc.ClientConn {
	b.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkEngineTurnOverhead measures what the engine adds to a turn (one
// model request and one tool run) with an instant model and an instant
// tool on loopback, SQLite on disk: each turn of a real task (Run over
// gRPC) against the same requests and tool calls sent directly to the
// llm and environment services in the same run.
func BenchmarkEngineTurnOverhead(b *testing.B) {
	model := &instantModel{}
	envSvc := &fake.Env{Tools: []*penguinv1.ToolInfo{fake.Tool("exec_command", penguinv1.Permission_PERMISSION_RW)}}
	llmAddr := fake.Listen(b, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, model) })
	envAddr := fake.Listen(b, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, envSvc) })
	llmClient := penguinv1.NewLLMServiceClient(dialTCP(b, llmAddr))
	envClient := penguinv1.NewEnvironmentServiceClient(dialTCP(b, envAddr))

	dir := b.TempDir()
	agentDir := filepath.Join(dir, "agent")
	writeBenchConfig(b, agentDir)
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "engine.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	mgr, err := session.New(session.Options{Store: st, LLM: llmClient, Environment: envClient, DefaultAgentState: agentDir, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Shutdown(ctx)
	engineAddr := fake.Listen(b, func(s *grpc.Server) { penguinv1.RegisterEngineServiceServer(s, engine.New(mgr, nil)) })
	client := penguinv1.NewEngineServiceClient(dialTCP(b, engineAddr))

	var engineTurns, directTurns []time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += turnsPerTask - 1 {
		b.StopTimer()
		model.reset()
		sess, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
			Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m"}, Workspace: "/w", ApprovalMode: allowAll,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		stream, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: sess.GetSession().GetSessionId(), Prompt: "go"})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		// A turn is the time from one request's arrival at the model to
		// the next one's: the model stream, the approval, the tool run,
		// and everything the engine does in between.
		model.mu.Lock()
		reqs, arrived := slices.Clone(model.requests), slices.Clone(model.arrived)
		model.mu.Unlock()
		if len(reqs) != turnsPerTask {
			b.Fatalf("%d requests in a task, want %d", len(reqs), turnsPerTask)
		}
		for i := 1; i < len(arrived); i++ {
			engineTurns = append(engineTurns, arrived[i].Sub(arrived[i-1]))
		}
		// The baseline: the same requests and the same tool calls, made
		// directly, one after the other.
		for i := 0; i < len(reqs)-1; i++ {
			start := time.Now()
			directTurn(b, llmClient, envClient, reqs[i])
			directTurns = append(directTurns, time.Since(start))
		}
		b.StartTimer()
	}
	b.StopTimer()
	e50, d50 := percentile(engineTurns, 50), percentile(directTurns, 50)
	b.ReportMetric(float64(e50.Microseconds()), "engine-µs/turn-p50")
	b.ReportMetric(float64(d50.Microseconds()), "direct-µs/turn-p50")
	b.ReportMetric(float64((e50 - d50).Microseconds()), "added-µs/turn-p50")
	b.ReportMetric(float64(e50)/float64(d50), "ratio-p50")
	b.ReportMetric(float64((percentile(engineTurns, 90) - percentile(directTurns, 90)).Microseconds()), "added-µs/turn-p90")
}

// directTurn sends req to the model and runs the tool call it answers
// with, as the engine would, without the engine.
func directTurn(b *testing.B, llm penguinv1.LLMServiceClient, env penguinv1.EnvironmentServiceClient, req *penguinv1.StreamGenerateRequest) {
	ctx := context.Background()
	s, err := llm.StreamGenerate(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	var call *penguinv1.ToolCall
	for {
		r, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if tc := r.GetMessage().GetToolCall(); tc != nil {
			call = tc
		}
	}
	if call == nil {
		return
	}
	ts, err := env.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: "env-1", ToolCall: call})
	if err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := ts.Recv(); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
	}
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func writeBenchConfig(b *testing.B, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "system_config.yaml"), []byte(testConfig), 0o644); err != nil {
		b.Fatal(err)
	}
}

// quiet drops log output, which would only measure the terminal.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
