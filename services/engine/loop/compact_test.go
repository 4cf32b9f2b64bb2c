package loop_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/protobuf/proto"
)

func compactionEvents(msgs []*penguinv1.OmniMessage) (begins []*penguinv1.CompactionBegin, ends []*penguinv1.CompactionEnd) {
	for _, m := range msgs {
		if b := m.GetCompactionBegin(); b != nil {
			begins = append(begins, b)
		}
		if e := m.GetCompactionEnd(); e != nil {
			ends = append(ends, e)
		}
	}
	return
}

func withCompaction(r *rig, threshold int64, turns int, mode penguinv1.CompactionMode) {
	r.set.Compaction = loop.Compaction{
		ContextThreshold: threshold,
		TurnsThreshold:   turns,
		Mode:             mode,
		Prompt:           "SUMMARIZE NOW",
		RetryNote:        agentconfig.DefaultCompactionRetryNote,
		ExtractSummary:   agentstate.ExtractSummary,
		WrapSummary:      agentstate.WrapContextSummary,
	}
	r.set.Tools = []*penguinv1.ToolDefinition{{Name: "t", Description: "a tool"}}
}

func TestCompactionContextTriggerSummarize(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().Text("[summary]we ran t[/summary]").Done(),
		fake.NewReply().Text("continuing").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	// The compaction request: the old context as history, the pending tool
	// output then the prompt as new messages, the tool set unchanged.
	cr := reqs[1]
	if len(cr.GetHistory()) != 2 || len(cr.GetNewMessages()) != 2 ||
		cr.GetNewMessages()[0].GetToolCallOutput() == nil || cr.GetNewMessages()[1].GetText().GetText() != "SUMMARIZE NOW" {
		t.Fatalf("compaction request: history %v, new %v", kinds(cr.GetHistory()), cr.GetNewMessages())
	}
	if len(cr.GetTools()) != 1 || cr.GetTools()[0].GetName() != "t" {
		t.Fatalf("compaction request tools = %v", cr.GetTools())
	}
	// The next request starts a fresh context from the summary.
	next := reqs[2]
	if len(next.GetHistory()) != 0 || len(next.GetNewMessages()) != 1 ||
		!strings.Contains(next.GetNewMessages()[0].GetText().GetText(), "[context_summary]") ||
		!strings.Contains(next.GetNewMessages()[0].GetText().GetText(), "we ran t") {
		t.Fatalf("post-compaction request: history %v, new %v", kinds(next.GetHistory()), next.GetNewMessages())
	}
	begins, ends := compactionEvents(r.em.all())
	if len(begins) != 1 || begins[0].GetReason() != penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT || begins[0].GetContext() != 1000 {
		t.Fatalf("compaction_begin = %v", begins)
	}
	if len(ends) != 1 || ends[0].GetStatus() != completed {
		t.Fatalf("compaction_end = %v", ends)
	}
	if r.host.contexts != 1 {
		t.Fatalf("StartContext called %d times", r.host.contexts)
	}
	// session_meta and tool_list_ready follow the compaction_end.
	got := kinds(r.persisted())
	i := slices.Index(got, "compaction_end")
	if got[i+1] != "session_meta" || got[i+2] != "tool_list_ready" || got[i+3] != "text" {
		t.Fatalf("after compaction_end: %v", got[i:])
	}
}

func TestCompactionDiscard(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().Text("continuing").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_DISCARD)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 || len(reqs[1].GetHistory()) != 0 || !strings.Contains(reqs[1].GetNewMessages()[0].GetText().GetText(), "[context_discarded]") {
		t.Fatalf("requests = %d, second %v", len(reqs), reqs[len(reqs)-1].GetNewMessages())
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetMode() != penguinv1.CompactionMode_COMPACTION_MODE_DISCARD || ends[0].GetStatus() != completed {
		t.Fatalf("compaction_end = %v", ends)
	}
}

func TestCompactionTurnsTriggerAtTaskEnd(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Done(),
		fake.NewReply().Text("done").Done(),
		fake.NewReply().Text("[summary]short[/summary]").Done(),
	)
	withCompaction(r, 0, 2, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	res := r.run(context.Background(), "go")
	if res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	begins, ends := compactionEvents(r.em.all())
	if len(begins) != 1 || begins[0].GetReason() != penguinv1.CompactionReason_COMPACTION_REASON_TURNS || begins[0].GetTurns() != 2 {
		t.Fatalf("compaction_begin = %v", begins)
	}
	if len(ends) != 1 || ends[0].GetStatus() != completed {
		t.Fatalf("compaction_end = %v", ends)
	}
	if len(r.mctx.History) != 0 || r.mctx.Turns != 0 {
		t.Fatalf("context after compaction: %d messages, %d turns", len(r.mctx.History), r.mctx.Turns)
	}
}

func TestCompactionFailureKeepsContextAndEndsRun(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().ToolCall("x", "t", `{}`).Done(),    // calls a tool: unusable
		fake.NewReply().Text("[summary][/summary]").Done(), // empty summary: unusable
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.set.Retry.MaxRetries = 1
	res := r.run(context.Background(), "go")
	if res.Status != failed || !strings.Contains(res.Message, "compacting") {
		t.Fatalf("result = %+v", res)
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetStatus() != failed || ends[0].GetAttempt() != 2 || ends[0].GetErrorMessage() == "" {
		t.Fatalf("compaction_end = %v", ends)
	}
	// The retry carried the corrective note ahead of the prompt.
	retry := r.llm.Requests()[2].GetNewMessages()
	if len(retry) != 3 || !strings.Contains(retry[1].GetText().GetText(), "could not be used") {
		t.Fatalf("retry input = %v", retry)
	}
	// The original context stands and the tool output is carried over.
	if len(r.mctx.History) != 2 || len(res.CarryOver) != 1 || res.CarryOver[0].GetToolCallOutput() == nil {
		t.Fatalf("history %d, carry-over %v", len(r.mctx.History), res.CarryOver)
	}
	if n := r.runs("x"); n != 0 {
		t.Fatal("a tool called by the compaction reply ran")
	}
	all := r.em.all()
	if all[len(all)-1].GetAbort() == nil {
		t.Fatal("a failed mid-task compaction must close the run with an abort event")
	}
}

func TestManualCompact(t *testing.T) {
	r := newRig(t, fake.NewReply().Text("[summary]all of it[/summary]").Done())
	withCompaction(r, 0, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.mctx.History = []*penguinv1.OmniMessage{omni.UserText("hi"), omni.AssistantText("hello")}
	cr := loop.Compact(context.Background(), r.deps, r.set, r.mctx, 0, []*penguinv1.OmniMessage{omni.UserText("pending")})
	if !cr.OK() || cr.Err() != nil {
		t.Fatalf("compact = %+v", cr)
	}
	r.checkDiscipline()
	req := r.llm.Requests()[0]
	if len(req.GetHistory()) != 2 || req.GetNewMessages()[0].GetText().GetText() != "pending" {
		t.Fatalf("compaction request = %v", req)
	}
	begins, _ := compactionEvents(r.em.all())
	if begins[0].GetReason() != penguinv1.CompactionReason_COMPACTION_REASON_MANUAL {
		t.Fatalf("reason = %v", begins[0].GetReason())
	}
}

// An empty retry note sends none: the retry answers the rejected reply's
// call and repeats the prompt.
func TestCompactionRetryWithoutANote(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().Text("no markers, but a tool call").ToolCall("x", "t", `{}`).Done(),
		fake.NewReply().Text("[summary]second try[/summary]").Done(),
		fake.NewReply().Text("continuing").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.set.Compaction.RetryNote = ""
	if res := r.run(context.Background(), "go"); res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	retry := r.llm.Requests()[2].GetNewMessages()
	if len(retry) != 2 || retry[0].GetToolCallOutput().GetToolCallId() != "x" || retry[1].GetText().GetText() != "SUMMARIZE NOW" {
		t.Fatalf("retry input = %v, want the call's failed output and the prompt alone", retry)
	}
}

// The loop has no compaction texts of its own: a summarize compaction
// without them fails and says why, before any request is sent.
func TestSummarizeCompactionNeedsItsTexts(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.set.Compaction.Prompt = ""
	res := r.run(context.Background(), "go")
	if res.Status != failed {
		t.Fatalf("result = %+v", res)
	}
	if n := len(r.llm.Requests()); n != 1 {
		t.Fatalf("%d model requests, want only the turn's own", n)
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetStatus() != failed || !strings.Contains(ends[0].GetErrorMessage(), "not configured") {
		t.Fatalf("compaction_end = %v", ends)
	}
}

// requestPaired fails unless every tool call a request sends (in its
// history and its new messages) is answered by exactly one output after
// it, as providers require.
func requestPaired(t *testing.T, req *penguinv1.StreamGenerateRequest) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range append(slices.Clone(req.GetHistory()), req.GetNewMessages()...) {
		if c := m.GetToolCall(); c != nil {
			open[c.GetToolCallId()] = true
		}
		if o := m.GetToolCallOutput(); o != nil {
			if !open[o.GetToolCallId()] {
				t.Fatalf("output %s answers no open call", o.GetToolCallId())
			}
			delete(open, o.GetToolCallId())
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls without output in the request: %v", open)
	}
}

// logPaired fails unless every tool call in the log has exactly one
// output.
func logPaired(t *testing.T, msgs []*penguinv1.OmniMessage) {
	t.Helper()
	calls, outs := map[string]int{}, map[string]int{}
	for _, m := range msgs {
		if c := m.GetToolCall(); c != nil {
			calls[c.GetToolCallId()]++
		}
		if o := m.GetToolCallOutput(); o != nil {
			outs[o.GetToolCallId()]++
		}
	}
	for id := range calls {
		if outs[id] != 1 || calls[id] != 1 {
			t.Errorf("call %s: %d calls and %d outputs in the log", id, calls[id], outs[id])
		}
	}
	for id := range outs {
		if calls[id] == 0 {
			t.Errorf("output %s answers no call in the log", id)
		}
	}
}

// A rejected compaction reply stays in the retry: the retry's history is
// the first attempt's request and the rejected reply, and its new
// messages answer the reply's tool calls with failed outputs, then the
// corrective note and the prompt. Nothing is taken out, so the provider's
// prompt cache stays valid, and every call in the log has its output.
func TestCompactionRetryAppendsToTheRejectedAttempt(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().Text("let me look first").ToolCall("x1", "t", `{"a":1}`).ToolCall("x2", "t", `{}`).Done(),
		fake.NewReply().Text("[summary]ran t once[/summary]").Done(),
		fake.NewReply().Text("continuing").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	if res := r.run(context.Background(), "go"); res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	first, retry := reqs[1], reqs[2]
	for _, req := range reqs {
		requestPaired(t, req)
	}
	// The retry's history is the first attempt's history and input, then
	// the rejected reply as the model wrote it.
	want := append(slices.Clone(first.GetHistory()), first.GetNewMessages()...)
	if got := retry.GetHistory(); len(got) != len(want)+3 {
		t.Fatalf("retry history = %v, want the first attempt's %v plus the reply", kinds(got), kinds(want))
	}
	for i, m := range want {
		if !proto.Equal(retry.GetHistory()[i], m) {
			t.Fatalf("retry history[%d] = %v, want %v: the retry rewrote what the first attempt sent", i, retry.GetHistory()[i], m)
		}
	}
	tail := retry.GetHistory()[len(want):]
	if tail[0].GetText().GetText() != "let me look first" || tail[1].GetToolCall().GetToolCallId() != "x1" || tail[2].GetToolCall().GetToolCallId() != "x2" {
		t.Fatalf("the rejected reply in the retry's history = %v", tail)
	}
	// Its new messages: a failed output per call, in call order, then the
	// note and the prompt.
	in := retry.GetNewMessages()
	if len(in) != 4 {
		t.Fatalf("retry input = %v", kinds(in))
	}
	for i, id := range []string{"x1", "x2"} {
		o := in[i].GetToolCallOutput()
		if o.GetToolCallId() != id || o.GetStopReason() != failed || o.GetOutput() != loop.NotRunCompacting {
			t.Fatalf("retry input[%d] = %v, want the failed output of %s", i, in[i], id)
		}
	}
	if !strings.Contains(in[2].GetText().GetText(), "could not be used") || in[3].GetText().GetText() != "SUMMARIZE NOW" {
		t.Fatalf("retry input = %v, want the note then the prompt", in)
	}
	if r.runs("x1")+r.runs("x2") != 0 {
		t.Fatal("a tool called by the compaction reply ran")
	}
	// The log pairs every call, the compaction's included, and the
	// synthesized outputs sit inside the compaction span.
	logPaired(t, r.persisted())
	got := kinds(r.persisted())
	b, e := slices.Index(got, "compaction_begin"), slices.Index(got, "compaction_end")
	if n := strings.Count(strings.Join(got[b:e], ","), "tool_call_output"); n != 2 {
		t.Fatalf("compaction span %v holds %d outputs, want 2", got[b:e], n)
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetStatus() != completed || ends[0].GetAttempt() != 2 {
		t.Fatalf("compaction_end = %v", ends)
	}
}

// A compaction request that fails in transit commits nothing: its retry
// resends the same request. What the failed stream left (a complete call,
// a text cut off mid-way) is closed and answered in the log, so every
// segment ends and every call is paired.
func TestCompactionTransportFailureResendsTheSameRequest(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().ToolCall("x", "t", `{}`).Fail(penguinv1.StopReason_STOP_REASON_TIMEOUT, "reset"),
		fake.NewReply().PartialOnly("[summary]half").Fail(penguinv1.StopReason_STOP_REASON_MALFORMED, "cut"),
		fake.NewReply().Text("[summary]whole[/summary]").Done(),
		fake.NewReply().Text("continuing").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	if res := r.run(context.Background(), "go"); res.Status != completed {
		t.Fatalf("result = %+v", res)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i := 2; i <= 3; i++ {
		if !proto.Equal(&penguinv1.StreamGenerateRequest{History: reqs[i].GetHistory(), NewMessages: reqs[i].GetNewMessages()},
			&penguinv1.StreamGenerateRequest{History: reqs[1].GetHistory(), NewMessages: reqs[1].GetNewMessages()}) {
			t.Fatalf("request %d = %v / %v, want the first compaction request again", i, kinds(reqs[i].GetHistory()), kinds(reqs[i].GetNewMessages()))
		}
	}
	logPaired(t, r.persisted())
	var cut *penguinv1.Text
	for _, m := range r.persisted() {
		if tx := m.GetText(); tx != nil && tx.GetText() == "[summary]half" {
			cut = tx
		}
	}
	if cut == nil || cut.GetStopReason() != penguinv1.StopReason_STOP_REASON_MALFORMED {
		t.Fatalf("the cut text was not closed with the request's status: %v", cut)
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetStatus() != completed || ends[0].GetAttempt() != 3 {
		t.Fatalf("compaction_end = %v", ends)
	}
}

// A compaction request the provider refused as invalid is not sent again,
// as a turn's is not: it would be refused the same way every time.
func TestCompactionRefusedAsInvalidIsNotRetried(t *testing.T) {
	r := newRig(t,
		fake.NewReply().ToolCall("c1", "t", `{}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: failed, Message: "unknown parameter",
			Code: penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, HttpStatus: 400}),
		fake.NewReply().Text("[summary]never asked for[/summary]").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.set.Retry.MaxRetries = 3
	res := r.run(context.Background(), "go")
	if res.Status != failed {
		t.Fatalf("result = %+v", res)
	}
	if n := len(r.llm.Requests()); n != 2 {
		t.Fatalf("%d requests, want the turn's and one compaction request", n)
	}
	_, ends := compactionEvents(r.em.all())
	if len(ends) != 1 || ends[0].GetStatus() != failed || ends[0].GetAttempt() != 1 {
		t.Fatalf("compaction_end = %v", ends)
	}
}
