package cli_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/fakeengine"
)

// Keys as a terminal sends them.
const (
	keyEnter = "\r"
	keyCtrlC = "\x03"
	keyCtrlD = "\x04"
	keyUp    = "\x1b[A"
	keyLeft  = "\x1b[D"
)

// paste is text as a terminal sends it in bracketed-paste mode.
func paste(text string) string { return "\x1b[200~" + text + "\x1b[201~" }

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

// chatEngine is a fake engine for one chat: each Run asks for one approval,
// then waits until it is aborted or told to finish.
type chatEngine struct {
	mu        sync.Mutex
	creates   int
	runs      []*penguinv1.RunRequest
	steers    []string
	decisions []penguinv1.Decision
	aborts    int
	finish    chan struct{}
	abort     chan struct{}
}

func newChatEngine() *chatEngine {
	return &chatEngine{finish: make(chan struct{}, 8), abort: make(chan struct{}, 8)}
}

func (ce *chatEngine) fake() *fakeengine.Engine {
	return &fakeengine.Engine{
		CreateSessionFunc: func(_ context.Context, r *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
			ce.mu.Lock()
			ce.creates++
			ce.mu.Unlock()
			return &penguinv1.CreateSessionResponse{Session: &penguinv1.Session{SessionId: "s-new", Model: r.GetModel(), Workspace: r.GetWorkspace()}}, nil
		},
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			ce.mu.Lock()
			ce.runs = append(ce.runs, proto.Clone(r).(*penguinv1.RunRequest))
			ce.mu.Unlock()
			send := func(ev *penguinv1.RunEvent) error { return s.Send(&penguinv1.RunResponse{Event: ev}) }
			if err := send(&penguinv1.RunEvent{Sequence: 1, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{
				ToolCall: &penguinv1.ToolCall{Name: "exec_command", ToolCallId: "c1", Arguments: `{"cmd":"make"}`},
			}}}); err != nil {
				return err
			}
			select {
			case <-ce.finish:
				if err := send(msgEvent(2, omni.AssistantText("finished "+r.GetPrompt()))); err != nil {
					return err
				}
				return send(idle(3, penguinv1.StopReason_STOP_REASON_COMPLETED, ""))
			case <-ce.abort:
				if err := send(msgEvent(2, omni.Abort("you pressed Ctrl-C"))); err != nil {
					return err
				}
				return send(idle(3, penguinv1.StopReason_STOP_REASON_ABORTED, ""))
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

// read returns f's result under the engine's lock.
func read[T any](ce *chatEngine, f func() T) T {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	return f()
}

// prompts returns the prompts of the runs so far.
func (ce *chatEngine) prompts() []string {
	return read(ce, func() []string {
		var out []string
		for _, r := range ce.runs {
			out = append(out, r.GetPrompt())
		}
		return out
	})
}

// answer types key at the approval prompt and waits until the engine has
// the decision: the key and the run's next event reach the chat by
// different goroutines, so a run the test ends at once could end first and
// the key land in the input instead (seen under load).
func (ce *chatEngine) answer(t *testing.T, c *chatRun, key string) {
	t.Helper()
	n := read(ce, func() int { return len(ce.decisions) })
	c.typeKeys(key)
	eventually.True(t, "the answer to reach the engine", func() bool { return read(ce, func() int { return len(ce.decisions) }) > n })
}

// chatRun is a chat running in a goroutine, typed into through a pipe.
type chatRun struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *syncBuffer
	done chan error
}

// startChat runs cli.Chat against engine with opts.
func startChat(t *testing.T, engine penguinv1.EngineServiceClient, opts cli.ChatOptions) *chatRun {
	t.Helper()
	if opts.NewSession == nil {
		opts.NewSession = &penguinv1.CreateSessionRequest{Model: &penguinv1.ModelRef{Provider: "p", ModelId: "m"}, Workspace: "/ws"}
	}
	opts.Width, opts.Height = 100, 30
	inR, inW := io.Pipe()
	c := &chatRun{t: t, in: inW, out: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	go func() { c.done <- cli.Chat(ctx, engine, opts, inR, c.out) }()
	t.Cleanup(func() { _ = inW.Close() })
	c.waitOutput("Send a message")
	return c
}

// newChat starts a chat with opts against a new fake engine.
func newChat(t *testing.T, opts cli.ChatOptions) (*chatEngine, *chatRun) {
	t.Helper()
	ce := newChatEngine()
	return ce, startChat(t, fakeengine.Start(t, ce.fake()), opts)
}

// quit presses Ctrl-D until the chat ends and returns how it ended. The
// chat quits on Ctrl-D only when idle, and it shows a task's answer
// before it has read the idle state that follows it, so a press as soon
// as the answer shows may come too early and be ignored, as a person's
// would. A press after the end is never read: its write ends when the
// test closes the pipe.
func (c *chatRun) quit() error {
	c.t.Helper()
	var err error
	eventually.True(c.t, "the chat to end on Ctrl-D", func() bool {
		select {
		case err = <-c.done:
			return true
		default:
		}
		go func() { _, _ = c.in.Write([]byte(keyCtrlD)) }()
		return false
	})
	return err
}

// typeKeys writes keys to the chat, one write per key so each is read as
// a key press of its own.
func (c *chatRun) typeKeys(keys ...string) {
	c.t.Helper()
	for _, k := range keys {
		if _, err := c.in.Write([]byte(k)); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *chatRun) waitOutput(want string) {
	c.t.Helper()
	c.waitCount(want, 1)
}

// waitCount waits until the chat has shown want n times.
func (c *chatRun) waitCount(want string, n int) {
	c.t.Helper()
	eventually.True(c.t, fmt.Sprintf("the chat to show %q %d times", want, n), func() bool { return strings.Count(c.out.String(), want) >= n })
}

// wait waits for the chat to end and returns its error.
func (c *chatRun) wait() error {
	c.t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(eventually.Timeout):
		c.t.Fatalf("the chat did not end; it showed:\n%s", c.out.String())
		return nil
	}
}

// TestChatApprovesSteersAbortsAndQuits types into a chat as a person would:
// a prompt, an approval answer, a steering line, Ctrl-C to abort, a
// /thinking override for the next prompt, then Ctrl-D.
func TestChatApprovesSteersAbortsAndQuits(t *testing.T) {
	t.Parallel()
	ce, c := newChat(t, cli.ChatOptions{})

	c.typeKeys("make it", keyEnter)
	c.waitOutput("? allow exec_command?")
	c.waitOutput("$ make")
	ce.answer(t, c, "y")
	c.typeKeys("also this", keyEnter)
	eventually.True(t, "the steering", func() bool { return read(ce, func() int { return len(ce.steers) }) == 1 })
	c.typeKeys(keyCtrlC)
	c.waitOutput("⏹ Aborted: You pressed Ctrl-C.")

	c.typeKeys("/thinking low", keyEnter, "again", keyEnter)
	c.waitCount("? allow exec_command?", 2)
	ce.answer(t, c, "n")
	ce.finish <- struct{}{}
	c.waitOutput("finished again")
	if err := c.quit(); err != nil {
		t.Fatal(err)
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if len(ce.runs) != 2 || ce.runs[0].GetPrompt() != "make it" || ce.runs[1].GetPrompt() != "again" ||
		ce.runs[1].GetThinkingLevel() != penguinv1.ThinkingLevel_THINKING_LEVEL_LOW || ce.creates != 1 {
		t.Errorf("runs %v, creates %d", ce.runs, ce.creates)
	}
	if ce.decisions[0] != penguinv1.Decision_DECISION_ALLOW || ce.decisions[1] != penguinv1.Decision_DECISION_DENY {
		t.Errorf("decisions %v", ce.decisions)
	}
	if len(ce.steers) != 1 || ce.steers[0] != "also this" || ce.aborts != 1 {
		t.Errorf("steers %q, aborts %d", ce.steers, ce.aborts)
	}
	if !strings.Contains(c.out.String(), "Resume this chat with: penguin chat --resume s-new") {
		t.Errorf("no resume hint:\n%s", c.out.String())
	}
}

// TestChatSetsTheApprovalMode changes the approval mode with /approval:
// before the first message it goes with the first run; once the session
// exists it is the session's at once (UpdateSession) and every later run's;
// a wrong mode is refused with the choices.
func TestChatSetsTheApprovalMode(t *testing.T) {
	t.Parallel()
	ce := newChatEngine()
	var updates []*penguinv1.UpdateSessionRequest
	fake := ce.fake()
	fake.UpdateSessionFunc = func(_ context.Context, r *penguinv1.UpdateSessionRequest) (*penguinv1.UpdateSessionResponse, error) {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		updates = append(updates, proto.Clone(r).(*penguinv1.UpdateSessionRequest))
		return &penguinv1.UpdateSessionResponse{Session: &penguinv1.Session{SessionId: r.GetSessionId(), ApprovalMode: r.GetApprovalMode()}}, nil
	}
	c := startChat(t, fakeengine.Start(t, fake), cli.ChatOptions{})
	c.typeKeys("/approval sometimes", keyEnter)
	c.waitOutput("want allow-all, deny-all, read-only or always-ask")
	c.typeKeys("/approval read-only", keyEnter)
	c.waitOutput("approval mode set to read-only for the new session")
	c.typeKeys("first", keyEnter)
	c.waitOutput("? allow exec_command?")
	ce.answer(t, c, "y")
	ce.finish <- struct{}{}
	c.waitOutput("finished first")
	c.typeKeys("/approval allow-all", keyEnter)
	c.waitOutput("approval mode set to allow-all")
	c.typeKeys("/approval", keyEnter)
	c.waitOutput("approval mode: allow-all")
	c.typeKeys("second", keyEnter)
	c.waitCount("? allow exec_command?", 2)
	ce.answer(t, c, "y")
	ce.finish <- struct{}{}
	c.waitOutput("finished second")
	if err := c.quit(); err != nil {
		t.Fatal(err)
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if len(ce.runs) != 2 || ce.runs[0].GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY ||
		ce.runs[1].GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL {
		t.Errorf("runs: %v", ce.runs)
	}
	if len(updates) != 1 || updates[0].GetSessionId() != "s-new" || updates[0].GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL {
		t.Errorf("UpdateSession calls: %v", updates)
	}
}

// TestChatEditsPastesAndClears: arrows edit the line, a paste of three
// lines is one message, Ctrl-C clears a half-typed line.
func TestChatEditsPastesAndClears(t *testing.T) {
	t.Parallel()
	ce, c := newChat(t, cli.ChatOptions{})

	c.typeKeys("helo", keyLeft, "l", keyEnter)
	eventually.True(t, "the first run", func() bool { return len(ce.prompts()) == 1 })
	c.waitOutput("? allow exec_command?")
	ce.answer(t, c, "n")
	ce.finish <- struct{}{}
	c.waitOutput("finished hello")

	c.typeKeys("half-typed", keyCtrlC, paste("error: one\n  at two\n  at three"), keyEnter)
	eventually.True(t, "the second run", func() bool { return len(ce.prompts()) == 2 })
	c.waitCount("? allow exec_command?", 2)
	ce.answer(t, c, "n")
	ce.finish <- struct{}{}
	c.waitOutput("finished error")
	c.typeKeys("/exit", keyEnter)
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	got := ce.prompts()
	if got[0] != "hello" || got[1] != "error: one\n  at two\n  at three" {
		t.Errorf("prompts %q; want the edited line, then the paste whole without the cleared text", got)
	}
}

// TestChatRecallsHistoryAcrossRuns: a message sent in one chat comes back
// with Up in the next.
func TestChatRecallsHistoryAcrossRuns(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "chat_history")
	ce := newChatEngine()
	engine := fakeengine.Start(t, ce.fake())
	for _, typed := range [][]string{{"first message", keyEnter}, {keyUp, keyEnter}} {
		c := startChat(t, engine, cli.ChatOptions{HistoryFile: file})
		n := len(ce.prompts())
		c.typeKeys(typed...)
		eventually.True(t, "a run", func() bool { return len(ce.prompts()) == n+1 })
		c.waitOutput("? allow exec_command?")
		ce.answer(t, c, "n")
		ce.finish <- struct{}{}
		c.waitOutput("finished first message")
		if err := c.quit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := ce.prompts(); len(got) != 2 || got[1] != "first message" {
		t.Errorf("prompts %q; want the first recalled by Up", got)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("history file: %v, %v; want it readable by its owner only", fi, err)
	}
}

// TestChatLeavesNoEmptySession: opening a chat and quitting creates no
// session.
func TestChatLeavesNoEmptySession(t *testing.T) {
	t.Parallel()
	for _, quit := range [][]string{{keyCtrlD}, {keyCtrlC, keyCtrlC}, {"/quit", keyEnter}} {
		ce, c := newChat(t, cli.ChatOptions{})
		c.typeKeys(quit...)
		if err := c.wait(); err != nil {
			t.Fatal(err)
		}
		if n := read(ce, func() int { return ce.creates }); n != 0 || strings.Contains(c.out.String(), "Resume this chat") {
			t.Errorf("quitting with %q created %d sessions:\n%s", quit, n, c.out.String())
		}
	}
}

// TestChatRunsCommandsTypedDuringATaskAfterIt: a command typed while a task
// runs waits for its end.
func TestChatRunsCommandsTypedDuringATaskAfterIt(t *testing.T) {
	t.Parallel()
	ce, c := newChat(t, cli.ChatOptions{})
	c.typeKeys("work", keyEnter)
	c.waitOutput("? allow exec_command?")
	c.typeKeys("y", "/thinking", keyEnter)
	c.waitOutput("(/thinking runs when the task ends)")
	if strings.Contains(c.out.String(), "thinking level for the next turn") {
		t.Fatal("the command ran during the task")
	}
	ce.finish <- struct{}{}
	c.waitOutput("thinking level for the next turn")
	if err := c.quit(); err != nil {
		t.Fatal(err)
	}
}

// TestChatEndsWhenItCannotResume: a chat started to resume a session that
// does not exist ends with the error and offers no resume line.
func TestChatEndsWhenItCannotResume(t *testing.T) {
	t.Parallel()
	engine := fakeengine.Start(t, &fakeengine.Engine{})
	inR, inW := io.Pipe()
	defer inW.Close()
	out := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), eventually.Timeout)
	defer cancel()
	err := cli.Chat(ctx, engine, cli.ChatOptions{SessionID: "session-nope", Width: 100, Height: 30}, inR, out)
	if err == nil || !strings.Contains(err.Error(), "resume session-nope") || strings.Contains(out.String(), "Resume this chat") {
		t.Errorf("Chat = %v, output:\n%s", err, out.String())
	}
}

// TestChatGoalCommand: /goal:BUDGET objective sends the objective as a
// goal with its budget, once; a bad budget or a missing objective is
// refused at the prompt and starts nothing.
func TestChatGoalCommand(t *testing.T) {
	t.Parallel()
	ce, c := newChat(t, cli.ChatOptions{})
	c.typeKeys("/goal:lots fix it", keyEnter)
	c.waitOutput("is not a token count")
	c.typeKeys("/goal:2m", keyEnter)
	c.waitOutput("/goal needs an objective")
	c.typeKeys("/goal:500k make all tests pass", keyEnter)
	c.waitOutput("? allow exec_command?")
	ce.answer(t, c, "y")
	ce.finish <- struct{}{}
	c.waitOutput("finished make all tests pass")
	c.typeKeys("again", keyEnter)
	c.waitCount("? allow exec_command?", 2)
	ce.answer(t, c, "y")
	ce.finish <- struct{}{}
	c.waitOutput("finished again")
	if err := c.quit(); err != nil {
		t.Fatal(err)
	}
	runs := read(ce, func() []*penguinv1.RunRequest { return ce.runs })
	if len(runs) != 2 || runs[0].GetPrompt() != "make all tests pass" || runs[0].GetGoal().GetBudget() != 500_000 || runs[1].GetGoal() != nil {
		t.Fatalf("runs: %v", runs)
	}
}
