// Package enginetest holds what the engine's tests need at more than one
// level: the engine package's tests, which run the engine in the test
// process, and the process-level tests in e2e/engine, which run it as a
// `penguin serve engine` process. Both talk to the same real backends (the
// llm service in front of the provider emulator, and the environment
// service, each on a loopback port) and read runs' events the same way.
//
// It is imported by tests only.
package enginetest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/servetest"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
)

// Model is the model the backends route to the emulator.
var Model = &penguinv1.ModelRef{Provider: "emu", ModelId: "m"}

// providers routes Model to the provider emulator.
const providers = `
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

// Backends are a real llm service, whose only model is the emulator
// playing a script, and a real environment service, both serving on
// loopback ports until the test ends.
type Backends struct {
	// Emulator plays the model; its Requests are what reached the
	// provider.
	Emulator *emulator.Server
	// LLM and Environment are the services' addresses.
	LLM         string
	Environment string
	// Root holds the workspaces: workspace "ws" is Root/ws.
	Root string
	// EnvironmentMetrics are the environment service's metrics
	// (environments_active and the others).
	EnvironmentMetrics *prometheus.Registry
}

// NewBackends starts the backends with the emulator playing turns.
// Commands in the environment get a HOME, PATH and SHELL of the test's
// own, so no login profile of the host's user runs inside them.
func NewBackends(t testing.TB, turns ...emulator.Turn) *Backends {
	t.Helper()
	em := emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("emu-key"), emulator.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(em.Close)
	b := newBackends(t, em.URL)
	b.Emulator = em
	return b
}

// NewBackendsWithModel starts the backends with model, an OpenAI-compatible
// chat completions server of the test's own (at /v1/chat/completions), in
// place of the emulator: for a model whose answers depend on what it is
// sent rather than on a script's order. Emulator is nil.
func NewBackendsWithModel(t testing.TB, model http.Handler) *Backends {
	t.Helper()
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	return newBackends(t, srv.URL)
}

func newBackends(t testing.TB, modelURL string) *Backends {
	b := &Backends{EnvironmentMetrics: prometheus.NewRegistry()}
	dir := t.TempDir()
	provFile := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(provFile, []byte(fmt.Sprintf(providers, modelURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	llmSvc, err := llm.Setup(llm.Config{ProvidersFile: provFile, Lookup: config.MapLookup(map[string]string{"EMU_KEY": "emu-key"}), IdleTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b.Root = filepath.Join(dir, "root")
	// Sandbox mode none by default: a test binary does not play penguin's
	// sandbox trampoline, which confined commands start through (the
	// sandbox's own tests and e2e, with the real binary, confine them).
	envSvc, err := environment.New(environment.Options{Root: b.Root, ScratchDir: filepath.Join(dir, "scratch"), DefaultSandbox: "none", Registerer: b.EnvironmentMetrics, Env: []string{
		"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "SHELL=/bin/bash", "LANG=C.UTF-8",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(envSvc.Close)
	b.LLM = Serve(t, "llm", func(g *grpc.Server) { penguinv1.RegisterLLMServiceServer(g, llmSvc) })
	b.Environment = Serve(t, "environment", func(g *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(g, envSvc) })
	return b
}

// Serve serves register's services with the project's gRPC server on a
// loopback port until the test ends, and returns the address.
func Serve(t testing.TB, name string, register func(*grpc.Server)) string {
	t.Helper()
	srv, err := grpcserver.New(grpcserver.Options{Name: name, ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	register(srv.GRPC())
	return servetest.Serve(t, srv)
}

// Stream is a server stream of run events (Run).
type Stream interface {
	Recv() (*penguinv1.RunResponse, error)
}

// Collect reads a stream to its end and returns its events, with the
// stream's error if it did not end cleanly.
func Collect(s Stream) ([]*penguinv1.RunEvent, error) {
	var out []*penguinv1.RunEvent
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.GetEvent())
	}
}

// Messages returns the messages among events.
func Messages(evs []*penguinv1.RunEvent) []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, ev := range evs {
		if m := ev.GetMessage(); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// Kinds names the payload of each message as the log does.
func Kinds(msgs []*penguinv1.OmniMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = store.PayloadKind(m)
	}
	return out
}

// CountKind counts the messages whose payload is kind.
func CountKind(msgs []*penguinv1.OmniMessage, kind string) int {
	n := 0
	for _, m := range msgs {
		if store.PayloadKind(m) == kind {
			n++
		}
	}
	return n
}

// HasText reports whether a text message contains sub.
func HasText(msgs []*penguinv1.OmniMessage, sub string) bool {
	for _, m := range msgs {
		if strings.Contains(m.GetText().GetText(), sub) {
			return true
		}
	}
	return false
}
