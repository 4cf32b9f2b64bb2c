package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// demoScript and demoWorkspace are the demo's scripted model and its
// workspace: the end-to-end coding tests run exactly what `make demo` runs.
func demoScript() string    { return filepath.Join(bin.repo, "examples", "demo", "script.yaml") }
func demoWorkspace() string { return filepath.Join(bin.repo, "examples", "demo", "workspace") }

// codingTask runs the demo's coding task with `penguin run --engine addr`
// on a fresh copy of the demo workspace under root, then checks what
// really happened: add.sh is fixed on disk, CHANGELOG.md was written, and
// the history holds the test command's output with exit code 0.
func codingTask(t *testing.T, engineAddr, provider, root string) {
	t.Helper()
	ctx := testkit.Context(t, 2*time.Minute)
	ws, err := os.MkdirTemp(root, "coding-")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"add.sh", "test.sh"} {
		data, err := os.ReadFile(filepath.Join(demoWorkspace(), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	run := start(t, "penguin run", nil, "run", "--engine", engineAddr, "--provider", provider, "--model", "demo",
		"--workspace", ws, "--approval", "allow-all", "test.sh fails; fix add.sh")
	if code := run.Wait(90 * time.Second); code != 0 {
		t.Fatalf("penguin run exited %d:\n%s", code, run.Output())
	}
	out := run.Output()
	for _, want := range []string{"⏺ read_file", "⏺ edit_file", "⏺ write_file", "⏺ exec_command", "all tests passed", "Fixed: add.sh now adds", "tokens: "} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal output lacks %q:\n%s", want, out)
		}
	}

	// The files really changed.
	add, err := os.ReadFile(filepath.Join(ws, "add.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(add), "echo $(( $1 + $2 ))") || strings.Contains(string(add), "$1 - $2") {
		t.Errorf("add.sh was not fixed on disk:\n%s", add)
	}
	changelog, err := os.ReadFile(filepath.Join(ws, "CHANGELOG.md"))
	if err != nil {
		t.Fatalf("CHANGELOG.md was not written: %v", err)
	}
	if !strings.Contains(string(changelog), "add its arguments instead of subtracting") {
		t.Errorf("CHANGELOG.md = %q", changelog)
	}

	// The session's history holds the test run's real output.
	id := sessionIDFrom(t, out)
	engine := e2etest.DialEngine(t, engineAddr, "")
	events := e2etest.History(ctx, t, engine, id)
	var calls []string
	var testOutput string
	for _, ev := range events {
		m := ev.GetMessage()
		if c := m.GetToolCall(); c != nil {
			calls = append(calls, c.GetName())
		}
		if o := m.GetToolCallOutput(); o != nil && strings.Contains(o.GetOutput(), "all tests passed") {
			testOutput = o.GetOutput()
			if s := o.GetStopReason(); s != penguinv1.StopReason_STOP_REASON_UNSPECIFIED && s != penguinv1.StopReason_STOP_REASON_COMPLETED {
				t.Errorf("the test command's output ended %v", o.GetStopReason())
			}
		}
		if m.GetPartialText() != nil || m.GetPartialToolCallOutput() != nil {
			t.Errorf("the history holds a partial at %d", ev.GetSequence())
		}
	}
	if got, want := strings.Join(calls, ","), "read_file,edit_file,write_file,exec_command"; got != want {
		t.Errorf("tool calls in the history = %s, want %s", got, want)
	}
	if !strings.Contains(testOutput, "ok   add.sh 2 3 = 5") || !strings.Contains(testOutput, "exit code 0") {
		t.Errorf("the history lacks the passing test output; got %q", testOutput)
	}
	sess, err := engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if sess.GetSession().GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || sess.GetSession().GetUsage().GetOutput() == 0 {
		t.Errorf("session after the task: %v", sess.GetSession())
	}
}

// sessionIDFrom finds the "session ID" line penguin run prints on stderr.
func sessionIDFrom(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(line, "session "); ok && !strings.Contains(id, " ") {
			return id
		}
	}
	t.Fatalf("no session id in the output:\n%s", out)
	return ""
}

// TestDistributed runs the three services as three processes on their own
// ports, as a deployment does, plus the emulator, and drives the demo's
// coding task through them.
func TestDistributed(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "coding", demoScript())
	providers := writeProviders(t, route{"scripted", mock})
	root := t.TempDir()
	home := t.TempDir()

	llm := start(t, "serve llm", []string{"MOCK_API_KEY=unused"}, "serve", "llm", "--listen", "127.0.0.1:0", "--providers", providers)
	env := start(t, "serve environment", nil, "serve", "environment", "--listen", "127.0.0.1:0", "--root", root)
	llmAddr, envAddr := grpcAddr(llm, "llm"), grpcAddr(env, "environment")
	engine := start(t, "serve engine", nil, "serve", "engine", "--listen", "127.0.0.1:0",
		"--llm", llmAddr, "--environment", envAddr, "--home", home)
	codingTask(t, grpcAddr(engine, "engine"), "scripted", root)
}
