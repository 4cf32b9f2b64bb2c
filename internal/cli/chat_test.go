package cli_test

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/fakeengine"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// syncBuffer is a bytes buffer safe for the chat goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// chatEngine is a fake engine for one chat: each Run asks for one approval,
// then waits until it is aborted or told to finish.
type chatEngine struct {
	mu        sync.Mutex
	runs      []*penguinv1.RunRequest
	steers    []string
	decisions []penguinv1.Decision
	aborts    int
	finish    chan struct{}
	abort     chan struct{}
}

func (ce *chatEngine) fake() *fakeengine.Engine {
	return &fakeengine.Engine{
		CreateSessionFunc: func(_ context.Context, r *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
			return &penguinv1.CreateSessionResponse{Session: &penguinv1.Session{SessionId: "s-new", Model: r.GetModel(), Workspace: r.GetWorkspace()}}, nil
		},
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			ce.mu.Lock()
			ce.runs = append(ce.runs, proto.Clone(r).(*penguinv1.RunRequest))
			ce.mu.Unlock()
			send := func(ev *penguinv1.RunEvent) error { return s.Send(&penguinv1.RunResponse{Event: ev}) }
			if err := send(msgEvent(1, omni.UserText(r.GetPrompt()))); err != nil {
				return err
			}
			if err := send(&penguinv1.RunEvent{Sequence: 2, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{
				ToolCall: &penguinv1.ToolCall{Name: "exec_command", ToolCallId: "c1", Arguments: `{"cmd":"make"}`},
			}}}); err != nil {
				return err
			}
			select {
			case <-ce.finish:
				return send(idle(3, penguinv1.StopReason_STOP_REASON_COMPLETED, ""))
			case <-ce.abort:
				if err := send(msgEvent(3, omni.Abort("Ctrl-C"))); err != nil {
					return err
				}
				return send(idle(4, penguinv1.StopReason_STOP_REASON_ABORTED, ""))
			case <-s.Context().Done():
				return nil
			}
		},
		ApproveFunc: func(_ context.Context, r *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
			ce.mu.Lock()
			defer ce.mu.Unlock()
			ce.decisions = append(ce.decisions, r.GetDecision())
			return &penguinv1.ApproveResponse{}, nil
		},
		SteerFunc: func(_ context.Context, r *penguinv1.SteerRequest) (*penguinv1.SteerResponse, error) {
			ce.mu.Lock()
			defer ce.mu.Unlock()
			ce.steers = append(ce.steers, r.GetText())
			return &penguinv1.SteerResponse{}, nil
		},
		AbortFunc: func(context.Context, *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
			ce.mu.Lock()
			ce.aborts++
			ce.mu.Unlock()
			ce.abort <- struct{}{}
			return &penguinv1.AbortResponse{Aborted: true}, nil
		},
	}
}

func (ce *chatEngine) count(f func() int) func() int {
	return func() int {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		return f()
	}
}

// TestChatApprovesSteersAbortsAndQuits types into a chat as a person would:
// a prompt, an approval answer, a steering line, Ctrl-C to abort, a
// /thinking override for the next prompt, then /exit.
func TestChatApprovesSteersAbortsAndQuits(t *testing.T) {
	t.Parallel()
	ce := &chatEngine{finish: make(chan struct{}), abort: make(chan struct{}, 1)}
	engine := fakeengine.Start(t, ce.fake())
	in, typed := io.Pipe()
	interrupt := make(chan os.Signal, 1)
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cli.Chat(ctx, engine, cli.ChatOptions{
			NewSession: &penguinv1.CreateSessionRequest{Model: &penguinv1.ModelRef{Provider: "p", ModelId: "m"}, Workspace: "/w"},
		}, in, &out, interrupt)
	}()
	typeLine := func(s string) {
		if _, err := io.WriteString(typed, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	runs := ce.count(func() int { return len(ce.runs) })
	decisions := ce.count(func() int { return len(ce.decisions) })
	steers := ce.count(func() int { return len(ce.steers) })
	aborts := ce.count(func() int { return ce.aborts })

	waitFor(t, "the session banner", func() bool { return strings.Contains(out.String(), "session s-new") })
	typeLine("build it")
	waitFor(t, "the approval prompt", func() bool { return strings.Contains(out.String(), "Allow exec_command") })
	typeLine("n")
	waitFor(t, "the decision", func() bool { return decisions() == 1 })
	typeLine("also run the linter")
	waitFor(t, "the steer", func() bool { return steers() == 1 })
	interrupt <- os.Interrupt
	waitFor(t, "the abort", func() bool { return aborts() == 1 })
	waitFor(t, "the aborted task to end", func() bool { return strings.Contains(out.String(), "⏹ aborted") })
	// The abort message comes before the run's final idle state; wait for the
	// prompt, or the next lines would steer the run that is winding down.
	waitFor(t, "the prompt after the task", func() bool { return strings.Count(out.String(), "› ") == 2 })

	typeLine("/thinking high")
	typeLine("try again")
	waitFor(t, "the second run", func() bool { return runs() == 2 })
	waitFor(t, "the second approval prompt", func() bool { return strings.Count(out.String(), "Allow exec_command") == 2 })
	interrupt <- os.Interrupt // at an approval prompt, Ctrl-C denies
	waitFor(t, "the denial", func() bool { return decisions() == 2 })
	ce.finish <- struct{}{}
	typeLine("/exit")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("chat did not quit on /exit")
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if ce.steers[0] != "also run the linter" {
		t.Errorf("steered with %q", ce.steers[0])
	}
	if ce.decisions[0] != penguinv1.Decision_DECISION_DENY || ce.decisions[1] != penguinv1.Decision_DECISION_DENY {
		t.Errorf("decisions %v, want deny twice", ce.decisions)
	}
	if ce.runs[1].GetThinkingLevel() != penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH || ce.runs[1].GetPrompt() != "try again" {
		t.Errorf("second run %v", ce.runs[1])
	}
	if !strings.Contains(out.String(), "penguin chat --resume s-new") {
		t.Errorf("no resume hint:\n%s", out.String())
	}
}

func TestChatQuitsOnDoubleInterruptAtThePrompt(t *testing.T) {
	t.Parallel()
	ce := &chatEngine{finish: make(chan struct{}), abort: make(chan struct{}, 1)}
	engine := fakeengine.Start(t, ce.fake())
	in, _ := io.Pipe()
	interrupt := make(chan os.Signal, 2)
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cli.Chat(ctx, engine, cli.ChatOptions{SessionID: "", NewSession: &penguinv1.CreateSessionRequest{}}, in, &out, interrupt)
	}()
	waitFor(t, "the banner", func() bool { return strings.Contains(out.String(), "session s-new") })
	interrupt <- os.Interrupt
	waitFor(t, "the quit hint", func() bool { return strings.Contains(out.String(), "press Ctrl-C again") })
	interrupt <- os.Interrupt
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("chat did not quit on a double Ctrl-C")
	}
}

// TestChatRunsCommandsTypedDuringATaskAfterIt types two commands while a
// task runs: both wait for the task to end and then run in order, and
// neither is sent to the model as steering.
func TestChatRunsCommandsTypedDuringATaskAfterIt(t *testing.T) {
	t.Parallel()
	ce := &chatEngine{finish: make(chan struct{}), abort: make(chan struct{}, 1)}
	engine := fakeengine.Start(t, ce.fake())
	in, typed := io.Pipe()
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cli.Chat(ctx, engine, cli.ChatOptions{NewSession: &penguinv1.CreateSessionRequest{}}, in, &out, make(chan os.Signal))
	}()
	typeLine := func(s string) {
		if _, err := io.WriteString(typed, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the banner", func() bool { return strings.Contains(out.String(), "session s-new") })
	typeLine("build it")
	waitFor(t, "the approval prompt", func() bool { return strings.Contains(out.String(), "Allow exec_command") })
	typeLine("y")
	typeLine("/thinking low")
	typeLine("/verbose")
	waitFor(t, "both commands queued", func() bool { return strings.Count(out.String(), "runs when the task ends") == 2 })
	if strings.Contains(out.String(), "thinking level set") {
		t.Fatal("a command ran while the task was running")
	}
	ce.finish <- struct{}{}
	waitFor(t, "the commands to run", func() bool {
		s := out.String()
		i, j := strings.Index(s, "thinking level set to low"), strings.Index(s, "verbose tool output: true")
		return i >= 0 && j > i
	})
	typeLine("/exit")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if len(ce.steers) != 0 {
		t.Errorf("commands were sent as steering: %q", ce.steers)
	}
}
