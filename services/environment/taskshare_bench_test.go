package environment_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment"
)

// BenchmarkTaskShare is the environment service's part of a task of the
// task benchmark (e2e/bench): the workspace described (CreateSession),
// the turn's start checkpoint, an environment made on the existing
// workspace as the engine asks for one, a read_file through the
// server's in-process channel, the turn's end checkpoint after it. The
// environment is disposed one task later: the server keeps a session's
// environment for the idle timeout after its task, so that another
// environment of the workspace is alive at each task's checkpoints.
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
	client := inProcess(b, h.svc)
	ctx := context.Background()
	var last string // the environment of the task before
	task := func() {
		if _, err := h.svc.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: ws}); err != nil {
			b.Fatal(err)
		}
		first, err := h.svc.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		env, err := h.svc.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: ws, Label: uuid.NewString()})
		if err != nil {
			b.Fatal(err)
		}
		stream, err := client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: env.GetEnvironmentId(), ToolCall: &penguinv1.ToolCall{
			Name: "read_file", Arguments: `{"file_path":"hello.txt"}`, ToolCallId: "call-1",
		}})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		if _, err := h.svc.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: ws, Since: first.GetCheckpoint()}); err != nil {
			b.Fatal(err)
		}
		if last != "" {
			if _, err := h.svc.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: last}); err != nil {
				b.Fatal(err)
			}
		}
		last = env.GetEnvironmentId()
	}
	task()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		task()
	}
}
