package environment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
	"github.com/penguin-agent/penguin/internal/testkit/servetest"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// TestMain lets the test binary play the penguin binary's hidden
// sandbox-exec role, which confined commands re-execute, and the probes
// that attacks run inside a sandbox (see probes).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubcommandName {
		err := sandbox.SandboxExec(os.Args[2:])
		os.Stderr.WriteString("penguin: " + err.Error() + "\n")
		os.Exit(sandbox.ExitCode)
	}
	if len(os.Args) > 1 {
		if probe, ok := probes[os.Args[1]]; ok {
			os.Exit(probe(os.Args[2:]))
		}
	}
	code := m.Run()
	if trampolineDir != "" {
		os.RemoveAll(trampolineDir)
	}
	os.Exit(code)
}

// trampolineDir holds the trampoline binary that trampoline builds.
var trampolineDir string

// trampoline is the sandbox trampoline the tests' services start confined
// commands through: penguin-sandbox, as beside an installed penguin, built
// once per test binary without the race detector, which makes a process
// start many times slower and the tests' thousands of trampolines with it.
// (The sandbox package's tests run the trampoline code under the race
// detector; TestServeEnvironment runs the penguin binary's.)
// Where there is no Go toolchain, as in the environment pod that the
// Kubernetes suite runs the attack suite in, PENGUIN_TEST_TRAMPOLINE names a
// built one instead.
var trampoline = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("PENGUIN_TEST_TRAMPOLINE"); bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "penguin-trampoline-")
	if err != nil {
		return "", err
	}
	trampolineDir = dir
	bin := filepath.Join(dir, "penguin-sandbox")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/penguin-sandbox")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the sandbox trampoline: %v\n%s", err, out)
	}
	return bin, nil
})

// podSandboxUser is the sandbox user of PENGUIN_TEST_SANDBOX_USER ("UID" or
// "UID:GID"), or the zero Identity (the service's default) when it is unset.
// The Kubernetes suite sets it to run this suite as an environment pod's
// service runs: commands as the workspaces' owner, since the pod's user
// namespace maps the workspaces volume already and the sandbox cannot map
// it once more.
func podSandboxUser(t testing.TB) sandbox.Identity {
	t.Helper()
	v := os.Getenv("PENGUIN_TEST_SANDBOX_USER")
	if v == "" {
		return sandbox.Identity{}
	}
	id, err := sandbox.ParseIdentity(v)
	if err != nil {
		t.Fatalf("PENGUIN_TEST_SANDBOX_USER: %v", err)
	}
	return id
}

// testRoot makes a directory for a service's workspaces. Under
// PENGUIN_TEST_ROOTS (the pod's workspaces volume, in the Kubernetes suite)
// it is made there and given to the sandbox user of PENGUIN_TEST_SANDBOX_USER,
// as the volume's directories belong to it; otherwise it is a test temporary
// directory, owned by the service as on a host.
func testRoot(t testing.TB) string {
	t.Helper()
	base := os.Getenv("PENGUIN_TEST_ROOTS")
	if base == "" {
		return t.TempDir()
	}
	return rootUnder(t, base)
}

// rootUnder makes a directory for a service's workspaces under base, given
// to the sandbox user of PENGUIN_TEST_SANDBOX_USER when that is set.
func rootUnder(t testing.TB, base string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if id := podSandboxUser(t); id != (sandbox.Identity{}) {
		if err := os.Chown(dir, int(id.UID), int(id.GID)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// harness is an environment service on a real loopback port with a client.
type harness struct {
	t       testing.TB
	svc     *environment.Service
	client  penguinv1.EnvironmentServiceClient
	root    string
	scratch string
	home    string
	addr    net.Addr
}

// port is the service's port on 127.0.0.1.
func (h *harness) port() int { return h.addr.(*net.TCPAddr).Port }

// start serves a Service on 127.0.0.1 and connects a client to it. The
// commands get a private HOME so the host's login profile stays out.
func start(t testing.TB, opts environment.Options) *harness {
	t.Helper()
	if opts.Root == "" {
		opts.Root = testRoot(t)
	}
	if opts.SandboxUser == (sandbox.Identity{}) {
		opts.SandboxUser = podSandboxUser(t)
	}
	if opts.ScratchDir == "" {
		opts.ScratchDir = t.TempDir()
	}
	if opts.Self == "" {
		self, err := trampoline()
		if err != nil {
			t.Fatal(err)
		}
		opts.Self = self
	}
	home := t.TempDir()
	if opts.Env == nil {
		opts.Env = proctest.Env(t, "HOME="+home)
	}
	svc, err := environment.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	client, addr := serve(t, svc)
	t.Cleanup(svc.Close) // before the server stops, as cleanups run last first
	return &harness{t: t, svc: svc, client: client, root: svc.Root(), scratch: opts.ScratchDir, home: home, addr: addr}
}

// inProcess serves svc as penguin serve does (grpcserver, no tracing) and
// returns a client of its in-process channel; the server stops when the
// test ends.
func inProcess(t testing.TB, svc penguinv1.EnvironmentServiceServer) penguinv1.EnvironmentServiceClient {
	t.Helper()
	srv, err := grpcserver.New(grpcserver.Options{Name: "environment", ShutdownTimeout: 5 * time.Second, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterEnvironmentServiceServer(srv, svc)
	servetest.Serve(t, srv)
	return penguinv1.NewEnvironmentServiceClient(srv.InProcess())
}

// serve serves svc on a loopback port with large buffers and windows (the
// bandwidth benchmarks move gigabytes) and returns a client of it and its
// address; both stop when the test ends.
func serve(t testing.TB, svc penguinv1.EnvironmentServiceServer) (penguinv1.EnvironmentServiceClient, net.Addr) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.WriteBufferSize(1<<20), grpc.ReadBufferSize(1<<20))
	penguinv1.RegisterEnvironmentServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(4<<20), grpc.WithInitialConnWindowSize(8<<20), grpc.WithReadBufferSize(1<<20), grpc.WithWriteBufferSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return penguinv1.NewEnvironmentServiceClient(conn), lis.Addr()
}

// create creates an environment and returns its response.
func (h *harness) create(req *penguinv1.CreateEnvironmentRequest) *penguinv1.CreateEnvironmentResponse {
	h.t.Helper()
	if req.Workspace == "" {
		req.Workspace = "ws-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	resp, err := h.client.CreateEnvironment(testkit.Context(h.t, 60*time.Second), req)
	if err != nil {
		h.t.Fatalf("CreateEnvironment: %v", err)
	}
	return resp
}

// result is one ExecuteTool call as the client saw it.
type result struct {
	frames []*penguinv1.OmniMessage
	out    *penguinv1.ToolCallOutput
}

func (r result) text() string { return r.out.GetOutput() }

func (r result) deltas() []string {
	var out []string
	for _, m := range r.frames {
		if p := m.GetPartialToolCallOutput(); p != nil && p.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
			out = append(out, p.GetOutput())
		}
	}
	return out
}

var callSeq struct {
	sync.Mutex
	n int
}

func nextCallID() string {
	callSeq.Lock()
	defer callSeq.Unlock()
	callSeq.n++
	return "call-" + strconv.Itoa(callSeq.n)
}

// args encodes tool arguments.
func args(kv map[string]any) string {
	b, _ := json.Marshal(kv)
	return string(b)
}

// exec runs one tool call to its end and checks the stream with the
// contract's validator.
func (h *harness) exec(env, name, arguments string) result {
	h.t.Helper()
	return h.execCtx(testkit.Context(h.t, 120*time.Second), env, name, arguments)
}

func (h *harness) execCtx(ctx context.Context, env, name, arguments string) result {
	h.t.Helper()
	r, err := h.tryExec(ctx, env, name, arguments)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// tryExec is exec for goroutines other than the test's: it reports
// failures instead of ending the test.
func (h *harness) tryExec(ctx context.Context, env, name, arguments string) (result, error) {
	id := nextCallID()
	stream, err := h.client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{
		EnvironmentId: env,
		ToolCall:      &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: name, Arguments: arguments, ToolCallId: id},
	})
	if err != nil {
		return result{}, fmt.Errorf("ExecuteTool: %w", err)
	}
	var r result
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r, fmt.Errorf("ExecuteTool %s: %w (after %d frames)", name, err, len(r.frames))
		}
		r.frames = append(r.frames, resp.GetMessage())
	}
	if err := omni.ValidateToolStream(id, r.frames); err != nil {
		return r, fmt.Errorf("%s broke the streaming discipline: %w", name, err)
	}
	r.out = r.frames[len(r.frames)-1].GetToolCallOutput()
	return r, nil
}

// wantStop checks a result's stop reason and that its output contains
// every one of want.
func wantStop(t *testing.T, r result, stop penguinv1.StopReason, want ...string) {
	t.Helper()
	if r.out.GetStopReason() != stop {
		t.Fatalf("stop_reason %v, want %v; output:\n%s", r.out.GetStopReason(), stop, r.text())
	}
	for _, w := range want {
		if !strings.Contains(r.text(), w) {
			t.Fatalf("output lacks %q:\n%s", w, r.text())
		}
	}
}

const (
	ok       = penguinv1.StopReason_STOP_REASON_UNSPECIFIED
	failed   = penguinv1.StopReason_STOP_REASON_FAILED
	aborted  = penguinv1.StopReason_STOP_REASON_ABORTED
	timedOut = penguinv1.StopReason_STOP_REASON_TIMEOUT
)

// processAlive reports whether pid is a live, non-zombie process.
func processAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// buildMCPServer builds the test MCP server and returns its path.
func buildMCPServer(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	cmd := exec.Command("go", "build", "-o", bin, "./mcp/testdata/mcpserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test MCP server: %v\n%s", err, out)
	}
	return bin
}

// requireConfinement skips a test of the confined modes, naming what is
// missing, on a host that cannot enforce them (the sandbox package's
// TestHostCheck proves that CreateEnvironment then fails clearly).
func requireConfinement(t testing.TB) {
	t.Helper()
	if err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir(), Network: sandbox.NetworkNone}); err != nil {
		t.Skipf("this host cannot confine commands: %v", err)
	}
}

// outsideDir makes a directory outside every workspace that a confined
// command can see.
func outsideDir(t testing.TB) string { return proctest.DirOutsideTmp(t) }

// intsAfter parses every integer that follows prefix in text.
func intsAfter(text, prefix string) []int {
	var out []int
	for _, line := range strings.Split(text, "\n") {
		if rest, found := strings.CutPrefix(strings.TrimSpace(line), prefix); found {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
