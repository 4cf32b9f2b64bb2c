// Package engine_test tests the engine service as a process: a real
// `penguin serve engine` is killed and restarted on its store, with the
// real llm service (in front of the provider emulator) and the real
// environment service running in the test on loopback ports
// (enginetest.Backends), so the test can script the model and read what
// reached it.
package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
)

// penguinBin is the binary TestMain builds once for the package.
var penguinBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "penguin-e2e-engine-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	repo, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	penguinBin = filepath.Join(dir, "penguin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := e2etest.GoBuild(ctx, repo, "-o", penguinBin, "./cmd/penguin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// agentConfig reconnects on a millisecond clock.
const agentConfig = `max_turns: -1
retry:
  max_attempts: 3
  base_delay: 1ms
  max_delay: 4ms
`

// startEngine runs `penguin serve engine` on listen, with extra flags after
// the usual ones, and returns the process and the address it serves on,
// once it is serving.
func startEngine(t *testing.T, listen string, b *enginetest.Backends, storeURL, agentDir string, extra ...string) (*netns.Proc, string) {
	t.Helper()
	cmd := exec.Command(penguinBin, append([]string{"serve", "engine", "--listen", listen, "--llm", b.LLM, "--environment", b.Environment,
		"--store", storeURL, "--agent-state", agentDir, "--home", t.TempDir()}, extra...)...)
	cmd.Env = append(e2etest.BaseEnv(t), "PENGUIN_AUTH_TOKEN=")
	p := netns.Start(t, "engine", cmd)
	addr := p.WaitLog("gRPC server listening", map[string]string{"server": "engine"}, "addr", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := netns.WaitServing(ctx, addr, ""); err != nil {
		t.Fatal(err)
	}
	return p, addr
}

// postgresURL returns a URL of a schema of its own in the test database,
// dropped when the test ends.
func postgresURL(t *testing.T) string { return pgtest.URL(t, "engine_crash") }

func TestCrashSafetySQLite(t *testing.T) {
	crashSafety(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "engine.db") })
}

func TestCrashSafetyPostgres(t *testing.T) {
	crashSafety(t, postgresURL)
}

// crashSafety SIGKILLs a real engine process in the middle of a run,
// restarts it on the same store and address and resumes the session:
// every committed message is there exactly once and the next run
// continues from the committed turns.
func crashSafety(t *testing.T, storeURL func(*testing.T) string) {
	// The model: a turn with a tool call, then a turn that stalls after
	// the delta of its answer, before the chunk that ends it (where the
	// engine is killed), then, after the restart, a plain answer. The
	// stalled turn's stream is the role chunk and one content delta.
	b := enginetest.NewBackends(t,
		emulator.Turn{Text: "Let me check.", ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "exec_command", Arguments: `{"cmd":"ls","description":"list"}`}}},
		emulator.Turn{Text: "The answer is", ChunkSize: 64, Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 2}},
		emulator.Turn{Text: "Resumed fine."},
	)
	agentDir := t.TempDir()
	// Without durable tasks: the cut-off run stays stopped and the next
	// Run continues from the log (durable_test.go resumes it instead).
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte(agentConfig+"durable_tasks: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := storeURL(t)

	ctx := testkit.Context(t, 2*time.Minute)
	proc, addr := startEngine(t, "127.0.0.1:0", b, url, agentDir)
	client := e2etest.DialEngine(t, addr, "")
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
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
	proc.Kill()

	// Restart on the same store and address (the same engine, so it takes
	// its dead run's lease back at once).
	proc, _ = startEngine(t, addr, b, url, agentDir)
	client = e2etest.DialEngine(t, addr, "")
	msgs := enginetest.Messages(e2etest.History(ctx, t, client, id))
	for kind, want := range map[string]int{"session_meta": 1, "tool_call": 1, "tool_call_output": 1, "approval_decision": 1, "request_end": 1, "tool_list_ready": 1} {
		if n := enginetest.CountKind(msgs, kind); n != want {
			t.Errorf("%s appears %d times in the log, want %d: %v", kind, n, want, enginetest.Kinds(msgs))
		}
	}
	if !enginetest.HasText(msgs, "what is in the workspace?") || !enginetest.HasText(msgs, "Let me check.") || enginetest.HasText(msgs, "The answer is") {
		t.Fatalf("log after the crash = %v", enginetest.Kinds(msgs))
	}
	// The next run continues from the committed turn: the tool's output
	// (recorded, never sent) goes first, then the new prompt. Sent right
	// after the restart, it waits while the engine looks at the cut-off
	// run (which it would resume, were the agent durable).
	run, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go on"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := enginetest.Collect(run)
	if err != nil || len(evs) == 0 {
		t.Fatalf("resumed run: %d events, %v", len(evs), err)
	}
	if st := evs[len(evs)-1].GetState(); st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || st.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("resumed run ended with %v", evs[len(evs)-1])
	}
	for i, ev := range evs {
		if i > 0 && ev.GetSequence() <= evs[i-1].GetSequence() {
			t.Fatalf("sequence %d after %d", ev.GetSequence(), evs[i-1].GetSequence())
		}
	}
	if evs[0].GetSequence() <= seen {
		t.Fatalf("a sequence number was reused after the crash: %d after %d", evs[0].GetSequence(), seen)
	}
	// What reached the model: the committed turn (the prompt, the answer
	// with its call, the call's output), then the new prompt; nothing of
	// the answer cut off by the crash.
	reqs := b.Emulator.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d provider requests, want 3", len(reqs))
	}
	if got := chatShape(t, reqs[2].Body); got != "system,user:what is in the workspace?,assistant:Let me check.[c1],tool:c1,user:go on" {
		t.Fatalf("resumed request = %s", got)
	}
	// Nothing twice: every logged message is unique.
	msgs = enginetest.Messages(e2etest.History(ctx, t, client, id))
	if n := enginetest.CountKind(msgs, "tool_call"); n != 1 {
		t.Fatalf("tool_call logged %d times", n)
	}
	if !enginetest.HasText(msgs, "Resumed fine.") {
		t.Fatal("the resumed answer is not in the log")
	}
	// A graceful stop (SIGTERM) ends the process cleanly.
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
}

// chatShape summarizes an OpenAI chat request's messages: the role of
// each, with a user's or assistant's text, an assistant's tool call ids
// and a tool result's call id.
func chatShape(t *testing.T, body map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, m := range req.Messages {
		s := m.Role
		switch m.Role {
		case "user", "assistant":
			if text, ok := m.Content.(string); ok && text != "" {
				s += ":" + text
			}
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			if len(ids) > 0 {
				s += "[" + strings.Join(ids, ",") + "]"
			}
		case "tool":
			s += ":" + m.ToolCallID
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}
