package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/openai"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts an emulator playing turns and an adapter pointed at it.
func setup(t *testing.T, turns ...emulator.Turn) (*emulator.Server, *openai.Adapter) {
	t.Helper()
	srv := emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("sk-test"))
	t.Cleanup(srv.Close)
	a, err := openai.New(openai.Config{
		BaseURL:     srv.URL + "/v1",
		APIKey:      "sk-test",
		Headers:     http.Header{"X-Title": {"penguin-test"}},
		HTTPClient:  llmtest.Client(t),
		IdleTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a
}

func request(msgs ...*penguinv1.OmniMessage) *stream.Request {
	if len(msgs) == 0 {
		msgs = []*penguinv1.OmniMessage{omni.UserText("hello")}
	}
	return &stream.Request{Provider: "openai", Model: "gpt-test", Messages: msgs, System: "be brief", MaxTokens: 1000}
}

func TestText(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "Hello there, how are you today?", Usage: emulator.Usage{Input: 12, Output: 7}})
	r := llmtest.Run(t, t.Context(), a, request())

	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("outcome = %v", r.Outcome)
	}
	if got := r.Texts(); got != "Hello there, how are you today?" {
		t.Errorf("text = %q", got)
	}
	kinds := r.Kinds()
	if kinds[0] != "partial_text" || kinds[len(kinds)-1] != "token_usage" || kinds[len(kinds)-2] != "text" {
		t.Errorf("frame order = %v", kinds)
	}
	u := r.Usage()
	if u.GetRequest().GetOutput() != 7 || u.GetRequest().GetTotal() != 19 || u.GetSession().GetTotal() != 19 {
		t.Errorf("usage = %v", u)
	}
	if r.Outcome.GetProviderRequestId() == "" {
		t.Error("outcome has no provider request id")
	}
	req := srv.Requests()[0]
	if req.Header.Get("X-Title") != "penguin-test" || req.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("headers = %v", req.Header)
	}
	b := req.Body
	if b["model"] != "gpt-test" || b["stream"] != true || b["max_tokens"] != float64(1000) {
		t.Errorf("body = %v", b)
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options = %v", b["stream_options"])
	}
	msgs := b["messages"].([]any)
	if sys := msgs[0].(map[string]any); sys["role"] != "system" || sys["content"] != "be brief" {
		t.Errorf("system message = %v", sys)
	}
}

func TestThinkingFields(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			_, a := setup(t, emulator.Turn{Thinking: "Let me think about this carefully.", ReasoningField: field, Text: "Answer."})
			r := llmtest.Run(t, t.Context(), a, request())
			th := r.Thinking()
			if len(th) != 1 || th[0].GetThinking() != "Let me think about this carefully." {
				t.Fatalf("thinking = %v", th)
			}
			want := `{"reasoning_field":"` + field + `"}`
			if string(th[0].GetFidelity()) != want {
				t.Errorf("fidelity = %s, want %s", th[0].GetFidelity(), want)
			}
			if got := r.Kinds()[0]; got != "partial_thinking" {
				t.Errorf("first frame = %s", got)
			}
			// Thinking, then text: complete messages in contract order.
			complete := r.Complete()
			if complete[0].GetThinking() == nil || complete[1].GetText() == nil {
				t.Errorf("complete order = %v", complete)
			}
		})
	}
}

// TestThinkingSentBack plays a turn that thinks and calls a tool, then
// sends the history back with the tool's output, as an agent loop does,
// and checks that the thinking went back in the field it came from and in
// no other.
func TestThinkingSentBack(t *testing.T) {
	const thought = "The user wants the file, so read it first."
	for _, tc := range []struct{ field, other string }{
		{"reasoning_content", "reasoning"},
		{"reasoning", "reasoning_content"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			srv, a := setup(t,
				emulator.Turn{Thinking: thought, ReasoningField: tc.field, Text: "Reading.",
					ToolCalls: []emulator.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}}},
				emulator.Turn{Text: "It says hello."},
			)
			hist := []*penguinv1.OmniMessage{omni.UserText("read a")}
			r := llmtest.Run(t, t.Context(), a, request(hist...))
			hist = append(hist, r.Complete()...)
			hist = append(hist, omni.ToolCallOutput("call_1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED))
			if r2 := llmtest.Run(t, t.Context(), a, request(hist...)); r2.Texts() != "It says hello." {
				t.Fatalf("second answer = %q\n%s", r2.Texts(), llmtest.Dump(r2.Frames))
			}

			body := llmtest.LastBody(t, srv)
			if body["model"] != "gpt-test" || body["stream"] != true || body["max_tokens"] != float64(1000) {
				t.Errorf("body = %v", body)
			}
			msgs := body["messages"].([]any)
			if len(msgs) != 4 {
				t.Fatalf("messages = %v", msgs)
			}
			asst := msgs[2].(map[string]any)
			if asst["role"] != "assistant" || asst["content"] != "Reading." || len(asst["tool_calls"].([]any)) != 1 {
				t.Errorf("assistant message = %v", asst)
			}
			if asst[tc.field] != thought {
				t.Errorf("%s = %v, want %q", tc.field, asst[tc.field], thought)
			}
			if v, has := asst[tc.other]; has {
				t.Errorf("thinking from %s also went back as %s: %v", tc.field, tc.other, v)
			}
			if tool := msgs[3].(map[string]any); tool["role"] != "tool" || tool["tool_call_id"] != "call_1" || tool["content"] != "hello" {
				t.Errorf("tool message = %v", tool)
			}
		})
	}

	// Thinking from another provider (no fidelity, or Anthropic's
	// signature) is not sent as reasoning; thinking from each field goes
	// back on its own message.
	t.Run("mixed history", func(t *testing.T) {
		srv, a := setup(t, emulator.Turn{Text: "ok"})
		llmtest.Run(t, t.Context(), a, request(
			omni.UserText("one"),
			omni.Thinking("from the reasoning field", translate.Fidelity("reasoning_field", "reasoning")),
			omni.AssistantText("A"),
			omni.UserText("two"),
			omni.Thinking("no fidelity", nil),
			omni.Thinking("signed by anthropic", translate.Fidelity("signature", "S1")),
			omni.AssistantText("B"),
			omni.UserText("three"),
			omni.Thinking("from reasoning_content", translate.Fidelity("reasoning_field", "reasoning_content")),
			omni.AssistantText("C"),
			omni.UserText("four"),
		))
		msgs := llmtest.LastBody(t, srv)["messages"].([]any)
		want := map[int][2]any{ // message index: reasoning, reasoning_content
			2: {"from the reasoning field", nil},
			4: {nil, nil},
			6: {nil, "from reasoning_content"},
		}
		for i, w := range want {
			m := msgs[i].(map[string]any)
			if m["role"] != "assistant" || m["reasoning"] != w[0] || m["reasoning_content"] != w[1] {
				t.Errorf("message %d = %v, want reasoning %v and reasoning_content %v", i, m, w[0], w[1])
			}
		}
	})
}

func TestToolCalls(t *testing.T) {
	calls := []emulator.ToolCall{
		{Name: "read_file", Arguments: `{"path":"/etc/hosts","limit":10}`},
		{Name: "list_dir", Arguments: `{"path":"/tmp","recursive":true}`},
		{Name: "exec_command", Arguments: `{"cmd":"echo hello world"}`},
	}
	for _, tc := range []struct {
		name  string
		turn  emulator.Turn
		calls int
	}{
		{"single", emulator.Turn{ToolCalls: calls[:1]}, 1},
		{"parallel", emulator.Turn{Text: "Checking.", ToolCalls: calls}, 3},
		{"interleaved", emulator.Turn{ToolCalls: calls, InterleaveToolCalls: true}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, a := setup(t, tc.turn)
			r := llmtest.Run(t, t.Context(), a, request())
			if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				t.Fatalf("outcome = %v", r.Outcome)
			}
			got := r.ToolCalls()
			if len(got) != tc.calls {
				t.Fatalf("%d tool calls, want %d:\n%s", len(got), tc.calls, llmtest.Dump(r.Frames))
			}
			ids := map[string]bool{}
			for i, c := range got {
				if c.GetName() != calls[i].Name || c.GetArguments() != calls[i].Arguments {
					t.Errorf("call %d = %s %s", i, c.GetName(), c.GetArguments())
				}
				if c.GetToolCallId() == "" || ids[c.GetToolCallId()] {
					t.Errorf("call %d id %q is empty or repeated", i, c.GetToolCallId())
				}
				ids[c.GetToolCallId()] = true
			}
			if tc.name == "interleaved" {
				// The deltas of different calls really did interleave.
				var order []string
				for _, m := range r.Messages() {
					if p := m.GetPartialToolCall(); p != nil && p.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
						order = append(order, p.GetToolCallId())
					}
				}
				if len(order) < 3 || order[0] == order[1] {
					t.Errorf("deltas did not interleave: %v", order)
				}
			}
		})
	}
}

func TestToolCallRoundTripAndReusedIDs(t *testing.T) {
	// A provider that uses the function name as the call id.
	srv, a := setup(t,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "read_file", Name: "read_file", Arguments: `{"path":"a"}`}}},
		emulator.Turn{ToolCalls: []emulator.ToolCall{
			{ID: "read_file", Name: "read_file", Arguments: `{"path":"b"}`},
			{ID: "read_file", Name: "read_file", Arguments: `{"path":"c"}`},
		}},
		emulator.Turn{Text: "done"},
	)
	hist := []*penguinv1.OmniMessage{omni.UserText("read a, b and c")}
	r1 := llmtest.Run(t, t.Context(), a, request(hist...))
	if c := r1.ToolCalls(); len(c) != 1 || c[0].GetToolCallId() != "read_file" {
		t.Fatalf("first calls = %v", c)
	}
	hist = append(hist, r1.Complete()...)
	hist = append(hist, omni.ToolCallOutput("read_file", "contents of a", penguinv1.StopReason_STOP_REASON_COMPLETED))
	r2 := llmtest.Run(t, t.Context(), a, request(hist...))
	c := r2.ToolCalls()
	if len(c) != 2 || c[0].GetToolCallId() != "read_file#2" || c[1].GetToolCallId() != "read_file#3" {
		t.Fatalf("second calls = %v, want read_file#2 and read_file#3", c)
	}
	hist = append(hist, r2.Complete()...)
	hist = append(hist,
		omni.ToolCallOutput("read_file#2", "contents of b", penguinv1.StopReason_STOP_REASON_COMPLETED),
		omni.ToolCallOutput("read_file#3", "contents of c", penguinv1.StopReason_STOP_REASON_FAILED))
	llmtest.Run(t, t.Context(), a, request(hist...))

	// Outbound, the suffix is stripped: the provider sees its own ids.
	msgs := llmtest.LastBody(t, srv)["messages"].([]any)
	var ids []string
	for _, m := range msgs {
		mm := m.(map[string]any)
		if tcs, ok := mm["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				tcm := tc.(map[string]any)
				ids = append(ids, tcm["id"].(string))
				if tcm["function"].(map[string]any)["arguments"] == "" {
					t.Errorf("empty arguments sent back")
				}
			}
		}
		if mm["role"] == "tool" {
			ids = append(ids, "out:"+mm["tool_call_id"].(string))
		}
	}
	want := "read_file out:read_file read_file read_file out:read_file out:read_file"
	if strings.Join(ids, " ") != want {
		t.Errorf("outbound ids = %v, want %s", ids, want)
	}
}

func TestUsageWithCache(t *testing.T) {
	_, a := setup(t, emulator.Turn{Text: "ok", Usage: emulator.Usage{Input: 100, CacheRead: 900, Output: 20, Reasoning: 5}})
	r := llmtest.Run(t, t.Context(), a, request())
	u := r.Usage().GetRequest()
	if u.GetCacheRead() != 900 || u.GetOutput() != 20 || u.GetTotal() != 1020 || u.GetCacheWrite() != 0 {
		t.Errorf("usage = %v", u)
	}
}

func TestImagesInInput(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "A cat."})
	const png = "data:image/png;base64,iVBORw0KGgo="
	req := request(
		omni.UserText("look"),
		omni.ImageURL(png),
		omni.ImageURL("https://example.com/cat.jpg"),
		omni.AssistantText("calling"),
		omni.ToolCall("call_1", "read_image", `{"path":"x.png"}`),
		omni.ToolCallOutput("call_1", "an image", penguinv1.StopReason_STOP_REASON_COMPLETED, png),
	)
	llmtest.Run(t, t.Context(), a, req)
	msgs := llmtest.LastBody(t, srv)["messages"].([]any)
	user := msgs[1].(map[string]any)
	parts := user["content"].([]any)
	if len(parts) != 3 || parts[1].(map[string]any)["image_url"].(map[string]any)["url"] != png {
		t.Fatalf("user content = %v", parts)
	}
	if tool := msgs[3].(map[string]any); tool["role"] != "tool" || tool["content"] != "an image" {
		t.Errorf("tool message = %v", tool)
	}
	follow := msgs[4].(map[string]any)
	fparts := follow["content"].([]any)
	if follow["role"] != "user" || len(fparts) != 2 || fparts[1].(map[string]any)["image_url"].(map[string]any)["url"] != png {
		t.Errorf("tool images message = %v", follow)
	}
}

func TestThinkingLevels(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "ok"}, emulator.Turn{Text: "ok"}, emulator.Turn{Text: "ok"})
	req := request()
	// A model nobody describes gets no reasoning parameter, whatever the
	// level: a non-reasoning model would refuse one.
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
	llmtest.Run(t, t.Context(), a, req)
	if got, ok := llmtest.LastBody(t, srv)["reasoning_effort"]; ok {
		t.Errorf("reasoning_effort = %v for an unknown model", got)
	}

	// A model that takes only some levels: each lands on the nearest.
	req.Spec = stream.ModelSpec{ID: "gpt-test", Known: true, Reasoning: true, Thinking: stream.ThinkingLevels{
		penguinv1.ThinkingLevel_THINKING_LEVEL_LOW: "low", penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "medium",
	}}
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_MAX
	llmtest.Run(t, t.Context(), a, req)
	if got := llmtest.LastBody(t, srv)["reasoning_effort"]; got != "medium" {
		t.Errorf("max mapped to %v, want medium", got)
	}
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_NONE
	llmtest.Run(t, t.Context(), a, req)
	if got := llmtest.LastBody(t, srv)["reasoning_effort"]; got != "low" {
		t.Errorf("none mapped to %v, want low (the model cannot turn reasoning off)", got)
	}
}

// TestFailures drives every failure class through the emulator and checks
// the outcome's status, code and facts, and that the stream keeps the
// discipline (cut-off segments closed, marked with the status).
func TestFailures(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name       string
		turn       emulator.Turn
		status     penguinv1.StopReason
		code       penguinv1.FailureCode
		http       int32
		retryAfter func(ms int64) bool
		partial    bool // content was cut off mid-stream
	}{
		{name: "rate limit with Retry-After seconds", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "2"}},
			status: penguinv1.StopReason_STOP_REASON_TIMEOUT, code: penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT, http: 429,
			retryAfter: func(ms int64) bool { return ms == 2000 }},
		{name: "server error with Retry-After date", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 503, RetryAfter: date}},
			status: penguinv1.StopReason_STOP_REASON_TIMEOUT, code: penguinv1.FailureCode_FAILURE_CODE_SERVER, http: 503,
			retryAfter: func(ms int64) bool { return ms > 80_000 && ms <= 90_000 }},
		{name: "quota", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, Code: "insufficient_quota",
			Message: "You exceeded your current quota, please check your plan and billing details."}},
			status: penguinv1.StopReason_STOP_REASON_FAILED, code: penguinv1.FailureCode_FAILURE_CODE_QUOTA, http: 429},
		{name: "auth", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultAuth}},
			status: penguinv1.StopReason_STOP_REASON_AUTH, code: penguinv1.FailureCode_FAILURE_CODE_AUTH, http: 401},
		{name: "context overflow", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Code: "context_length_exceeded",
			Message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."}},
			status: penguinv1.StopReason_STOP_REASON_FAILED, code: penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED, http: 400},
		{name: "bad request", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Message: "Invalid value for 'tools'."}},
			status: penguinv1.StopReason_STOP_REASON_FAILED, code: penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, http: 400},
		{name: "dropped connection", turn: emulator.Turn{Text: "This answer will be cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultDrop, After: 3}},
			status: penguinv1.StopReason_STOP_REASON_TIMEOUT, code: penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, partial: true},
		{name: "reset connection", turn: emulator.Turn{Text: "This answer will be cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultDrop, After: 3, Reset: true}},
			status: penguinv1.StopReason_STOP_REASON_TIMEOUT, code: penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, partial: true},
		{name: "malformed chunk", turn: emulator.Turn{Text: "This answer will be cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultMalformed, After: 3}},
			status: penguinv1.StopReason_STOP_REASON_MALFORMED, code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, partial: true},
		{name: "truncated stream", turn: emulator.Turn{ToolCalls: []emulator.ToolCall{{Name: "exec_command", Arguments: `{"cmd":"ls -la /tmp"}`}},
			Fault: &emulator.Fault{Kind: emulator.FaultTruncate, After: 3}},
			status: penguinv1.StopReason_STOP_REASON_MALFORMED, code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, partial: true},
		{name: "in-stream error", turn: emulator.Turn{Text: "This answer will be cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultStreamError, After: 3}},
			status: penguinv1.StopReason_STOP_REASON_TIMEOUT, code: penguinv1.FailureCode_FAILURE_CODE_SERVER, partial: true},
		{name: "empty completion", turn: emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultEmpty}},
			status: penguinv1.StopReason_STOP_REASON_FAILED, code: penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, a := setup(t, tc.turn)
			r := llmtest.Run(t, t.Context(), a, request())
			o := r.Outcome
			if o.GetStatus() != tc.status || o.GetCode() != tc.code {
				t.Fatalf("outcome = %v, want %v %v\n%s", o, tc.status, tc.code, llmtest.Dump(r.Frames))
			}
			if o.GetHttpStatus() != tc.http {
				t.Errorf("http status = %d, want %d", o.GetHttpStatus(), tc.http)
			}
			if tc.retryAfter != nil && !tc.retryAfter(o.GetRetryAfterMs()) {
				t.Errorf("retry_after_ms = %d", o.GetRetryAfterMs())
			}
			if o.GetMessage() == "" {
				t.Error("failure without a message")
			}
			if want := srv.Requests()[0].RequestID; o.GetProviderRequestId() != want {
				t.Errorf("provider request id = %q, want %q", o.GetProviderRequestId(), want)
			}
			if tc.partial {
				// The cut-off segment was closed, marked with the outcome's
				// status, and no complete message claims to be whole.
				var marked bool
				for _, m := range r.Complete() {
					switch {
					case m.GetText() != nil:
						marked = m.GetText().GetStopReason() == tc.status
					case m.GetToolCall() != nil:
						marked = m.GetToolCall().GetStopReason() == tc.status
					}
				}
				if !marked {
					t.Errorf("cut-off content not marked with %v:\n%s", tc.status, llmtest.Dump(r.Frames))
				}
			}
		})
	}
}

// TestFinishLength checks a completion that the output token limit cut
// short (finish_reason "length"): usable content keeps the outcome
// completed and says why it stopped; a tool call cut mid-arguments makes
// the outcome malformed and is never emitted as a whole call.
func TestFinishLength(t *testing.T) {
	const note = "the model stopped at the output token limit (finish_reason length)"
	readA := emulator.ToolCall{ID: "call_r", Name: "read_file", Arguments: `{"path":"a"}`}
	cutWrite := emulator.ToolCall{ID: "call_w", Name: "write_file", Arguments: `{"path":"notes.txt","content":"first li`}
	cutStop := penguinv1.StopReason_STOP_REASON_MALFORMED
	for _, tc := range []llmtest.CutCase{
		{Name: "stop is not cut", Turn: emulator.Turn{Text: "A whole answer."},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED},
		{Name: "text cut short", Turn: emulator.Turn{Text: "The answer goes on and on and", StopReason: "length"},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: note},
		{Name: "whole tool call", Turn: emulator.Turn{Text: "Reading.", ToolCalls: []emulator.ToolCall{readA}, StopReason: "length"},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: note, Calls: []penguinv1.StopReason{0}},
		{Name: "tool call cut off", Turn: emulator.Turn{Text: "Writing.", ToolCalls: []emulator.ToolCall{cutWrite}, StopReason: "length"},
			Status: cutStop, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE,
			Message: `tool call "write_file" was cut off at the output token limit (finish_reason length): its arguments are incomplete JSON`,
			Calls:   []penguinv1.StopReason{cutStop}},
		{Name: "last of parallel calls cut off", Turn: emulator.Turn{ToolCalls: []emulator.ToolCall{readA, cutWrite}, StopReason: "length"},
			Status: cutStop, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE,
			Message: `tool call "write_file" was cut off at the output token limit (finish_reason length): its arguments are incomplete JSON`,
			Calls:   []penguinv1.StopReason{cutStop, cutStop}},
		{Name: "no content", Turn: emulator.Turn{StopReason: "length"},
			Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE,
			Message: "the provider completed the request with no content at all; " + note},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, a := setup(t, tc.Turn)
			llmtest.CheckCut(t, llmtest.Run(t, t.Context(), a, request()), tc)
		})
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{
		{Text: "This answer stalls in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 2}},
	}})
	t.Cleanup(srv.Close)
	a, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: llmtest.Client(t), IdleTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := llmtest.Run(t, t.Context(), a, request())
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TIMEOUT ||
		!strings.Contains(o.GetMessage(), "idle") {
		t.Fatalf("outcome = %v", o)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("idle timeout took %v", d)
	}
}

func TestRequestTimeoutAndAbort(t *testing.T) {
	stall := emulator.Turn{Text: "This answer stalls in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 2}}
	t.Run("request timeout", func(t *testing.T) {
		_, a := setup(t, stall)
		ctx, cancel := context.WithTimeoutCause(t.Context(), 200*time.Millisecond, failure.ErrRequestTimeout)
		defer cancel()
		r := llmtest.Run(t, ctx, a, request())
		if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TIMEOUT {
			t.Fatalf("outcome = %v", o)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		_, a := setup(t, stall)
		ctx, cancel := context.WithCancel(t.Context())
		out := llmtest.RunObserving(t, ctx, a, request(), func(m *penguinv1.OmniMessage) {
			if m.GetPartialText().GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
				cancel()
			}
		}).Outcome
		if out.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED || out.GetCode() != penguinv1.FailureCode_FAILURE_CODE_ABORTED {
			t.Fatalf("outcome = %v", out)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	srv := emulator.NewServer(emulator.Script{})
	url := srv.URL
	srv.Close()
	a, err := openai.New(openai.Config{BaseURL: url + "/v1", HTTPClient: llmtest.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := llmtest.Run(t, t.Context(), a, request())
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TRANSPORT {
		t.Fatalf("outcome = %v", o)
	}
}

func TestToolsSent(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "ok"})
	req := request()
	req.Tools = []*penguinv1.ToolDefinition{
		{Name: "read_file", Description: "Read a file.", Parameters: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`},
		{Name: "noop", Description: "Do nothing."},
	}
	llmtest.Run(t, t.Context(), a, req)
	tools := llmtest.LastBody(t, srv)["tools"].([]any)
	got, _ := json.Marshal(tools)
	want := `[{"function":{"description":"Read a file.","name":"read_file","parameters":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"}},"type":"function"},` +
		`{"function":{"description":"Do nothing.","name":"noop","parameters":{"properties":{},"type":"object"}},"type":"function"}]`
	if string(got) != want {
		t.Errorf("tools = %s", got)
	}
}

func TestMissingCredential(t *testing.T) {
	srv := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "never"}}}, emulator.WithAPIKey("sk-needed"))
	t.Cleanup(srv.Close)
	a, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: llmtest.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := llmtest.Run(t, t.Context(), a, request())
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL {
		t.Fatalf("outcome = %v", o)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("a keyless route sent Authorization %q", h)
	}
}
