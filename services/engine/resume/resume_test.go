package resume_test

import (
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/resume"
	"github.com/penguin-agent/penguin/services/engine/store"
)

const (
	completed = penguinv1.StopReason_STOP_REASON_COMPLETED
	timeout   = penguinv1.StopReason_STOP_REASON_TIMEOUT
)

func meta(id string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{SessionId: id}}}
}

func usage(total int64) *penguinv1.OmniMessage {
	return omni.TokenUsage(&penguinv1.TokenCounts{Total: total * 10}, &penguinv1.TokenCounts{Total: total})
}

func log(msgs ...*penguinv1.OmniMessage) []store.Event {
	out := make([]store.Event, len(msgs))
	for i, m := range msgs {
		out[i] = store.Event{Sequence: int64(i + 1), Message: m}
	}
	return out
}

func kinds(msgs []*penguinv1.OmniMessage) string {
	var out []string
	for _, m := range msgs {
		out = append(out, store.PayloadKind(m))
	}
	return strings.Join(out, ",")
}

func TestCommittedTurnsOnly(t *testing.T) {
	s := resume.Rebuild(log(
		meta("s"),
		omni.UserText("list"),
		omni.RequestBegin(),
		omni.ToolCall("a", "t", "{}"),
		omni.ApprovalDecision("a", penguinv1.Decision_DECISION_ALLOW),
		omni.ToolCall("b", "t", "{}"),
		omni.ToolCallOutput("b", "out-b", 0), // b finished first
		usage(100),
		omni.RequestEnd(completed, "", 0, 0),
		omni.ToolCallOutput("a", "out-a", 0), // a finished after request_end
		// The second request fails twice and then completes.
		omni.RequestBegin(),
		omni.ToolCall("x", "t", "{}"),
		omni.ToolCallOutput("x", "out-x", 0),
		omni.RequestEnd(timeout, "reset", 1, 2000),
		omni.RequestBegin(),
		omni.AssistantText("done"),
		usage(300),
		omni.RequestEnd(completed, "", 2, 0),
	))
	if got := kinds(s.History); got != "text,tool_call,tool_call,tool_call_output,tool_call_output,text" {
		t.Fatalf("history = %s", got)
	}
	// Outputs rejoin in call order; the failed attempt's call is gone.
	if s.History[3].GetToolCallOutput().GetToolCallId() != "a" || s.History[4].GetToolCallOutput().GetToolCallId() != "b" {
		t.Fatal("outputs are not in call order")
	}
	if s.Turns != 2 || s.LastTotal != 300 || s.Usage.GetTotal() != 3000 || len(s.Pending) != 0 {
		t.Fatalf("turns %d, last total %d, usage %v, pending %d", s.Turns, s.LastTotal, s.Usage, len(s.Pending))
	}
}

func TestPendingInputAndPlaceholders(t *testing.T) {
	s := resume.Rebuild(log(
		meta("s"),
		omni.UserText("go"),
		omni.RequestBegin(),
		omni.ToolCall("a", "t", "{}"),
		omni.ToolCall("b", "t", "{}"),
		omni.RequestEnd(completed, "", 0, 0),
		omni.ToolCallOutput("b", "out-b", 0),
		// Aborted: a never finished. Then the next prompt, whose request
		// died with the engine (a torn tail: no request_end).
		omni.Abort(""),
		omni.UserText("next"),
		omni.RequestBegin(),
		omni.AssistantText("half"),
	))
	if got := kinds(s.Pending); got != "tool_call_output,tool_call_output,text" {
		t.Fatalf("pending = %s", got)
	}
	if o := s.Pending[0].GetToolCallOutput(); o.GetToolCallId() != "a" || o.GetOutput() != loop.Interrupted {
		t.Fatalf("placeholder = %v", o)
	}
	if s.Pending[1].GetToolCallOutput().GetOutput() != "out-b" || s.Pending[2].GetText().GetText() != "next" {
		t.Fatalf("pending = %v", s.Pending)
	}
	if kinds(s.History) != "text,tool_call,tool_call" {
		t.Fatalf("history = %s", kinds(s.History))
	}
}

func TestCompaction(t *testing.T) {
	begin := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{Reason: penguinv1.CompactionReason_COMPACTION_REASON_MANUAL}}}
	end := func(st penguinv1.StopReason) *penguinv1.OmniMessage {
		return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{Status: st}}}
	}
	turn := []*penguinv1.OmniMessage{meta("s"), omni.UserText("hi"), omni.RequestBegin(), omni.AssistantText("hello"), omni.RequestEnd(completed, "", 0, 0)}

	// A completed compaction starts a fresh context from the summary.
	s := resume.Rebuild(log(append(turn, begin, omni.AssistantText("[summary]S[/summary]"), end(completed),
		meta("s"), omni.ToolListReady(nil), loop.HarnessText("[context_summary]S[/context_summary]"))...))
	if len(s.History) != 0 || kinds(s.Pending) != "text" || s.MetaSequence != 9 || s.OpenCompaction != nil {
		t.Fatalf("after compaction: history %s, pending %s, meta at %d", kinds(s.History), kinds(s.Pending), s.MetaSequence)
	}
	// A failed one leaves the context as it was; its messages are ignored.
	s = resume.Rebuild(log(append(turn, begin, omni.RequestBegin(), omni.AssistantText("x"), omni.RequestEnd(completed, "", 0, 0), end(penguinv1.StopReason_STOP_REASON_FAILED))...))
	if kinds(s.History) != "text,text" || s.Turns != 1 {
		t.Fatalf("after a failed compaction: %s, %d turns", kinds(s.History), s.Turns)
	}
	// One the engine died in is reported open.
	s = resume.Rebuild(log(append(turn, begin, omni.AssistantText("[summary]half"))...))
	if s.OpenCompaction == nil || kinds(s.History) != "text,text" {
		t.Fatalf("open compaction: %v, history %s", s.OpenCompaction, kinds(s.History))
	}
}

// TestStrandedCalls checks that a committed call without an output is
// reported as stranded (its engine stopped) only when no abort was
// recorded after it, with the output its approval decision calls for: an
// allowed call may have run and is never run again, one waiting for
// approval never ran and is asked for again. After a user's abort the
// placeholder is the abort's own, and a call with an output is not
// stranded at all.
func TestStrandedCalls(t *testing.T) {
	turn := []*penguinv1.OmniMessage{
		meta("s"),
		omni.UserText("go"),
		omni.RequestBegin(),
		omni.ToolCall("a", "t", "{}"),
		omni.ToolCall("b", "t", "{}"),
		omni.ToolCall("c", "t", "{}"),
		omni.ToolCall("d", "t", "{}"),
		omni.RequestEnd(completed, "", 0, 0),
		omni.ApprovalDecision("a", penguinv1.Decision_DECISION_ALLOW),
		omni.ApprovalDecision("b", penguinv1.Decision_DECISION_ALLOW),
		omni.ToolCallOutput("b", "out-b", 0),
		omni.ApprovalDecision("c", penguinv1.Decision_DECISION_DENY),
	}
	s := resume.Rebuild(log(turn...))
	var got []string
	for _, o := range s.Stranded {
		got = append(got, o.GetToolCallOutput().GetToolCallId()+"="+o.GetToolCallOutput().GetOutput())
	}
	want := []string{"a=" + loop.Stranded, "c=" + loop.DeniedByUser, "d=" + loop.NotAsked}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stranded = %q, want %q", got, want)
	}
	if len(s.Unasked) != 1 || s.Unasked[0].GetToolCallId() != "d" {
		t.Fatalf("unasked = %v, want [d]", s.Unasked)
	}
	var pending []string
	for _, m := range s.Pending {
		pending = append(pending, m.GetToolCallOutput().GetToolCallId()+"="+m.GetToolCallOutput().GetOutput())
	}
	if want := []string{"a=" + loop.Stranded, "b=out-b", "c=" + loop.DeniedByUser, "d=" + loop.NotAsked}; strings.Join(pending, "|") != strings.Join(want, "|") {
		t.Fatalf("pending = %q, want %q", pending, want)
	}
	if s := resume.Rebuild(log(append(turn, omni.Abort("stop"))...)); len(s.Stranded) != 0 || len(s.Unasked) != 0 {
		t.Fatalf("stranded after an abort = %v, %v; want none", s.Stranded, s.Unasked)
	}
	done := append(append([]*penguinv1.OmniMessage(nil), turn...), omni.ToolCallOutput("a", "out-a", 0),
		omni.ToolCallOutput("c", loop.DeniedByUser, 0), omni.ToolCallOutput("d", "out-d", 0))
	if s := resume.Rebuild(log(done...)); len(s.Stranded) != 0 || len(s.Unasked) != 0 {
		t.Fatalf("stranded with every output = %v, want none", s.Stranded)
	}
}

// TestCutOff checks that what uncommitted requests produced (a request
// in flight when the engine stopped, an attempt that failed before it) is
// handed back with each call's output, so the model is not left to repeat
// a call that ran; a commit or an abort clears it.
func TestCutOff(t *testing.T) {
	base := []*penguinv1.OmniMessage{
		meta("s"),
		omni.UserText("go"),
		omni.RequestBegin(),
		omni.AssistantText("first"),
		omni.ToolCall("a", "t", "{}"),
		omni.ApprovalDecision("a", penguinv1.Decision_DECISION_ALLOW),
		omni.ToolCallOutput("a", "out-a", 0),
		omni.RequestEnd(timeout, "", 0, 0),
		omni.RequestBegin(),
		omni.ToolCall("b", "t", "{}"),
		omni.ApprovalDecision("b", penguinv1.Decision_DECISION_ALLOW),
		omni.ToolCall("c", "t", "{}"),
	}
	s := resume.Rebuild(log(base...))
	var got []string
	for _, m := range s.CutOff {
		switch {
		case m.GetToolCall() != nil:
			got = append(got, "call "+m.GetToolCall().GetToolCallId())
		case m.GetToolCallOutput() != nil:
			got = append(got, "output "+m.GetToolCallOutput().GetToolCallId()+"="+m.GetToolCallOutput().GetOutput())
		default:
			got = append(got, "text "+m.GetText().GetText())
		}
	}
	want := []string{"text first", "call a", "output a=out-a", "call b", "output b=" + loop.Stranded, "call c", "output c=" + loop.NotAsked}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("cut off = %q\nwant      %q", got, want)
	}
	if len(s.History) != 0 || len(s.Stranded) != 0 {
		t.Fatalf("uncommitted calls reached the history (%d) or stranded (%v)", len(s.History), s.Stranded)
	}
	block := loop.CutOffBlock(s.CutOff)
	for _, part := range []string{"[turn_retried]", "tool_call t (id a)", "out-a", loop.Stranded, loop.NotAsked} {
		if !strings.Contains(block, part) {
			t.Fatalf("the cut-off block lacks %q:\n%s", part, block)
		}
	}
	committed := append(append([]*penguinv1.OmniMessage(nil), base...), omni.RequestEnd(completed, "", 0, 0))
	if s := resume.Rebuild(log(committed...)); len(s.CutOff) != 0 {
		t.Fatalf("cut off after a commit = %v", s.CutOff)
	}
	aborted := append(append([]*penguinv1.OmniMessage(nil), base...), omni.RequestEnd(penguinv1.StopReason_STOP_REASON_ABORTED, "", 0, 0), omni.Abort("stop"))
	if s := resume.Rebuild(log(aborted...)); len(s.CutOff) != 0 {
		t.Fatalf("cut off after an abort = %v", s.CutOff)
	}
}
