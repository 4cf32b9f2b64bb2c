package loop_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc"
)

const (
	completed = penguinv1.StopReason_STOP_REASON_COMPLETED
	aborted   = penguinv1.StopReason_STOP_REASON_ABORTED
	failed    = penguinv1.StopReason_STOP_REASON_FAILED
	timeout   = penguinv1.StopReason_STOP_REASON_TIMEOUT
	malformed = penguinv1.StopReason_STOP_REASON_MALFORMED
	auth      = penguinv1.StopReason_STOP_REASON_AUTH
)

func TestMultiTurnToolUse(t *testing.T) {
	r := newRig(t,
		fake.NewReply().Text("Let me look.").ToolCall("c1", "exec_command", `{"cmd":"ls"}`).Done(),
		fake.NewReply().Text("Done: one file.").Done(),
	)
	res := r.run(context.Background(), "list files")
	if res.Status != completed || res.Err != nil {
		t.Fatalf("result = %+v", res)
	}
	got := kinds(r.persisted())
	want := []string{
		"request_begin", "text", "tool_call", "approval_decision", "tool_call_output", "token_usage", "request_end",
		"request_begin", "text", "token_usage", "request_end",
	}
	// The tool output may land before or after the end of the request.
	if !sameMultiset(got, want) || got[0] != "request_begin" || got[len(got)-1] != "request_end" {
		t.Fatalf("persisted kinds = %v", got)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	// The llm service is stateless: the second request carries the first
	// turn as history and the tool output as the new message.
	if h := kinds(reqs[1].GetHistory()); !slices.Equal(h, []string{"text", "text", "tool_call"}) {
		t.Fatalf("second request history = %v", h)
	}
	nm := reqs[1].GetNewMessages()
	if len(nm) != 1 || nm[0].GetToolCallOutput().GetOutput() != `exec_command: {"cmd":"ls"}` {
		t.Fatalf("second request new messages = %v", nm)
	}
	if r.mctx.Turns != 2 || len(r.mctx.History) != 5 {
		t.Fatalf("context: %d turns, %d messages", r.mctx.Turns, len(r.mctx.History))
	}
	if u := r.mctx.Usage.GetTotal(); u != 200 {
		t.Fatalf("session usage total = %d, want 200", u)
	}
}

// TestCompletedOutcomeNoteReachesRequestEnd checks that a completed
// outcome's message, a note such as the output token limit's, goes out
// with the request's end, and that the answer it qualifies still commits.
func TestCompletedOutcomeNoteReachesRequestEnd(t *testing.T) {
	const note = "the model stopped at the output token limit (stop_reason max_tokens)"
	r := newRig(t,
		fake.NewReply().Text("The answer goes on and").Usage(100).Outcome(&penguinv1.LLMOutcome{Status: completed, Message: note}),
	)
	res := r.run(context.Background(), "explain")
	if res.Status != completed || res.Err != nil {
		t.Fatalf("result = %+v", res)
	}
	ends := requestEnds(r.persisted())
	if len(ends) != 1 || ends[0].GetStatus() != completed || ends[0].GetErrorMessage() != note {
		t.Fatalf("request_ends = %v, want one completed with %q", ends, note)
	}
	if r.mctx.Turns != 1 || len(r.mctx.History) != 2 {
		t.Fatalf("context: %d turns, %d messages; the cut answer must commit", r.mctx.Turns, len(r.mctx.History))
	}
}

func sameMultiset(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestParallelToolCallsReturnInCallOrder(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("a", "slow", `{}`).ToolCall("b", "fast", `{}`).Done(),
		fake.NewReply().Text("ok").Done(),
	)
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		id := req.GetToolCall().GetToolCallId()
		if id == "a" {
			// a finishes only once the engine has recorded b's output.
			eventually.True(t, "b's output", func() bool { return len(outputs(r.em.all())) == 1 })
		}
		return fake.Output(s, id, "out-"+id, 0)
	}
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	// Stream order is completion order: b first.
	var streamed []string
	for _, o := range outputs(r.em.all()) {
		streamed = append(streamed, o.GetToolCallId())
	}
	if !slices.Equal(streamed, []string{"b", "a"}) {
		t.Fatalf("stream order = %v, want [b a]", streamed)
	}
	// Context order is call order: a first.
	var sent []string
	for _, m := range r.llm.Requests()[1].GetNewMessages() {
		sent = append(sent, m.GetToolCallOutput().GetToolCallId())
	}
	if !slices.Equal(sent, []string{"a", "b"}) {
		t.Fatalf("next request order = %v, want [a b]", sent)
	}
}

func TestApprovalDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision penguinv1.Decision
		output   string
	}{
		{"deny", penguinv1.Decision_DECISION_DENY, loop.DeniedByUser},
		{"forbidden", penguinv1.Decision_DECISION_FORBIDDEN, loop.DeniedByPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t,
				fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"rm -rf /"}`).Done(),
				fake.NewReply().Text("ok").Done(),
			)
			r.deps.Approver = approver(func(context.Context, *penguinv1.ToolCall) penguinv1.Decision { return tc.decision })
			res := r.run(context.Background(), "go")
			if res.Status != completed {
				t.Fatalf("result = %+v", res)
			}
			if n := r.runs("c1"); n != 0 {
				t.Fatalf("denied call ran %d times", n)
			}
			outs := outputs(r.em.all())
			if len(outs) != 1 || outs[0].GetOutput() != tc.output || outs[0].GetStopReason() != aborted {
				t.Fatalf("outputs = %v", outs)
			}
			ds := find(r.em.all(), (*penguinv1.OmniMessage).GetApprovalDecision, func(v *penguinv1.ApprovalDecision) bool { return v != nil })
			if len(ds) != 1 || ds[0].GetDecision() != tc.decision {
				t.Fatalf("decisions = %v", ds)
			}
		})
	}
}

func TestApprovalsAreSequentialAndBeforeOutputs(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("a", "t", `{}`).ToolCall("b", "t", `{}`).Done(),
		fake.NewReply().Text("ok").Done(),
	)
	release := make(chan struct{})
	var aReturned, overlap, aAsked atomic.Bool
	r.deps.Approver = approver(func(ctx context.Context, call *penguinv1.ToolCall) penguinv1.Decision {
		if call.GetToolCallId() == "a" {
			aAsked.Store(true)
			<-release
			aReturned.Store(true)
		} else if !aReturned.Load() {
			overlap.Store(true)
		}
		return penguinv1.Decision_DECISION_ALLOW
	})
	done := make(chan loop.Result)
	go func() { done <- r.run(context.Background(), "go") }()
	// The model stream ends (request_end) while a's approval is pending.
	eventually.True(t, "request_end and a's question", func() bool { return len(requestEnds(r.em.all())) == 1 && aAsked.Load() })
	close(release)
	res := <-done
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	if overlap.Load() {
		t.Fatal("b was asked while a's approval was pending")
	}
	// Each decision precedes its output.
	seen := map[string]bool{}
	for _, m := range r.em.all() {
		if d := m.GetApprovalDecision(); d != nil {
			seen[d.GetToolCallId()] = true
		}
		if o := m.GetToolCallOutput(); o != nil && !seen[o.GetToolCallId()] {
			t.Fatalf("output of %s before its decision", o.GetToolCallId())
		}
	}
}

func TestReconnectLadder(t *testing.T) {
	r := newRig(t,
		fake.NewReply().PartialOnly("first try").Fail(timeout, "connection reset"),
		fake.NewReply().Fail(malformed, "bad json"),
		fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: failed, Message: "quota", Code: penguinv1.FailureCode_FAILURE_CODE_QUOTA}),
		fake.NewReply().Text("finally").Done(),
	)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	ends := requestEnds(r.em.all())
	type end struct {
		st      penguinv1.StopReason
		attempt int32
		retry   int64
	}
	var got []end
	for _, e := range ends {
		got = append(got, end{e.GetStatus(), e.GetAttempt(), e.GetRetryInMs()})
	}
	want := []end{{timeout, 1, 1}, {malformed, 2, 2}, {failed, 3, 4}, {completed, 4, 0}}
	if !slices.Equal(got, want) {
		t.Fatalf("request_ends = %+v, want %+v", got, want)
	}
	if ends[0].GetErrorMessage() != "connection reset" {
		t.Fatalf("error message = %q", ends[0].GetErrorMessage())
	}
	reqs := r.llm.Requests()
	retried := reqs[1].GetNewMessages()
	if len(retried) != 2 || !strings.Contains(retried[1].GetText().GetText(), "[turn_retried]") || !strings.Contains(retried[1].GetText().GetText(), "first try") {
		t.Fatalf("retry input = %v", retried)
	}
	if retried[1].GetText().GetSender() != penguinv1.Sender_SENDER_HARNESS {
		t.Fatalf("retry block sender = %v", retried[1].GetText().GetSender())
	}
	// The block is model-visible only: never recorded.
	for _, txt := range texts(r.em.all()) {
		if strings.Contains(txt, "[turn_retried]") {
			t.Fatal("the [turn_retried] block was emitted")
		}
	}
}

func TestRetryAfterWithinCapReplacesBackoff(t *testing.T) {
	r := newRig(t,
		fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: timeout, RetryAfterMs: 5}),
		fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: timeout, RetryAfterMs: 60000}),
		fake.NewReply().Text("ok").Done(),
	)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	ends := requestEnds(r.em.all())
	if ends[0].GetRetryInMs() != 5 || ends[1].GetRetryInMs() != 2 {
		t.Fatalf("retry_in_ms = %d, %d; want 5 (Retry-After) then 2 (backoff, Retry-After over the cap)", ends[0].GetRetryInMs(), ends[1].GetRetryInMs())
	}
}

func TestRetryBudgetExhausted(t *testing.T) {
	r := newRig(t,
		fake.NewReply().Fail(timeout, "t1"),
		fake.NewReply().Fail(timeout, "t2"),
		fake.NewReply().Fail(timeout, "t3"),
	)
	r.set.Retry.MaxRetries = 2
	res := r.run(context.Background(), "go")
	if res.Status != timeout || !strings.Contains(res.Message, "t3") {
		t.Fatalf("result = %+v", res)
	}
	ends := requestEnds(r.em.all())
	if len(ends) != 3 || ends[2].GetRetryInMs() != 0 || ends[2].GetAttempt() != 3 {
		t.Fatalf("request_ends = %v", ends)
	}
	// The prompt was never committed: it is carried over.
	if len(res.CarryOver) == 0 || res.CarryOver[0].GetText().GetText() != "go" {
		t.Fatalf("carry-over = %v", res.CarryOver)
	}
}

func TestAuthAndPermanentStopAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply *fake.Reply
		want  penguinv1.StopReason
	}{
		{"auth", fake.NewReply().Fail(auth, "invalid api key"), auth},
		{"permanent", fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: failed, Message: "no fast tier", Permanent: true}), failed},
		{"refused as invalid", fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: failed, Message: "provider answered 404 Not Found: model_not_found",
			Code: penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, HttpStatus: 404}), failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.reply, fake.NewReply().Text("must not be asked").Done())
			res := r.run(context.Background(), "go")
			if res.Status != tc.want || res.Message == "" {
				t.Fatalf("result = %+v", res)
			}
			if n := len(r.llm.Requests()); n != 1 {
				t.Fatalf("%d requests, want 1 (no retry)", n)
			}
			if e := requestEnds(r.em.all()); len(e) != 1 || e[0].GetRetryInMs() != 0 {
				t.Fatalf("request_ends = %v", e)
			}
		})
	}
}

func TestToolsNeverRunTwiceAcrossRetries(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"touch x"}`).Fail(timeout, "dropped"),
		fake.NewReply().Text("it is done").Done(),
	)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	if n := r.runs("c1"); n != 1 {
		t.Fatalf("c1 ran %d times", n)
	}
	block := r.llm.Requests()[1].GetNewMessages()[1].GetText().GetText()
	if !strings.Contains(block, "tool_call exec_command (id c1)") || !strings.Contains(block, `exec_command: {"cmd":"touch x"}`) {
		t.Fatalf("retry block does not report the tool run:\n%s", block)
	}
	// The failed attempt's call never joins the history.
	for _, m := range r.mctx.History {
		if m.GetToolCall() != nil {
			t.Fatal("a tool call of a failed attempt reached the history")
		}
	}
}

func TestRetryNowSkipsTheWait(t *testing.T) {
	r := newRig(t,
		fake.NewReply().Fail(timeout, "t1"),
		fake.NewReply().Text("ok").Done(),
	)
	r.set.Retry = loop.Retry{MaxRetries: 1, Base: time.Hour, Cap: time.Hour}
	r.host.retryNow <- struct{}{}
	start := time.Now()
	res := r.run(context.Background(), "go")
	if res.Status != completed || time.Since(start) > 10*time.Second {
		t.Fatalf("result = %+v after %v", res, time.Since(start))
	}
	if e := requestEnds(r.em.all()); e[0].GetRetryInMs() != time.Hour.Milliseconds() {
		t.Fatalf("retry_in_ms = %d", e[0].GetRetryInMs())
	}
}

func TestAbortCaseBModelOutputIncomplete(t *testing.T) {
	started := make(chan struct{})
	reply := fake.NewReply().PartialOnly("half an ans").Hook(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	r := newRig(t, reply)
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-started
		eventually.True(t, "the partial text", func() bool {
			for _, m := range r.em.all() {
				if m.GetPartialText().GetText() == "ans" {
					return true
				}
			}
			return false
		})
		cancel(&loop.Aborted{Reason: "user pressed ctrl-c"})
	}()
	res := r.run(ctx, "go")
	if res.Status != aborted || res.Message != "user pressed ctrl-c" {
		t.Fatalf("result = %+v", res)
	}
	all := r.em.all()
	last := all[len(all)-1]
	if last.GetAbort().GetReason() != "user pressed ctrl-c" {
		t.Fatalf("last message = %v, want the abort event", last)
	}
	if e := requestEnds(all); len(e) != 1 || e[0].GetStatus() != aborted {
		t.Fatalf("request_ends = %v", e)
	}
	if len(res.CarryOver) != 2 || res.CarryOver[0].GetText().GetText() != "go" ||
		!strings.Contains(res.CarryOver[1].GetText().GetText(), "[turn_aborted]") ||
		!strings.Contains(res.CarryOver[1].GetText().GetText(), "half an ans") {
		t.Fatalf("carry-over = %v", res.CarryOver)
	}
	if res.Note == "" || strings.Contains(strings.Join(texts(all), "\n"), "[turn_aborted]") {
		t.Fatal("the [turn_aborted] note must be carried, not emitted")
	}
}

func TestAbortCaseAModelOutputComplete(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("fast", "t", `{}`).ToolCall("slow", "t", `{}`).Done(),
	)
	slowStarted := make(chan struct{})
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		if req.GetToolCall().GetToolCallId() == "slow" {
			close(slowStarted)
			<-s.Context().Done()
			return s.Context().Err()
		}
		return fake.Echo(req, s)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-slowStarted
		// Case A is an abort after the model's answer ended: wait for its
		// request_end as well as the fast tool's output, since tools start
		// while the answer still streams.
		eventually.True(t, "fast output and the answer's end", func() bool {
			all := r.em.all()
			return len(outputs(all)) == 1 && len(requestEnds(all)) == 1
		})
		cancel(&loop.Aborted{})
	}()
	res := r.run(ctx, "go")
	if res.Status != aborted || res.Note != "" {
		t.Fatalf("result = %+v", res)
	}
	if len(res.CarryOver) != 2 {
		t.Fatalf("carry-over = %v", res.CarryOver)
	}
	fast, slow := res.CarryOver[0].GetToolCallOutput(), res.CarryOver[1].GetToolCallOutput()
	if fast.GetToolCallId() != "fast" || fast.GetOutput() != "t: {}" {
		t.Fatalf("finished result = %v", fast)
	}
	if slow.GetToolCallId() != "slow" || slow.GetOutput() != loop.Interrupted || slow.GetStopReason() != aborted {
		t.Fatalf("unfinished result = %v", slow)
	}
	// The placeholder is carry-over only: never recorded.
	for _, o := range outputs(r.em.all()) {
		if o.GetToolCallId() == "slow" {
			t.Fatal("an output of the aborted call was emitted")
		}
	}
	all := r.em.all()
	if all[len(all)-1].GetAbort() == nil {
		t.Fatal("the abort event is not the last message")
	}
	// The turn was committed: its calls are in the history.
	if n := len(r.mctx.History); n != 3 {
		t.Fatalf("history has %d messages, want 3", n)
	}
}

func TestAbortDuringRetryWait(t *testing.T) {
	r := newRig(t, fake.NewReply().PartialOnly("abc").Fail(timeout, "t"))
	r.set.Retry = loop.Retry{MaxRetries: 3, Base: time.Hour, Cap: time.Hour}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		eventually.True(t, "retry wait", func() bool {
			r.host.mu.Lock()
			defer r.host.mu.Unlock()
			return len(r.host.retryIns) > 0
		})
		cancel(&loop.Aborted{Reason: "give up"})
	}()
	res := r.run(ctx, "go")
	if res.Status != aborted || !strings.Contains(res.Note, "abc") {
		t.Fatalf("result = %+v", res)
	}
}

func TestSteeringDeliveredAtNextInput(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Done(),
		fake.NewReply().Text("adjusted").Done(),
		fake.NewReply().Text("and the last one").Done(),
	)
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		r.host.steer("use python instead")
		return fake.Echo(req, s)
	}
	// Steering that arrives on the final turn keeps the task going.
	r.em.on = func(m *penguinv1.OmniMessage) {
		if m.GetText().GetText() == "adjusted" {
			r.host.steer("one more thing")
		}
	}
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	nm := reqs[1].GetNewMessages()
	if len(nm) != 2 || nm[0].GetToolCallOutput() == nil || nm[1].GetText().GetText() != "[user_steering]\nuse python instead\n[/user_steering]" {
		t.Fatalf("second request input = %v", nm)
	}
	if nm := reqs[2].GetNewMessages(); len(nm) != 1 || !strings.Contains(nm[0].GetText().GetText(), "one more thing") {
		t.Fatalf("third request input = %v", nm)
	}
	// Steering is real user input: recorded like a prompt.
	if n := len(find(r.persisted(), (*penguinv1.OmniMessage).GetText, func(v *penguinv1.Text) bool {
		return strings.HasPrefix(v.GetText(), "[user_steering]")
	})); n != 2 {
		t.Fatalf("%d steering messages recorded, want 2", n)
	}
}

func TestMaxTurns(t *testing.T) {
	r := newRig(t, fake.NewReply().ToolCall("c1", "t", `{}`).Done())
	r.set.MaxTurns = 1
	res := r.run(context.Background(), "go")
	if res.Status != completed || !strings.Contains(res.Message, "max_turns") {
		t.Fatalf("result = %+v", res)
	}
	if len(res.CarryOver) != 1 || res.CarryOver[0].GetToolCallOutput().GetToolCallId() != "c1" {
		t.Fatalf("carry-over = %v", res.CarryOver)
	}
}

func TestStoreFailureStopsTheRun(t *testing.T) {
	r := newRig(t, fake.NewReply().Text("hello").Done())
	r.em.on = func(m *penguinv1.OmniMessage) {
		if m.GetRequestBegin() != nil {
			r.em.mu.Lock()
			r.em.fail = errStore
			r.em.mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := loop.Run(ctx, r.deps, r.set, r.mctx, nil)
	if res.Err == nil || res.Status != failed {
		t.Fatalf("result = %+v", res)
	}
}
