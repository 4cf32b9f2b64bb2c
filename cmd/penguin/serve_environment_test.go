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
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// TestServeEnvironment runs the real binary: health, auth, a command
// through the service, a confined command through the real sandbox-exec
// trampoline (the default where the host can enforce it) that cannot
// reach the server nor read its token file, and a graceful stop that ends
// every process it started.
func TestServeEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	// The token file lies where confined commands can see files (not
	// under /tmp, which is each environment's own), readable by everyone
	// as a mounted secret often is.
	secrets, err := os.MkdirTemp(".", ".secrets-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(secrets)
	if err := os.Chmod(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	tokenFile, err := filepath.Abs(filepath.Join(secrets, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "serve", "environment", "--listen", "127.0.0.1:0", "--root", root, "--auth-token-file", tokenFile)
	cmd.Env = proctest.Env(t)
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
	// Sandbox none: its commands see the host's pids, which the graceful
	// stop's check reads.
	env, err := client.CreateEnvironment(authed, &penguinv1.CreateEnvironmentRequest{Workspace: "ws", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
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

	beat := ""
	if err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: root, Network: sandbox.NetworkNone}); err != nil {
		t.Logf("no confined commands on this host: %v", err)
	} else {
		confined, err := client.CreateEnvironment(authed, &penguinv1.CreateEnvironmentRequest{Workspace: "confined"})
		if err != nil {
			t.Fatal(err)
		}
		if confined.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE || confined.GetNetwork() != penguinv1.NetworkAccess_NETWORK_ACCESS_NONE {
			t.Fatalf("the default sandbox is %v, %v; want workspace-write without network", confined.GetSandboxMode(), confined.GetNetwork())
		}
		outside, err := filepath.Abs(secrets)
		if err != nil {
			t.Fatal(err)
		}
		out := run(t, authed, client, confined.GetEnvironmentId(), `{"cmd":"echo in > inside.txt && cat inside.txt; echo out > `+outside+`/x.txt; echo \"token=[$(cat `+tokenFile+`)]\"; env | grep -c s3cret; curl -sS -m 5 http://`+addr+`/ 2>&1 | head -c 200; echo"}`)
		for _, want := range []string{"in\n", "Read-only file system", "token=[]", "\n0\n", "Failed to connect"} {
			if !strings.Contains(out, want) {
				t.Fatalf("confined command: %q lacks %q", out, want)
			}
		}
		// A confined daemon, which the graceful stop must end too. Its
		// command waits a moment, as TestDisposeEndsEverything's does: a
		// command that ends at once takes with it what it started in the
		// background before that was on its own.
		beat = filepath.Join(confined.GetWorkspace(), "beat")
		started := run(t, authed, client, confined.GetEnvironmentId(), `{"cmd":"nohup setsid bash -c 'while true; do date +%s%N > beat; sleep 0.05; done' </dev/null >/dev/null 2>&1 & sleep 0.5"}`)
		if !changes(beat, 5*time.Second) {
			b, err := os.ReadFile(beat)
			t.Fatalf("the confined daemon does not run: its command said %q; the file holds %q (%v)", started, b, err)
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
	if beat != "" && changes(beat, 3*time.Second) {
		t.Fatal("a confined daemon outlived the server")
	}
}

// changes reports whether the file at path changes within d, polling it.
func changes(path string, d time.Duration) bool {
	first, _ := os.ReadFile(path)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if now, err := os.ReadFile(path); err == nil && len(now) > 0 && string(now) != string(first) {
			return true
		}
	}
	return false
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
