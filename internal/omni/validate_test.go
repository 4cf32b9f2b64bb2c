package omni_test

import (
	"errors"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
)

const (
	start = penguinv1.StreamEventType_STREAM_EVENT_TYPE_START
	delta = penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA
	stop  = penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
)

func msg(m *penguinv1.OmniMessage) *penguinv1.StreamGenerateResponse {
	return &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}}
}

func outcome(s penguinv1.StopReason) *penguinv1.StreamGenerateResponse {
	return &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: &penguinv1.LLMOutcome{Status: s}}}
}

// goodLLM is a complete, valid model stream: thinking, text, two parallel
// tool calls with interleaved deltas, usage, outcome.
func goodLLM() []*penguinv1.StreamGenerateResponse {
	return []*penguinv1.StreamGenerateResponse{
		msg(omni.PartialThinking(start, "")),
		msg(omni.PartialThinking(delta, "let me ")),
		msg(omni.PartialThinking(delta, "think")),
		msg(omni.PartialThinking(stop, "")),
		msg(omni.Thinking("let me think", []byte(`{"signature":"abc"}`))),
		msg(omni.PartialText(start, "")),
		msg(omni.PartialText(delta, "Hello")),
		msg(omni.PartialText(delta, ", world")),
		msg(omni.PartialText(stop, "")),
		msg(omni.AssistantText("Hello, world")),
		msg(omni.PartialToolCall(start, "call_1", "read_file", "")),
		msg(omni.PartialToolCall(start, "call_2", "exec_command", "")),
		msg(omni.PartialToolCall(delta, "call_1", "read_file", `{"file_path":`)),
		msg(omni.PartialToolCall(delta, "call_2", "exec_command", `{"cmd":"ls"}`)),
		msg(omni.PartialToolCall(delta, "call_1", "read_file", `"a.go"}`)),
		msg(omni.PartialToolCall(stop, "call_1", "read_file", "")),
		msg(omni.ToolCall("call_1", "read_file", `{"file_path":"a.go"}`)),
		msg(omni.PartialToolCall(stop, "call_2", "exec_command", "")),
		msg(omni.ToolCall("call_2", "exec_command", `{"cmd":"ls"}`)),
		msg(omni.TokenUsage(&penguinv1.TokenCounts{Total: 10}, &penguinv1.TokenCounts{Total: 10})),
		outcome(penguinv1.StopReason_STOP_REASON_COMPLETED),
	}
}

func TestValidateLLMStreamAcceptsGoodStreams(t *testing.T) {
	t.Parallel()
	cases := map[string][]*penguinv1.StreamGenerateResponse{
		"full":          goodLLM(),
		"outcome only":  {outcome(penguinv1.StopReason_STOP_REASON_TIMEOUT)},
		"complete only": {msg(omni.AssistantText("hi")), outcome(penguinv1.StopReason_STOP_REASON_COMPLETED)},
		"forwarded subagent text interleaves": {
			msg(omni.PartialText(start, "")),
			msg(omni.PartialText(delta, "a")),
			msg(omni.PartialText(stop, "")),
			msg(omni.WithOrigin(omni.AssistantText("child"), "child-1")),
			msg(omni.AssistantText("a")),
			outcome(penguinv1.StopReason_STOP_REASON_COMPLETED),
		},
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A forwarded message between a stop and its complete message
			// belongs to another origin, so it is allowed too.
			if err := omni.ValidateLLMStream(frames); err != nil {
				t.Fatalf("valid stream rejected: %v", err)
			}
		})
	}
}

func TestValidateLLMStreamRejectsBrokenStreams(t *testing.T) {
	t.Parallel()
	completed := outcome(penguinv1.StopReason_STOP_REASON_COMPLETED)
	cases := []struct {
		name   string
		frames []*penguinv1.StreamGenerateResponse
		want   string
	}{
		{"missing start", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(delta, "x")), msg(omni.PartialText(stop, "")), msg(omni.AssistantText("x")), completed,
		}, "without a start"},
		{"stop without start", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(stop, "")), completed,
		}, "stop without a start"},
		{"delta after stop", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(delta, "x")), msg(omni.PartialText(stop, "")),
			msg(omni.PartialText(delta, "y")), msg(omni.AssistantText("x")), completed,
		}, "complete message of the stopped"},
		{"delta after stop and complete", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(delta, "x")), msg(omni.PartialText(stop, "")),
			msg(omni.AssistantText("x")), msg(omni.PartialText(delta, "y")), completed,
		}, "without a start"},
		{"double start", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(start, "")), completed,
		}, "already open"},
		{"complete differs from deltas", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(delta, "abc")), msg(omni.PartialText(stop, "")),
			msg(omni.AssistantText("abd")), completed,
		}, "differs from its joined deltas"},
		{"tool call arguments differ", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialToolCall(start, "c1", "f", "")), msg(omni.PartialToolCall(delta, "c1", "f", `{"a":1}`)),
			msg(omni.PartialToolCall(stop, "c1", "f", "")), msg(omni.ToolCall("c1", "f", `{"a": 1}`)), completed,
		}, "differs from its joined deltas"},
		{"tool call renamed", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialToolCall(start, "c1", "f", "")), msg(omni.PartialToolCall(stop, "c1", "f", "")),
			msg(omni.ToolCall("c1", "g", "")), completed,
		}, "named"},
		{"complete of another segment after stop", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(stop, "")), msg(omni.Thinking("", nil)), completed,
		}, "was due"},
		{"event between stop and complete", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(stop, "")), msg(omni.RequestBegin()),
			msg(omni.AssistantText("")), completed,
		}, "was due"},
		{"complete before stop", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.AssistantText("")), completed,
		}, "before its partial_text segment stopped"},
		{"segment left open at outcome", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(delta, "x")), completed,
		}, "still open"},
		{"complete missing at outcome", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(start, "")), msg(omni.PartialText(stop, "")), completed,
		}, "before the complete message"},
		{"no outcome", goodLLM()[:len(goodLLM())-1], "without an outcome"},
		{"outcome not last", append(goodLLM(), msg(omni.AssistantText("late"))), "after the outcome"},
		{"two outcomes", append(goodLLM(), completed), "second outcome"},
		{"outcome without status", []*penguinv1.StreamGenerateResponse{outcome(penguinv1.StopReason_STOP_REASON_UNSPECIFIED)}, "no status"},
		{"empty frame", []*penguinv1.StreamGenerateResponse{{}, completed}, "neither"},
		{"empty message", []*penguinv1.StreamGenerateResponse{msg(&penguinv1.OmniMessage{}), completed}, "no payload"},
		{"no event type", []*penguinv1.StreamGenerateResponse{
			msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_UNSPECIFIED, "x")), completed,
		}, "no event_type"},
		{"start with content", []*penguinv1.StreamGenerateResponse{msg(omni.PartialText(start, "x")), completed}, "start carries content"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := omni.ValidateLLMStream(tc.frames)
			if err == nil {
				t.Fatal("broken stream accepted")
			}
			if !errors.Is(err, omni.ErrDiscipline) {
				t.Fatalf("error does not wrap ErrDiscipline: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestValidateToolStream(t *testing.T) {
	t.Parallel()
	const id = "call_9"
	good := []*penguinv1.OmniMessage{
		omni.PartialToolCallOutput(start, id, ""),
		omni.PartialToolCallOutput(delta, id, "line 1\n"),
		omni.PartialToolCallOutput(delta, id, "", "data:image/png;base64,AAAA"),
		omni.PartialToolCallOutput(delta, id, "[exit code 0]"),
		omni.PartialToolCallOutput(stop, id, ""),
		omni.ToolCallOutput(id, "line 1\n[exit code 0]", penguinv1.StopReason_STOP_REASON_COMPLETED, "data:image/png;base64,AAAA"),
	}
	if err := omni.ValidateToolStream(id, good); err != nil {
		t.Fatalf("valid tool stream rejected: %v", err)
	}
	withChild := append([]*penguinv1.OmniMessage{omni.WithOrigin(omni.AssistantText("child says"), "child")}, good...)
	if err := omni.ValidateToolStream(id, withChild); err != nil {
		t.Fatalf("forwarded subagent message rejected: %v", err)
	}
	bare := []*penguinv1.OmniMessage{omni.ToolCallOutput(id, "Tool call denied by policy.", penguinv1.StopReason_STOP_REASON_ABORTED)}
	if err := omni.ValidateToolStream(id, bare); err != nil {
		t.Fatalf("output without partials rejected: %v", err)
	}

	broken := []struct {
		name string
		msgs []*penguinv1.OmniMessage
		want string
	}{
		{"no output", good[:5], "without a tool_call_output"},
		{"nothing at all", nil, "without a tool_call_output"},
		{"two outputs", append(append([]*penguinv1.OmniMessage{}, good...), omni.ToolCallOutput(id, "again", 0)), "second tool_call_output"},
		{"frame after output", append(append([]*penguinv1.OmniMessage{}, bare...), omni.PartialToolCallOutput(start, id, "")), "last frame"},
		{"output differs", append(append([]*penguinv1.OmniMessage{}, good[:5]...), omni.ToolCallOutput(id, "line 1\n", 0, "data:image/png;base64,AAAA")), "differs"},
		{"images differ", append(append([]*penguinv1.OmniMessage{}, good[:5]...), omni.ToolCallOutput(id, "line 1\n[exit code 0]", 0)), "images differ"},
		{"wrong call id", []*penguinv1.OmniMessage{omni.ToolCallOutput("other", "x", 0)}, "in the stream of call"},
		{"foreign payload", []*penguinv1.OmniMessage{omni.AssistantText("x"), omni.ToolCallOutput(id, "x", 0)}, "carries only"},
		{"missing start", []*penguinv1.OmniMessage{omni.PartialToolCallOutput(delta, id, "x"), omni.ToolCallOutput(id, "x", 0)}, "without a start"},
	}
	for _, tc := range broken {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := omni.ValidateToolStream(id, tc.msgs)
			if err == nil {
				t.Fatal("broken tool stream accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestGuardsAndPersistence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		m       *penguinv1.OmniMessage
		kind    omni.Kind
		persist bool
	}{
		{omni.UserText("hi"), omni.KindModel, true},
		{omni.PartialText(delta, "x"), omni.KindPartial, false},
		{omni.RequestBegin(), omni.KindEvent, true},
		{&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{}}}, omni.KindSessionMeta, true},
		{omni.WithOrigin(omni.AssistantText("x"), "child"), omni.KindModel, false},
		{&penguinv1.OmniMessage{}, omni.KindUnknown, false},
	}
	for i, tc := range cases {
		if got := omni.KindOf(tc.m); got != tc.kind {
			t.Errorf("case %d: kind %v, want %v", i, got, tc.kind)
		}
		if got := omni.Persistable(tc.m); got != tc.persist {
			t.Errorf("case %d: persistable %v, want %v", i, got, tc.persist)
		}
	}
}

func TestWithOriginPrependsAndCopies(t *testing.T) {
	t.Parallel()
	m := omni.AssistantText("x")
	once := omni.WithOrigin(m, "inner")
	twice := omni.WithOrigin(once, "outer")
	if len(m.GetOrigin()) != 0 {
		t.Fatal("WithOrigin modified its input")
	}
	if got := strings.Join(twice.GetOrigin(), ","); got != "outer,inner" {
		t.Fatalf("origin chain %q, want outer,inner", got)
	}
}

func TestAddTokenCounts(t *testing.T) {
	t.Parallel()
	sum := omni.AddTokenCounts(&penguinv1.TokenCounts{CacheRead: 1, CacheWrite: 2, Output: 3, Total: 4}, nil)
	sum = omni.AddTokenCounts(sum, &penguinv1.TokenCounts{CacheRead: 10, CacheWrite: 20, Output: 30, Total: 40})
	if sum.CacheRead != 11 || sum.CacheWrite != 22 || sum.Output != 33 || sum.Total != 44 {
		t.Fatalf("sum %v", sum)
	}
	if sum.CostUsd != nil || sum.Unreported {
		t.Fatalf("a sum of unpriced, reported counts has a cost or is unreported: %v", sum)
	}
	cost := 0.25
	sum = omni.AddTokenCounts(sum, &penguinv1.TokenCounts{Output: 1, Total: 1, Reasoning: 1, CostUsd: &cost})
	sum = omni.AddTokenCounts(sum, &penguinv1.TokenCounts{Unreported: true})
	sum = omni.AddTokenCounts(sum, &penguinv1.TokenCounts{Output: 1, Total: 1, CostUsd: &cost})
	if sum.GetCostUsd() != 0.5 || !sum.Unreported || sum.Reasoning != 1 || sum.Output != 35 {
		t.Fatalf("running total = %v", sum)
	}
}
