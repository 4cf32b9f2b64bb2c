package environment_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment"
)

// BenchmarkTaskShare is the environment service's part of a task of the
// task benchmark (e2e/bench), called directly: an environment made on an
// existing workspace as the engine asks for one, a turn's start
// checkpoint and its end checkpoint after a read, the disposal.
func BenchmarkTaskShare(b *testing.B) {
	h := start(b, environment.Options{})
	ws := filepath.Join(h.root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("Hello from the benchmark's workspace.\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	// Written long before, as the benchmark's is by the time it is
	// measured: a file changed within the last two seconds is read again.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(ws, "hello.txt"), old, old); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	task := func() {
		env, err := h.svc.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: ws, Label: uuid.NewString()})
		if err != nil {
			b.Fatal(err)
		}
		first, err := h.svc.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.svc.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: ws, Since: first.GetCheckpoint()}); err != nil {
			b.Fatal(err)
		}
		if _, err := h.svc.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env.GetEnvironmentId()}); err != nil {
			b.Fatal(err)
		}
	}
	task()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		task()
	}
}
