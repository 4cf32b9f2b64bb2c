package assemble_test

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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
)

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
func (h *holdingHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h *holdingHandler) WithGroup(string) slog.Handler           { return h }

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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(serveCtx) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
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
	createSession(ctx, t, penguinv1.NewEngineServiceClient(conn), f.root)
}
