package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/proctest"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// TestServeEnvironment runs the real binary: health, auth, a command
// through the service, a confined command through the real sandbox-exec
// trampoline, and a graceful stop that ends every process it started.
func TestServeEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	cmd := exec.CommandContext(ctx, binary, "serve", "environment", "--listen", "127.0.0.1:0", "--root", root)
	cmd.Env = proctest.Env(t, "PENGUIN_AUTH_TOKEN=s3cret")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := ""
	lines := bufio.NewScanner(stderr)
	addrRE := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	for lines.Scan() {
		if m := addrRE.FindStringSubmatch(lines.Text()); m != nil && strings.Contains(lines.Text(), `msg="environment listening"`) {
			addr = m[1]
			break
		}
	}
	if addr == "" {
		t.Fatalf("the server never said where it listens: %v", lines.Err())
	}
	go io.Copy(io.Discard, stderr)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "penguin.v1.EnvironmentService"})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	client := penguinv1.NewEnvironmentServiceClient(conn)
	if _, err := client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "ws"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without the token: %v", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")
	env, err := client.CreateEnvironment(authed, &penguinv1.CreateEnvironmentRequest{Workspace: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	if env.GetWorkspace() != filepath.Join(root, "ws") {
		t.Fatalf("workspace %q", env.GetWorkspace())
	}
	out := run(t, authed, client, env.GetEnvironmentId(), `{"cmd":"echo leader $$; sleep 1000 & sleep 1000","yield_time_ms":500}`)
	m := regexp.MustCompile(`leader (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no leader pid in %q", out)
	}
	leader, _ := strconv.Atoi(m[1])

	if sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: root}) == nil {
		confined, err := client.CreateEnvironment(authed, &penguinv1.CreateEnvironmentRequest{Workspace: "confined", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
		if err != nil {
			t.Fatal(err)
		}
		outside, err := os.MkdirTemp("/var/tmp", "penguin-serve-outside-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(outside)
		out := run(t, authed, client, confined.GetEnvironmentId(), `{"cmd":"echo in > inside.txt && cat inside.txt; echo out > `+outside+`/x.txt"}`)
		if !strings.Contains(out, "in\n") || !strings.Contains(out, "Permission denied") {
			t.Fatalf("confined command: %q", out)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if left := proctest.GroupMembers(t, leader); len(left) > 0 {
		t.Fatalf("processes outlived the server: %v", left)
	}
}

// run executes exec_command and returns its final output.
func run(t *testing.T, ctx context.Context, c penguinv1.EnvironmentServiceClient, env, args string) string {
	t.Helper()
	stream, err := c.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: env, ToolCall: &penguinv1.ToolCall{Name: "exec_command", ToolCallId: "c", Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	var last *penguinv1.OmniMessage
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = resp.GetMessage()
	}
	return last.GetToolCallOutput().GetOutput()
}
