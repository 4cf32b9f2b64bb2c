package engine_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// serveEnvironment serves a real environment service at addr until the
// returned stop is called.
func serveEnvironment(t *testing.T, addr, root string) (stop func()) {
	t.Helper()
	svc, err := environment.New(environment.Options{Root: root, ScratchDir: filepath.Join(t.TempDir(), "scratch"), DefaultSandbox: "none",
		Env: []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "SHELL=/bin/bash"}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Options{Name: "environment", ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterEnvironmentServiceServer(srv.GRPC(), svc)
	var lis net.Listener
	eventually.True(t, "the environment's port is free", func() bool {
		lis, err = net.Listen("tcp", addr)
		return err == nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-served
			svc.Close()
		}
	}
	t.Cleanup(stop)
	return stop
}

// Right after the environment service restarts, while the engine's
// connection to it is still waiting to reconnect, the first CreateSession
// succeeds: it waits for the connection instead of failing UNAVAILABLE.
func TestCreateSessionRightAfterTheEnvironmentRestarts(t *testing.T) {
	b := enginetest.NewBackends(t, emulator.Turn{Text: "unused"})
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	_ = probe.Close()
	stop := serveEnvironment(t, addr, root)

	envConn := dialReal(t, addr)
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	agentDir := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, agentDir, testConfig)
	mgr, err := session.New(session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(dialReal(t, b.LLM)), Environment: penguinv1.NewEnvironmentServiceClient(envConn),
		DefaultAgentState: agentDir, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = mgr.Shutdown(ctx)
	})
	spec := session.CreateSpec{Model: enginetest.Model, Workspace: filepath.Join(root, "ws")}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := mgr.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}

	// The service goes away; the connection notices and backs off.
	stop()
	envConn.Connect()
	eventually.True(t, "the connection to be in transient failure", func() bool {
		envConn.Connect()
		return envConn.GetState() == connectivity.TransientFailure
	})
	serveEnvironment(t, addr, root)
	start := time.Now()
	if _, err := mgr.Create(ctx, spec); err != nil {
		t.Fatalf("the first CreateSession after the restart: %v", err)
	}
	t.Logf("the first CreateSession after the restart took %v", time.Since(start).Round(time.Millisecond))
}

// A workspace given by an absolute path that does not exist is refused,
// with nothing created; a name relative to the environment's root is
// made.
func TestCreateSessionWorkspaceMustExist(t *testing.T) {
	s := newRealStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	missing := filepath.Join(s.root, "no-such-dir")
	_, err := s.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: missing})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "does not exist") {
		t.Fatalf("CreateSession(%s) = %v, want INVALID_ARGUMENT saying it does not exist", missing, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused workspace was created: %v", err)
	}
	list, err := s.client.ListSessions(ctx, &penguinv1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 0 {
		t.Fatalf("sessions after the refusal: %v, %v", list.GetSessions(), err)
	}
	id := s.create(t, penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL) // "ws", relative to the root
	if fi, err := os.Stat(filepath.Join(s.root, "ws")); err != nil || !fi.IsDir() || id == "" {
		t.Fatalf("the root's workspace ws was not made: %v", err)
	}
}
