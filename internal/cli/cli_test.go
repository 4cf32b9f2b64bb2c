package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/fakeengine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	start = penguinv1.StreamEventType_STREAM_EVENT_TYPE_START
	delta = penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA
	stop  = penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
)

func msgEvent(seq int64, m *penguinv1.OmniMessage) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Sequence: seq, Event: &penguinv1.RunEvent_Message{Message: m}}
}

func idle(seq int64, s penguinv1.StopReason, msg string) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Sequence: seq, Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{
		State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: s, Message: msg,
	}}}
}

// turn is a typical task: thinking, text, a tool call with streamed output,
// a retried request, usage, the end.
func turn() []*penguinv1.RunEvent {
	ms := []*penguinv1.OmniMessage{
		omni.PartialThinking(start, ""), omni.PartialThinking(delta, "pondering"), omni.PartialThinking(stop, ""),
		omni.Thinking("pondering", nil),
		omni.PartialText(start, ""), omni.PartialText(delta, "Running "), omni.PartialText(delta, "the tests."), omni.PartialText(stop, ""),
		omni.AssistantText("Running the tests."),
		omni.ToolCall("c1", "exec_command", `{"cmd":"go test"}`),
		omni.PartialToolCallOutput(start, "c1", ""), omni.PartialToolCallOutput(delta, "c1", "ok  pkg\n"), omni.PartialToolCallOutput(stop, "c1", ""),
		omni.ToolCallOutput("c1", "ok  pkg\n", penguinv1.StopReason_STOP_REASON_COMPLETED),
		omni.RequestEnd(penguinv1.StopReason_STOP_REASON_TIMEOUT, "HTTP 503", 1, 2000),
		omni.TokenUsage(&penguinv1.TokenCounts{Total: 1200, Output: 80, CacheRead: 1000}, &penguinv1.TokenCounts{Total: 1200}),
		omni.WithOrigin(omni.AssistantText("child done"), "session-child-1234abcd"),
	}
	evs := make([]*penguinv1.RunEvent, 0, len(ms)+1)
	for i, m := range ms {
		evs = append(evs, msgEvent(int64(i+1), m))
	}
	return append(evs, idle(int64(len(ms)+1), penguinv1.StopReason_STOP_REASON_COMPLETED, ""))
}

func TestRendererShowsATaskToAPerson(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{})
	for _, ev := range turn() {
		r.Event(ev)
	}
	got := out.String()
	for _, want := range []string{
		"✻ thinking\n  ┊ pondering\n",
		"Running the tests.\n",
		"⏺ exec_command $ go test\n",
		"  │ ok  pkg\n",
		"retrying in 2s (attempt 2)",
		"HTTP 503",
		"[subagent 1234abcd] child done",
		"tokens: 1.2k this task, 1.2k this session (80 output, 1k cache read) · context 1.2k",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "Running the tests.") != 1 {
		t.Errorf("streamed text printed twice:\n%s", got)
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("ANSI styles written without color:\n%q", got)
	}
}

// TestRendererPrintsCompletedRequestNote checks that a completed request
// prints nothing, unless it carries a note, which is one line and not a
// failure.
func TestRendererPrintsCompletedRequestNote(t *testing.T) {
	t.Parallel()
	const note = "the model stopped at the output token limit (finish_reason length)"
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{})
	r.Event(msgEvent(1, omni.RequestEnd(penguinv1.StopReason_STOP_REASON_COMPLETED, "", 0, 0)))
	if out.Len() != 0 {
		t.Fatalf("a completed request without a note printed %q", out.String())
	}
	r.Event(msgEvent(2, omni.RequestEnd(penguinv1.StopReason_STOP_REASON_COMPLETED, note, 0, 0)))
	if got := out.String(); got != "note: "+note+"\n" {
		t.Fatalf("output = %q, want the note on one line", got)
	}
}

func TestRendererJSONLinesAreOnePerEvent(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{JSON: true})
	evs := turn()
	for _, ev := range evs {
		r.Event(ev)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != len(evs) {
		t.Fatalf("%d lines for %d events", len(lines), len(evs))
	}
	if !strings.Contains(lines[0], `"partial_thinking"`) || !strings.Contains(lines[len(lines)-1], `"SESSION_STATE_IDLE"`) {
		t.Fatalf("unexpected JSON lines: %s … %s", lines[0], lines[len(lines)-1])
	}
}

func TestRendererCollapsesLongToolOutput(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{Collapse: true})
	var body strings.Builder
	for i := range 20 {
		body.WriteString("line " + string(rune('a'+i)) + "\n")
	}
	r.Event(msgEvent(1, omni.PartialToolCallOutput(start, "c", "")))
	r.Event(msgEvent(2, omni.PartialToolCallOutput(delta, "c", body.String())))
	r.Event(msgEvent(3, omni.PartialToolCallOutput(stop, "c", "")))
	r.Event(msgEvent(4, omni.ToolCallOutput("c", body.String(), 0)))
	got := out.String()
	for _, want := range []string{"line a", "line d", "… (+12 lines, /verbose for full output)", "line q", "line t"} {
		if !strings.Contains(got, want) {
			t.Errorf("collapsed output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line h") {
		t.Errorf("collapsed output shows the middle:\n%s", got)
	}
}

// TestRunTaskAnswersApprovalsAndReattaches drives RunTask against a fake
// engine whose Run stream asks for an approval and then drops; RunTask must
// answer the approval, attach again from the last sequence, no sooner
// than ReattachPause after the drop, and render every event exactly once.
func TestRunTaskAnswersApprovalsAndReattaches(t *testing.T) {
	t.Parallel()
	approved := make(chan *penguinv1.ApproveRequest, 1)
	evs := turn()
	ask := &penguinv1.RunEvent{Sequence: 3, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{
		ToolCall: &penguinv1.ToolCall{Name: "exec_command", Arguments: `{"cmd":"go test"}`, ToolCallId: "c1"},
	}}}
	evs[2] = ask
	var mu sync.Mutex
	var attachedAfter int64
	var dropped, attached time.Time
	fake := &fakeengine.Engine{
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			for _, ev := range evs[:5] {
				if err := s.Send(&penguinv1.RunResponse{Event: ev}); err != nil {
					return err
				}
				if ev == ask {
					select {
					case <-approved:
					case <-time.After(5 * time.Second):
						return status.Error(codes.DeadlineExceeded, "no approval")
					}
				}
			}
			mu.Lock()
			dropped = time.Now()
			mu.Unlock()
			return status.Error(codes.Unavailable, "connection reset")
		},
		AttachFunc: func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
			mu.Lock()
			attachedAfter, attached = r.GetAfterSequence(), time.Now()
			mu.Unlock()
			for _, ev := range evs[r.GetAfterSequence():] {
				if err := s.Send(&penguinv1.AttachResponse{Event: ev}); err != nil {
					return err
				}
			}
			return nil
		},
		ApproveFunc: func(_ context.Context, r *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
			if r.GetToolCallId() != "c1" || r.GetDecision() != penguinv1.Decision_DECISION_ALLOW {
				return nil, status.Errorf(codes.InvalidArgument, "unexpected approval %v", r)
			}
			approved <- r
			return &penguinv1.ApproveResponse{}, nil
		},
	}
	engine := fakeengine.Start(t, fake)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := cli.RunTask(ctx, engine, cli.TaskOptions{
		SessionID: "s", Prompt: "test it", Reattach: 2,
		Approver: &cli.LineApprover{In: bufio.NewReader(strings.NewReader("\n")), Out: &out},
	}, cli.NewRenderer(&out, cli.RendererOptions{}))
	if err != nil || code != cli.ExitCompleted {
		t.Fatalf("code %d, err %v\n%s", code, err, out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if attachedAfter != 5 {
		t.Fatalf("attached after %d, want 5", attachedAfter)
	}
	if gap := attached.Sub(dropped); gap < cli.ReattachPause {
		t.Fatalf("attached again %v after the drop, want at least %v", gap, cli.ReattachPause)
	}
	if got := out.String(); strings.Count(got, "ok  pkg") != 1 || !strings.Contains(got, "? allow exec_command?\n  $ go test\nAllow? [Y/n] ") {
		t.Fatalf("output:\n%s", got)
	}
}

// TestRunTaskAbortsOnCancel cancels the context mid-task: the engine is
// told to abort, the abort is rendered, and the exit status says aborted.
func TestRunTaskAbortsOnCancel(t *testing.T) {
	t.Parallel()
	aborted := make(chan struct{})
	var once sync.Once
	fake := &fakeengine.Engine{
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			if err := s.Send(&penguinv1.RunResponse{Event: msgEvent(1, omni.PartialText(start, ""))}); err != nil {
				return err
			}
			select {
			case <-aborted:
			case <-time.After(5 * time.Second):
				return status.Error(codes.DeadlineExceeded, "never aborted")
			}
			for _, ev := range []*penguinv1.RunEvent{msgEvent(2, omni.Abort("interrupted")), idle(3, penguinv1.StopReason_STOP_REASON_ABORTED, "aborted by the user")} {
				if err := s.Send(&penguinv1.RunResponse{Event: ev}); err != nil {
					return err
				}
			}
			return nil
		},
		AbortFunc: func(context.Context, *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
			once.Do(func() { close(aborted) })
			return &penguinv1.AbortResponse{Aborted: true}, nil
		},
	}
	engine := fakeengine.Start(t, fake)
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	code, err := cli.RunTask(ctx, engine, cli.TaskOptions{SessionID: "s", Prompt: "long job"}, cli.NewRenderer(&out, cli.RendererOptions{}))
	if err != nil || code != cli.ExitAborted {
		t.Fatalf("code %d, err %v\n%s", code, err, out.String())
	}
	if !strings.Contains(out.String(), "⏹ Aborted") {
		t.Fatalf("abort not shown:\n%s", out.String())
	}
}

func TestRunTaskReportsRefusals(t *testing.T) {
	t.Parallel()
	fake := &fakeengine.Engine{RunFunc: func(*penguinv1.RunRequest, grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
		return status.Error(codes.FailedPrecondition, "session s is running a task")
	}}
	engine := fakeengine.Start(t, fake)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code, err := cli.RunTask(ctx, engine, cli.TaskOptions{SessionID: "s", Prompt: "x"}, cli.NewRenderer(&bytes.Buffer{}, cli.RendererOptions{}))
	if code != cli.ExitFailed || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("code %d, err %v", code, err)
	}
}

func TestParsers(t *testing.T) {
	t.Parallel()
	if m, err := cli.ParseApprovalMode("read-only"); err != nil || m != penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY {
		t.Fatalf("read-only: %v %v", m, err)
	}
	if _, err := cli.ParseApprovalMode("yolo"); err == nil {
		t.Fatal("unknown approval mode accepted")
	}
	if l, err := cli.ParseThinkingLevel("xhigh"); err != nil || l != penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH {
		t.Fatalf("xhigh: %v %v", l, err)
	}
	if _, err := cli.ParseThinkingLevel("unspecified"); err == nil {
		t.Fatal("unspecified accepted as a level")
	}
}
