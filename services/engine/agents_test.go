package engine_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/engine"
)

// agentReplica is an engine replica stood up as production does
// (engine.Setup), with a home of its own: only the store is shared.
type agentReplica struct {
	e      *engine.Engine
	conn   grpc.ClientConnInterface
	engine penguinv1.EngineServiceClient
	agents penguinv1.AgentServiceClient
}

func startAgentReplica(t *testing.T, storeURL string, b *enginetest.Backends) *agentReplica {
	t.Helper()
	dial := func(addr string) (grpcclient.Conn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	llmConn, err := dial(b.LLM)
	if err != nil {
		t.Fatal(err)
	}
	envConn, err := dial(b.Environment)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Setup(t.Context(), engine.Config{
		StoreURL: storeURL, AgentState: filepath.Join(t.TempDir(), "agents", "default"),
		LLM: llmConn, Environment: envConn, Dial: dial, Advertise: lis.Addr().String(),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The project's gRPC server with the engine's guard, as production
	// serves it: in local mode the caller is the local user.
	srv, err := grpcserver.New(grpcserver.Options{Name: "engine", ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAuthenticator(e.Guard())
	e.Register(srv.GRPC())
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, lis) }()
	conn, err := dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		_ = e.Shutdown(context.Background())
		stop()
		<-served
		_ = e.Close()
		llmConn.Close()
		envConn.Close()
	})
	return &agentReplica{e: e, conn: conn, engine: penguinv1.NewEngineServiceClient(conn), agents: penguinv1.NewAgentServiceClient(conn)}
}

// runTask creates a session on r's default agent and runs one task.
func (r *agentReplica) runTask(t *testing.T, prompt string) { r.runAgentTask(t, "", prompt) }

// runAgentTask creates a session on the named agent and runs one task.
func (r *agentReplica) runAgentTask(t *testing.T, agent, prompt string) {
	t.Helper()
	ctx := t.Context()
	created, err := r.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", AgentState: agent, ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := r.engine.Run(ctx, &penguinv1.RunRequest{SessionId: created.GetSession().GetSessionId(), Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enginetest.Collect(stream); err != nil {
		t.Fatal(err)
	}
}

// systemPrompts returns the system prompts of the emulator's requests
// from the n-th on.
func systemPrompts(em *emulator.Server, from int) []string {
	var out []string
	for _, req := range em.Requests()[from:] {
		msgs, _ := req.Body["messages"].([]any)
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok && mm["role"] == "system" {
				s, _ := mm["content"].(string)
				out = append(out, s)
			}
		}
	}
	return out
}

// TestAgentsAcrossReplicas stands two engine replicas up on one
// PostgreSQL database, each with its own disk: an agent edited through
// one is used by a task on the other, of two concurrent edits of one file
// one wins and the other is ABORTED, and a memory a model saves in a
// session on one replica is in the prompt of a new session on the other.
func TestAgentsAcrossReplicas(t *testing.T) {
	b := enginetest.NewBackends(t,
		emulator.Turn{Match: "first", Text: "ok"},
		emulator.Turn{Match: "remember", ToolCalls: []emulator.ToolCall{{Name: "write_agent_file", Arguments: `{"file_path":"memory/user/MEMORY.md","content":"- The user's cat is called MEMO-7731.\n"}`}}},
		emulator.Turn{Match: "MEMORY.md", Text: "saved"},
		emulator.Turn{Match: "second", Text: "ok"},
		emulator.Turn{Match: "reviewer", Text: "ok"},
	)
	url := pgtest.URL(t, "agents_replicas")
	a := startAgentReplica(t, url, b)
	bb := startAgentReplica(t, url, b)
	ctx := t.Context()

	// Edited through A, used by a task on B.
	cfg, err := a.agents.GetAgentConfig(ctx, &penguinv1.GetAgentConfigRequest{Agent: "default", File: "AGENTS.md"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.agents.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "default", File: "AGENTS.md", Content: "Answer like a pirate: RULE-4412.", Version: cfg.GetVersion()}); err != nil {
		t.Fatal(err)
	}
	n := len(b.Emulator.Requests())
	bb.runTask(t, "first")
	if p := systemPrompts(b.Emulator, n); len(p) == 0 || !strings.Contains(p[0], "RULE-4412") {
		t.Fatalf("B's task did not get the AGENTS.md edited through A; system prompts: %q", p)
	}

	// Two concurrent edits based on one version: one wins.
	cur, err := bb.agents.GetAgentConfig(ctx, &penguinv1.GetAgentConfigRequest{Agent: "default", File: "system_config.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range []*agentReplica{a, bb} {
		wg.Go(func() {
			_, errs[i] = r.agents.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{
				Agent: "default", File: "system_config.yaml", Content: cur.GetContent() + "\n# edit " + string(rune('A'+i)) + "\n", Version: cur.GetVersion(),
			})
		})
	}
	wg.Wait()
	won, aborted := 0, 0
	for _, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			won++
		case codes.Aborted:
			aborted++
			if !strings.Contains(status.Convert(err).Message(), "current version") {
				t.Errorf("the ABORTED edit does not name the current version: %v", err)
			}
		default:
			t.Fatalf("an edit failed: %v", err)
		}
	}
	if won != 1 || aborted != 1 {
		t.Fatalf("%d edits won and %d were aborted, want one each", won, aborted)
	}

	// A memory saved by the model on A reaches a new session's prompt on B.
	a.runTask(t, "remember my cat")
	n = len(b.Emulator.Requests())
	bb.runTask(t, "second")
	if p := systemPrompts(b.Emulator, n); len(p) == 0 || !strings.Contains(p[0], "MEMO-7731") {
		t.Fatalf("B's new session's prompt lacks the memory saved on A: %q", p)
	}
	// A session names another agent by its name (the web app's agent
	// picker): created through A, used on B.
	if _, err := a.agents.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "reviewer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.agents.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "reviewer", File: "AGENTS.md", Content: "Review only: RULE-9090."}); err != nil {
		t.Fatal(err)
	}
	n = len(b.Emulator.Requests())
	bb.runAgentTask(t, "reviewer", "reviewer task")
	if p := systemPrompts(b.Emulator, n); len(p) == 0 || !strings.Contains(p[0], "RULE-9090") || strings.Contains(p[0], "RULE-4412") {
		t.Fatalf("the reviewer agent's session on B: %q", p)
	}
	if _, err := bb.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", AgentState: "nobody"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a session on an agent that does not exist: %v", err)
	}
	// A session created without a model runs on its agent's default
	// model, set through A; without one it is refused, saying so.
	_, err = bb.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{Workspace: "ws", AgentState: "reviewer"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "default model") {
		t.Fatalf("a session without a model on an agent without a default: %v", err)
	}
	if _, err := a.agents.SetAgentModel(ctx, &penguinv1.SetAgentModelRequest{Agent: "reviewer", Model: enginetest.Model}); err != nil {
		t.Fatal(err)
	}
	created, err := bb.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{Workspace: "ws", AgentState: "reviewer"})
	if err != nil || created.GetSession().GetModel().GetModelId() != enginetest.Model.GetModelId() || created.GetSession().GetModel().GetProvider() != enginetest.Model.GetProvider() {
		t.Fatalf("a session without a model on an agent with a default: %v %v", created, err)
	}
	if _, err := bb.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: &penguinv1.ModelRef{ModelId: "m"}, Workspace: "ws", AgentState: "reviewer"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a session with half a model: %v", err)
	}
	files, err := bb.agents.ListMemoryFiles(ctx, &penguinv1.ListMemoryFilesRequest{Agent: "default", Scope: "user"})
	if err != nil || len(files.GetFiles()) != 1 {
		t.Fatalf("the memory through the API: %v %v", files, err)
	}
}
