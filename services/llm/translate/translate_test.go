package translate_test

import (
	"errors"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// run feeds events to a Translator and returns the checked stream.
func run(t *testing.T, history []*penguinv1.OmniMessage, fail *failure.Error, events func(tr *translate.Translator)) llmtest.Result {
	t.Helper()
	var r llmtest.Result
	tr := translate.New(func(m *penguinv1.OmniMessage) error {
		r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
		return nil
	}, translate.NewIDs(history))
	events(tr)
	r.Outcome = tr.Finish(fail)
	r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: r.Outcome}})
	llmtest.Validate(t, r.Frames)
	return r
}

func TestIdenticalFidelityIsOneThinkingBlock(t *testing.T) {
	f := translate.Fidelity("reasoning_field", "reasoning_content")
	r := run(t, nil, nil, func(tr *translate.Translator) {
		tr.ThinkingDelta("a", f)
		tr.ThinkingDelta("b", f)
		tr.ThinkingDelta("c", translate.Fidelity("reasoning_field", "reasoning"))
		tr.TextDelta("answer", nil)
	})
	th := r.Thinking()
	if len(th) != 2 || th[0].GetThinking() != "ab" || th[1].GetThinking() != "c" || string(th[0].GetFidelity()) != string(f) {
		t.Errorf("thinking = %v", th)
	}
}

func TestSignatureClosesThinking(t *testing.T) {
	r := run(t, nil, nil, func(tr *translate.Translator) {
		tr.ThinkingDelta("first", nil)
		tr.CloseThinking(translate.Fidelity("signature", "S1"))
		tr.ThinkingDelta("second", nil)
		tr.CloseThinking(translate.Fidelity("signature", "S2"))
		tr.CloseThinking(translate.Fidelity("encrypted_content", "E")) // encrypted reasoning: no text
		tr.TextDelta("hi", nil)
	})
	th := r.Thinking()
	if len(th) != 3 || string(th[0].GetFidelity()) != `{"signature":"S1"}` || th[1].GetThinking() != "second" ||
		th[2].GetThinking() != "" || string(th[2].GetFidelity()) != `{"encrypted_content":"E"}` {
		t.Errorf("thinking = %v", th)
	}
}

func TestTextPhaseAndSignature(t *testing.T) {
	r := run(t, nil, nil, func(tr *translate.Translator) {
		tr.TextDelta("commentary ", translate.Fidelity("phase", "commentary"))
		tr.TextDelta("more", nil)
		tr.TextDelta("final", translate.Fidelity("phase", "final_answer"))
		tr.TextDelta(" signed", []byte(`{"phase":"final_answer","signature":"X"}`))
		tr.TextDelta("after", nil)
	})
	var texts []string
	var fids []string
	for _, m := range r.Complete() {
		texts = append(texts, m.GetText().GetText())
		fids = append(fids, string(m.GetText().GetFidelity()))
	}
	if len(texts) != 3 || texts[0] != "commentary more" || texts[1] != "final signed" || texts[2] != "after" {
		t.Errorf("texts = %q", texts)
	}
	if fids[1] != `{"phase":"final_answer","signature":"X"}` {
		t.Errorf("merged fidelity = %s", fids[1])
	}
}

func TestOrderAndInterleavedCalls(t *testing.T) {
	r := run(t, nil, nil, func(tr *translate.Translator) {
		tr.ThinkingDelta("think", nil)
		tr.TextDelta("text", nil)
		tr.ToolCallDelta(0, "c0", "a", `{"x"`)
		tr.ToolCallDelta(1, "c1", "b", `{"y"`)
		tr.ToolCallDelta(0, "", "", `:1}`)
		tr.ToolCallDelta(1, "", "", `:2}`)
		tr.ToolCallDelta(2, "c2", "noargs", "")
		tr.Usage(&penguinv1.TokenCounts{Output: 3, Total: 10})
	})
	var order []string
	for _, m := range r.Complete() {
		switch {
		case m.GetThinking() != nil:
			order = append(order, "thinking")
		case m.GetText() != nil:
			order = append(order, "text")
		case m.GetToolCall() != nil:
			order = append(order, m.GetToolCall().GetToolCallId()+"="+m.GetToolCall().GetArguments())
		}
	}
	want := []string{"thinking", "text", `c0={"x":1}`, `c1={"y":2}`, "c2={}"}
	if len(order) != len(want) {
		t.Fatalf("order = %v", order)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Errorf("order = %v, want %v", order, want)
			break
		}
	}
	if k := r.Kinds(); k[len(k)-1] != "token_usage" {
		t.Errorf("usage is not last: %v", k)
	}
}

func TestFailureClosesOpenSegments(t *testing.T) {
	fail := failure.New(penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, "cut")
	r := run(t, nil, fail, func(tr *translate.Translator) {
		tr.TextDelta("partial answ", nil)
		tr.ToolCallDelta(0, "c0", "a", `{"x":`)
	})
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT {
		t.Fatalf("outcome = %v", r.Outcome)
	}
	// The text ended when the call began, so it is whole; the call was cut.
	c := r.Complete()
	if len(c) != 2 || c[0].GetText().GetStopReason() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED ||
		c[1].GetToolCall().GetStopReason() != penguinv1.StopReason_STOP_REASON_TIMEOUT {
		t.Errorf("complete = %v", c)
	}
	if tc := r.ToolCalls(); tc[0].GetArguments() != `{"x":` {
		t.Errorf("a cut-off call's arguments must stay as received: %q", tc[0].GetArguments())
	}
	if r.Usage() != nil {
		t.Error("usage emitted although the provider reported none and the stream failed")
	}
}

func TestEmptyCompletionFails(t *testing.T) {
	r := run(t, nil, nil, func(tr *translate.Translator) {
		tr.Usage(&penguinv1.TokenCounts{Total: 5})
	})
	if r.Outcome.GetCode() != penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE || r.Usage() == nil {
		t.Errorf("outcome = %v, usage %v", r.Outcome, r.Usage())
	}
}

// TestFinishCut checks how a stream that ended early is judged: only the
// calls still open count, the first whose arguments are not whole JSON (no
// arguments at all included) is named, and every open call is then marked
// malformed; otherwise the outcome completes with the cut's note.
func TestFinishCut(t *testing.T) {
	cut := translate.OutputLimit("stop_reason max_tokens")
	malformed := penguinv1.StopReason_STOP_REASON_MALFORMED
	for _, tc := range []struct {
		name    string
		events  func(tr *translate.Translator)
		status  penguinv1.StopReason
		message string
		calls   []penguinv1.StopReason
	}{
		{name: "text", events: func(tr *translate.Translator) { tr.TextDelta("so far", nil) },
			status: penguinv1.StopReason_STOP_REASON_COMPLETED, message: "the model stopped at the output token limit (stop_reason max_tokens)"},
		{name: "closed call is whole", events: func(tr *translate.Translator) {
			tr.ToolCallDelta(0, "c0", "a", `{"x":`)
			tr.CloseToolCall(0)
		}, status: penguinv1.StopReason_STOP_REASON_COMPLETED, message: cut.Note, calls: []penguinv1.StopReason{0}},
		{name: "open whole call", events: func(tr *translate.Translator) { tr.ToolCallDelta(0, "c0", "a", `{"x":1}`) },
			status: penguinv1.StopReason_STOP_REASON_COMPLETED, message: cut.Note, calls: []penguinv1.StopReason{0}},
		{name: "open call without arguments", events: func(tr *translate.Translator) {
			tr.ToolCallDelta(0, "c0", "a", `{"x":1}`)
			tr.ToolCallDelta(1, "c1", "b", "")
			tr.ToolCallDelta(2, "c2", "c", `{"y"`)
		}, status: malformed, message: `tool call "b" was cut off at the output token limit (stop_reason max_tokens): its arguments are incomplete JSON`,
			calls: []penguinv1.StopReason{malformed, malformed, malformed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r llmtest.Result
			tr := translate.New(func(m *penguinv1.OmniMessage) error {
				r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
				return nil
			}, translate.NewIDs(nil))
			tc.events(tr)
			r.Outcome = tr.FinishCut(cut)
			r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: r.Outcome}})
			llmtest.Validate(t, r.Frames)
			if r.Outcome.GetStatus() != tc.status || r.Outcome.GetMessage() != tc.message {
				t.Fatalf("outcome = %v, want %v %q", r.Outcome, tc.status, tc.message)
			}
			calls := r.ToolCalls()
			if len(calls) != len(tc.calls) {
				t.Fatalf("tool calls = %v", calls)
			}
			for i, c := range calls {
				if c.GetStopReason() != tc.calls[i] {
					t.Errorf("call %s marked %v, want %v", c.GetName(), c.GetStopReason(), tc.calls[i])
				}
			}
		})
	}
}

func TestConsumerGoneStopsEmitting(t *testing.T) {
	calls := 0
	gone := errors.New("gone")
	tr := translate.New(func(*penguinv1.OmniMessage) error { calls++; return gone }, translate.NewIDs(nil))
	tr.TextDelta("a", nil)
	tr.TextDelta("b", nil)
	if !errors.Is(tr.Err(), gone) || calls != 1 {
		t.Errorf("err = %v after %d emits", tr.Err(), calls)
	}
}

func TestIDs(t *testing.T) {
	hist := []*penguinv1.OmniMessage{omni.ToolCall("read", "read", "{}"), omni.ToolCall("read#2", "read", "{}"), omni.ToolCall("x#9", "x", "{}")}
	ids := translate.NewIDs(hist)
	if got := ids.Inbound("read", "read"); got != "read#3" {
		t.Errorf("inbound = %s", got)
	}
	if got := ids.Inbound("read", "read"); got != "read#4" {
		t.Errorf("second inbound = %s", got)
	}
	if got := ids.Inbound("", "grep"); got != "grep" {
		t.Errorf("missing id = %s", got)
	}
	if got := ids.Inbound("fresh", "f"); got != "fresh" {
		t.Errorf("unused id = %s", got)
	}
	for in, want := range map[string]string{"read#2": "read", "read": "read", "x#9": "x#9", "call_1": "call_1", "a#b": "a#b"} {
		if got := ids.Outbound(in); got != want {
			t.Errorf("Outbound(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestThinkingLevels(t *testing.T) {
	const (
		none   = penguinv1.ThinkingLevel_THINKING_LEVEL_NONE
		low    = penguinv1.ThinkingLevel_THINKING_LEVEL_LOW
		medium = penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM
		high   = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
		xhigh  = penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH
		maxL   = penguinv1.ThinkingLevel_THINKING_LEVEL_MAX
	)
	req := &stream.Request{Provider: "p", Model: "m"}
	// A model that does not reason (or is unknown) sends nothing, at any
	// level: its answer is just as valid.
	for _, specThinking := range []stream.ThinkingLevels{nil, {}} {
		req.Spec.Thinking = specThinking
		for l := penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED; l <= maxL; l++ {
			req.Thinking = l
			if w := translate.Thinking(req); w != "" {
				t.Errorf("%v on a model that does not think = %q", l, w)
			}
		}
	}
	// A partial list: every level lands on the nearest listed, the
	// deepest below first.
	req.Spec.Thinking = stream.ThinkingLevels{low: "2048", high: "16384"}
	for l, want := range map[penguinv1.ThinkingLevel]string{
		penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED: "",
		none: "2048", low: "2048", medium: "2048", high: "16384", xhigh: "16384", maxL: "16384",
	} {
		req.Thinking = l
		if w := translate.Thinking(req); w != want {
			t.Errorf("%v = %q, want %q", l, w, want)
		}
	}
	if l, ok := translate.ParseLevel("XHigh"); !ok || l != xhigh || translate.LevelName(l) != "xhigh" {
		t.Errorf("ParseLevel = %v %v", l, ok)
	}
	if _, ok := translate.ParseLevel("unspecified"); ok {
		t.Error("unspecified parsed as a level")
	}
}

func TestMergeFidelity(t *testing.T) {
	a := []byte(`{"phase": "x"}`)
	if got := translate.MergeFidelity(a, nil); string(got) != string(a) {
		t.Errorf("alone = %s (must stay byte for byte)", got)
	}
	if got := translate.MergeFidelity(a, []byte(`{"signature":"s"}`)); string(got) != `{"phase":"x","signature":"s"}` {
		t.Errorf("merged = %s", got)
	}
}
