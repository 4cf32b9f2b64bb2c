package engine_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/pgtest"
	"github.com/penguin-agent/penguin/internal/proctest"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// buildPenguin builds the penguin binary once per test binary run.
var buildPenguin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "penguin-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "penguin")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/penguin-agent/penguin/cmd/penguin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// engineProc is a real `penguin serve engine` process.
type engineProc struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
}

func startEngineProc(t *testing.T, bin, addr, llmAddr, envAddr, storeURL, agentDir string) *engineProc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "engine-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "engine", "--listen", addr, "--llm", llmAddr, "--environment", envAddr,
		"--store", storeURL, "--agent-state", agentDir, "--home", t.TempDir())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = proctest.Env(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &engineProc{cmd: cmd, addr: addr, log: logf}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return p
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logf.Name())
			t.Fatalf("the engine did not become healthy: %v\n%s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *engineProc) client(t *testing.T) penguinv1.EngineServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return penguinv1.NewEngineServiceClient(conn)
}

func (p *engineProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// postgresURL creates a schema of its own in the test database and returns
// a URL that uses it; the schema is dropped when the test ends.
func postgresURL(t *testing.T) string { return pgtest.URL(t, "engine_crash") }

func TestCrashSafetySQLite(t *testing.T) {
	crashSafety(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "engine.db") })
}

func TestCrashSafetyPostgres(t *testing.T) {
	crashSafety(t, postgresURL)
}

// crashSafety SIGKILLs a real engine process in the middle of a run,
// restarts it on the same store and resumes the session: every committed
// message is there exactly once and the next run continues from the
// committed turns.
func crashSafety(t *testing.T, storeURL func(*testing.T) string) {
	if testing.Short() {
		t.Skip("builds and runs the penguin binary")
	}
	bin, err := buildPenguin()
	if err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	writeConfig(t, agentDir, testConfig)
	url := storeURL(t)

	// The fake model: a turn with a tool call, then a turn that hangs in
	// the middle of its answer (where the engine is killed), then, after
	// the restart, a plain answer.
	hung := newGate()
	llm := &fake.LLM{}
	llm.Generate = fake.Script(
		fake.NewReply().Text("Let me check.").ToolCall("c1", "exec_command", `{"cmd":"ls"}`).Done(),
		fake.NewReply().PartialOnly("The answer is").Hook(func(ctx context.Context) error {
			hung.open()
			<-ctx.Done()
			return ctx.Err()
		}),
		fake.NewReply().Text("Resumed fine.").Done(),
	)
	envSvc := &fake.Env{Tools: []*penguinv1.ToolInfo{fake.Tool("exec_command", penguinv1.Permission_PERMISSION_RW)}}
	llmAddr := fake.Listen(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, llm) })
	envAddr := fake.Listen(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, envSvc) })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := freePort(t)
	proc := startEngineProc(t, bin, addr, llmAddr, envAddr, url, agentDir)
	client := proc.client(t)
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, Workspace: "/work/ws", ApprovalMode: allowAll,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	stream, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "what is in the workspace?"})
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	var partial strings.Builder
	for !strings.HasSuffix(partial.String(), "The answer is") {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("run stream: %v", err)
		}
		seen = r.GetEvent().GetSequence()
		partial.WriteString(r.GetEvent().GetMessage().GetPartialText().GetText())
	}
	if err := hung.wait(ctx); err != nil {
		t.Fatal(err)
	}
	proc.kill(t)

	// Restart on the same store and address (the same engine, so it takes
	// its dead run's lease back at once).
	proc = startEngineProc(t, bin, addr, llmAddr, envAddr, url, agentDir)
	client = proc.client(t)
	hist, err := client.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	msgs := messages(hist.GetEvents())
	for kind, want := range map[string]int{"session_meta": 1, "tool_call": 1, "tool_call_output": 1, "approval_decision": 1, "request_end": 1, "tool_list_ready": 1} {
		if n := countKind(msgs, kind); n != want {
			t.Errorf("%s appears %d times in the log, want %d: %v", kind, n, want, payloadKinds(msgs))
		}
	}
	if !hasText(msgs, "what is in the workspace?") || !hasText(msgs, "Let me check.") || hasText(msgs, "The answer is") {
		t.Fatalf("log after the crash = %v", payloadKinds(msgs))
	}
	// The next run continues from the committed turn: the tool's output
	// (recorded, never sent) goes first, then the new prompt.
	evs, err := collect(must(client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go on"})))
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs)
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("resumed run ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	if evs[0].GetSequence() <= seen {
		t.Fatalf("a sequence number was reused after the crash: %d after %d", evs[0].GetSequence(), seen)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1]
	if got := strings.Join(payloadKinds(last.GetHistory()), ","); got != "text,text,tool_call" {
		t.Fatalf("resumed history = %s", got)
	}
	nm := last.GetNewMessages()
	if len(nm) != 2 || nm[0].GetToolCallOutput().GetToolCallId() != "c1" || nm[1].GetText().GetText() != "go on" {
		t.Fatalf("resumed input = %v", nm)
	}
	// Nothing twice: every logged message is unique.
	hist, err = client.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	msgs = messages(hist.GetEvents())
	if n := countKind(msgs, "tool_call"); n != 1 {
		t.Fatalf("tool_call logged %d times", n)
	}
	if !hasText(msgs, "Resumed fine.") {
		t.Fatal("the resumed answer is not in the log")
	}
	// A graceful stop (SIGTERM) ends the process cleanly.
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Wait(); err != nil {
		out, _ := os.ReadFile(proc.log.Name())
		t.Fatalf("graceful stop: %v\n%s", err, out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
