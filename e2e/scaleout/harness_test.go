// Package scaleout tests Penguin deployed apart, as issue 7 describes:
// the three services as separate processes that find each other over a
// network, engine replicas sharing PostgreSQL, environment replicas on
// their own hosts (Linux network namespaces, package e2e/netns), replicas
// killed with SIGKILL in the middle of work, and one OpenTelemetry trace
// per turn across the services, received by an OTLP server inside the
// test.
package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// penguinBin is the penguin binary TestMain builds once for the package;
// it is set before any test runs and only read after.
var penguinBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "penguin-scaleout-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	penguinBin = filepath.Join(dir, "penguin")
	if err := e2etest.GoBuild(ctx, filepath.Join("..", ".."), "-o", penguinBin, "./cmd/penguin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			return 1
		}
	}
	return code
}

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// providersFile writes a providers file with one OpenAI-compatible route,
// "mock", to the emulator at url.
func providersFile(t testing.TB, url string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "providers.yaml",
		"providers:\n  - name: mock\n    type: openai\n    base_url: "+url+"/v1\n    api_key_env: MOCK_API_KEY\n")
}

// newSession creates a session on the emulator's route in workspace ws,
// with every tool allowed and no sandbox.
func newSession(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, ws string) string {
	t.Helper()
	resp, err := engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model:        &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"},
		Workspace:    ws,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
		SandboxMode:  penguinv1.SandboxMode_SANDBOX_MODE_NONE,
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetSessionId()
}

// runResult is what one Run stream carried.
type runResult struct {
	events []*penguinv1.RunEvent
	final  *penguinv1.RunStateChange // the idle state change, nil when the stream broke first
	err    error                     // how the stream ended, nil after the idle state
}

// text joins the texts of the tool outputs and assistant messages of the
// run, for assertions.
func (r runResult) text() string {
	var b strings.Builder
	for _, ev := range r.events {
		m := ev.GetMessage()
		if o := m.GetToolCallOutput(); o != nil {
			b.WriteString(o.GetOutput())
			b.WriteByte('\n')
		}
		if a := m.GetText(); a != nil && a.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			b.WriteString(a.GetText())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// runStream is a Run in progress, read in the background.
type runStream struct {
	events chan *penguinv1.RunEvent
	done   chan runResult
}

// startRun starts a Run and reads its stream in the background; every
// event is also sent on events (which is never closed; unread events are
// dropped rather than blocking the reader).
func startRun(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, id, prompt string) *runStream {
	t.Helper()
	stream, err := engine.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: prompt})
	if err != nil {
		t.Fatalf("Run %s: %v", id, err)
	}
	rs := &runStream{events: make(chan *penguinv1.RunEvent, 1024), done: make(chan runResult, 1)}
	go func() { rs.done <- readRun(stream, rs.events) }()
	return rs
}

func readRun(stream grpc.ServerStreamingClient[penguinv1.RunResponse], events chan<- *penguinv1.RunEvent) runResult {
	var r runResult
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) && r.final == nil {
				err = errors.New("the Run stream ended without an idle state")
			} else if errors.Is(err, io.EOF) {
				err = nil
			}
			r.err = err
			return r
		}
		ev := resp.GetEvent()
		r.events = append(r.events, ev)
		select {
		case events <- ev:
		default:
		}
		if st := ev.GetState(); st != nil && st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			r.final = st
		}
	}
}

// wait returns the run's result, failing the test when it does not end
// within d.
func (rs *runStream) wait(t testing.TB, d time.Duration) runResult {
	t.Helper()
	select {
	case r := <-rs.done:
		return r
	case <-time.After(d):
		t.Fatalf("the run did not end within %s", d)
		return runResult{}
	}
}

// waitEvent waits up to d for an event that match accepts.
func (rs *runStream) waitEvent(t testing.TB, d time.Duration, what string, match func(*penguinv1.RunEvent) bool) *penguinv1.RunEvent {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		select {
		case ev := <-rs.events:
			if match(ev) {
				return ev
			}
		case r := <-rs.done:
			rs.done <- r
			t.Fatalf("the run ended (%v, %v) before %s", r.final, r.err, what)
		case <-deadline.C:
			t.Fatalf("no %s within %s", what, d)
		}
	}
}

// runToEnd runs prompt on session id and requires the run to complete.
func runToEnd(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, id, prompt string) runResult {
	t.Helper()
	r := startRun(ctx, t, engine, id, prompt).wait(t, 60*time.Second)
	if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("run on %s ended with %v (%q), stream error %v; output:\n%s", id, r.final.GetStatus(), r.final.GetMessage(), r.err, r.text())
	}
	return r
}
