package anthropic_test

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
	"github.com/penguin-agent/penguin/services/llm/anthropic"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, turns ...emulator.Turn) (*emulator.Server, *anthropic.Adapter) {
	t.Helper()
	srv := emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("sk-ant-test"))
	t.Cleanup(srv.Close)
	a := anthropic.New(anthropic.Config{
		BaseURL:     srv.URL,
		APIKey:      "sk-ant-test",
		Headers:     http.Header{"Anthropic-Beta": {"test-beta"}},
		HTTPClient:  llmtest.Client(t),
		IdleTimeout: 5 * time.Second,
	})
	return srv, a
}

func request(msgs ...*penguinv1.OmniMessage) *stream.Request {
	if len(msgs) == 0 {
		msgs = []*penguinv1.OmniMessage{omni.UserText("hello")}
	}
	return &stream.Request{Provider: "anthropic", Model: "claude-test", Messages: msgs, System: "be brief"}
}

func TestText(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "Hello there, how are you today?", Usage: emulator.Usage{Input: 12, Output: 7}})
	r := llmtest.Run(t, t.Context(), a, request())
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("outcome = %v\n%s", r.Outcome, llmtest.Dump(r.Frames))
	}
	if got := r.Texts(); got != "Hello there, how are you today?" {
		t.Errorf("text = %q", got)
	}
	if u := r.Usage().GetRequest(); u.GetOutput() != 7 || u.GetTotal() != 19 {
		t.Errorf("usage = %v", u)
	}
	if r.Outcome.GetProviderRequestId() != srv.Requests()[0].RequestID {
		t.Errorf("provider request id = %q", r.Outcome.GetProviderRequestId())
	}
	req := srv.Requests()[0]
	if req.Header.Get("X-Api-Key") != "sk-ant-test" || req.Header.Get("Authorization") != "Bearer sk-ant-test" || req.Header.Get("Anthropic-Beta") != "test-beta" || req.Header.Get("Anthropic-Version") == "" {
		t.Errorf("headers = %v", req.Header)
	}
	b := req.Body
	if b["model"] != "claude-test" || b["stream"] != true || b["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("body = %v", b)
	}
	sys := b["system"].([]any)[0].(map[string]any)
	if sys["text"] != "be brief" || sys["cache_control"] == nil {
		t.Errorf("system = %v", sys)
	}
	last := b["messages"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)
	if last["cache_control"] == nil {
		t.Errorf("the last block carries no cache breakpoint: %v", last)
	}
}

// TestThinkingSignatureRoundTrip checks that a thinking block is closed by
// its signature, kept as fidelity, and sent back byte for byte; the same
// for a redacted thinking block's data.
func TestThinkingSignatureRoundTrip(t *testing.T) {
	const sig = "EqQBCkYIBxgCKkB+sig/with==padding&odd\"chars"
	srv, a := setup(t,
		emulator.Turn{Thinking: "I should greet them back.", Signature: sig, RedactedThinking: []string{"ENCRYPTED-BLOB-1"}, Text: "Hi!",
			ToolCalls: []emulator.ToolCall{{Name: "wave", Arguments: `{"times": 2}`}}},
		emulator.Turn{Text: "Done."},
	)
	req := request()
	req.Spec = stream.ModelSpec{ID: "claude-test", Known: true, Reasoning: true, Thinking: stream.ThinkingLevels{
		penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "8192",
	}}
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM
	r := llmtest.Run(t, t.Context(), a, req)
	th := r.Thinking()
	if len(th) != 2 {
		t.Fatalf("thinking blocks = %v\n%s", th, llmtest.Dump(r.Frames))
	}
	wantFid, _ := json.Marshal(map[string]string{"signature": sig})
	if th[0].GetThinking() != "I should greet them back." || string(th[0].GetFidelity()) != string(wantFid) {
		t.Errorf("thinking = %q fidelity %s", th[0].GetThinking(), th[0].GetFidelity())
	}
	if th[1].GetThinking() != "" || string(th[1].GetFidelity()) != `{"redacted":"ENCRYPTED-BLOB-1"}` {
		t.Errorf("redacted = %v", th[1])
	}
	body := llmtest.LastBody(t, srv)
	if th, _ := body["thinking"].(map[string]any); th["type"] != "enabled" || th["budget_tokens"] != float64(8192) {
		t.Errorf("thinking config = %v", body["thinking"])
	}
	if body["max_tokens"].(float64) <= 8192 {
		t.Errorf("max_tokens %v leaves no room above the budget", body["max_tokens"])
	}

	hist := append([]*penguinv1.OmniMessage{omni.UserText("hello")}, r.Complete()...)
	hist = append(hist, omni.ToolCallOutput(r.ToolCalls()[0].GetToolCallId(), "waved", penguinv1.StopReason_STOP_REASON_COMPLETED))
	llmtest.Run(t, t.Context(), a, request(hist...))
	raw := string(srv.Requests()[1].RawBody)
	sigJSON, _ := json.Marshal(sig)
	if !strings.Contains(raw, `"signature":`+string(sigJSON)) {
		t.Errorf("signature not sent back verbatim: %s", raw)
	}
	msgs := llmtest.LastBody(t, srv)["messages"].([]any)
	asst := msgs[1].(map[string]any)["content"].([]any)
	types := []string{}
	for _, b := range asst {
		types = append(types, b.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "thinking,redacted_thinking,text,tool_use" {
		t.Errorf("assistant blocks = %v", types)
	}
	if asst[1].(map[string]any)["data"] != "ENCRYPTED-BLOB-1" {
		t.Errorf("redacted data = %v", asst[1])
	}
	if in := asst[3].(map[string]any)["input"].(map[string]any); in["times"] != float64(2) {
		t.Errorf("tool input = %v", in)
	}
	res := msgs[2].(map[string]any)["content"].([]any)[0].(map[string]any)
	if res["type"] != "tool_result" || res["tool_use_id"] != r.ToolCalls()[0].GetToolCallId() {
		t.Errorf("tool result = %v", res)
	}
}

func TestToolUse(t *testing.T) {
	calls := []emulator.ToolCall{
		{Name: "read_file", Arguments: `{"path":"/etc/hosts","limit":10}`},
		{Name: "list_dir", Arguments: `{"path":"/tmp","recursive":true}`},
		{Name: "noargs"},
	}
	for _, tc := range []struct {
		name  string
		calls []emulator.ToolCall
	}{{"single", calls[:1]}, {"parallel", calls}} {
		t.Run(tc.name, func(t *testing.T) {
			_, a := setup(t, emulator.Turn{Text: "Let me look.", ToolCalls: tc.calls})
			r := llmtest.Run(t, t.Context(), a, request())
			got := r.ToolCalls()
			if len(got) != len(tc.calls) {
				t.Fatalf("tool calls = %v\n%s", got, llmtest.Dump(r.Frames))
			}
			for i, c := range got {
				want := tc.calls[i].Arguments
				if want == "" {
					want = "{}"
				}
				if c.GetName() != tc.calls[i].Name || c.GetArguments() != want || !strings.HasPrefix(c.GetToolCallId(), "toolu_") {
					t.Errorf("call %d = %v", i, c)
				}
			}
			if k := r.Kinds(); k[0] != "partial_text" {
				t.Errorf("kinds = %v", k)
			}
		})
	}
}

// TestStopMaxTokens checks a message that max_tokens cut short: usable
// content keeps the outcome completed and says why it stopped; a tool_use
// cut mid-input makes the outcome malformed and is never emitted as a
// whole call, although Anthropic stops its block like any other before it
// says why the message ended.
func TestStopMaxTokens(t *testing.T) {
	const note = "the model stopped at the output token limit (stop_reason max_tokens)"
	const cutMsg = `tool call "write_file" was cut off at the output token limit (stop_reason max_tokens): its arguments are incomplete JSON`
	readA := emulator.ToolCall{ID: "toolu_r", Name: "read_file", Arguments: `{"path":"a"}`}
	cutWrite := emulator.ToolCall{ID: "toolu_w", Name: "write_file", Arguments: `{"path":"notes.txt","content":"first li`}
	cutStop := penguinv1.StopReason_STOP_REASON_MALFORMED
	for _, tc := range []llmtest.CutCase{
		{Name: "end_turn is not cut", Turn: emulator.Turn{Text: "A whole answer."},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED},
		{Name: "tool_use is not cut", Turn: emulator.Turn{Text: "Reading.", ToolCalls: []emulator.ToolCall{readA}},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Calls: []penguinv1.StopReason{0}},
		{Name: "text cut short", Turn: emulator.Turn{Text: "The answer goes on and on and", StopReason: "max_tokens"},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: note},
		{Name: "whole tool_use", Turn: emulator.Turn{Text: "Reading.", ToolCalls: []emulator.ToolCall{readA}, StopReason: "max_tokens"},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: note, Calls: []penguinv1.StopReason{0}},
		{Name: "tool_use cut off", Turn: emulator.Turn{Text: "Writing.", ToolCalls: []emulator.ToolCall{cutWrite}, StopReason: "max_tokens"},
			Status: cutStop, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, Message: cutMsg,
			Calls: []penguinv1.StopReason{cutStop}},
		// The first block was stopped and the model went on, so it is
		// whole: only the last one can be cut.
		{Name: "second tool_use cut off", Turn: emulator.Turn{ToolCalls: []emulator.ToolCall{readA, cutWrite}, StopReason: "max_tokens"},
			Status: cutStop, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, Message: cutMsg,
			Calls: []penguinv1.StopReason{0, cutStop}},
		{Name: "no content", Turn: emulator.Turn{StopReason: "max_tokens"},
			Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE,
			Message: "the provider completed the request with no content at all; " + note},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, a := setup(t, tc.Turn)
			checkCut(t, llmtest.Run(t, t.Context(), a, request()), tc)
		})
	}
}

// TestStopRefusal checks a message that the model's refusal ended: what
// came before it is the answer, so the outcome stays completed and says
// the model refused; with nothing before it, the request fails as empty.
func TestStopRefusal(t *testing.T) {
	const note = "the model refused to continue (stop_reason refusal)"
	for _, tc := range []llmtest.CutCase{
		{Name: "after text", Turn: emulator.Turn{Text: "I can't help with", StopReason: "refusal"},
			Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: note},
		{Name: "tool_use cut off", Turn: emulator.Turn{ToolCalls: []emulator.ToolCall{{Name: "bash", Arguments: `{"command":"rm -`}}, StopReason: "refusal"},
			Status: penguinv1.StopReason_STOP_REASON_MALFORMED, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE,
			Message: `tool call "bash" was cut off by the model's refusal (stop_reason refusal): its arguments are incomplete JSON`,
			Calls:   []penguinv1.StopReason{penguinv1.StopReason_STOP_REASON_MALFORMED}},
		{Name: "no content", Turn: emulator.Turn{StopReason: "refusal"},
			Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE,
			Message: "the provider completed the request with no content at all; " + note},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			_, a := setup(t, tc.Turn)
			checkCut(t, llmtest.Run(t, t.Context(), a, request()), tc)
		})
	}
}

// TestStopContextWindow checks a message that a full context window ended:
// like max_tokens, the text so far is the answer and the outcome says why
// it stopped.
func TestStopContextWindow(t *testing.T) {
	c := llmtest.CutCase{
		Turn:    emulator.Turn{Text: "The answer was going to", StopReason: "model_context_window_exceeded"},
		Status:  penguinv1.StopReason_STOP_REASON_COMPLETED,
		Message: "the model stopped at the context window limit (stop_reason model_context_window_exceeded)",
	}
	_, a := setup(t, c.Turn)
	checkCut(t, llmtest.Run(t, t.Context(), a, request()), c)
}

// checkCut is llmtest.CheckCut plus what Anthropic's one-block-at-a-time
// streaming adds: each call is closed before the next block begins.
func checkCut(t *testing.T, r llmtest.Result, c llmtest.CutCase) {
	t.Helper()
	llmtest.CheckCut(t, r, c)
	// A call held open after its block stopped is closed when the next
	// block starts: Anthropic's blocks come one at a time.
	open := 0
	for _, m := range r.Messages() {
		switch {
		case m.GetToolCall() != nil:
			open--
		case m.GetPartialToolCall().GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
			if open > 0 {
				t.Errorf("tool call %s started while the call ahead of it was still open:\n%s", m.GetPartialToolCall().GetName(), llmtest.Dump(r.Frames))
			}
			open++
		}
	}
}

func TestUsageWithCache(t *testing.T) {
	_, a := setup(t, emulator.Turn{Text: "ok", Usage: emulator.Usage{Input: 10, CacheRead: 900, CacheWrite: 300, Output: 20}})
	r := llmtest.Run(t, t.Context(), a, request())
	u := r.Usage().GetRequest()
	if u.GetCacheRead() != 900 || u.GetCacheWrite() != 300 || u.GetOutput() != 20 || u.GetTotal() != 1230 {
		t.Errorf("usage = %v", u)
	}
}

func TestImagesInInput(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "A cat."})
	req := request(
		omni.UserText("look"),
		omni.ImageURL("data:image/png;base64,iVBORw0KGgo="),
		omni.ImageURL("https://example.com/cat.jpg"),
		omni.ToolCall("toolu_1", "read_image", `{"path":"x.png"}`),
		omni.ToolCallOutput("toolu_1", "an image", penguinv1.StopReason_STOP_REASON_FAILED, "data:image/jpeg;base64,/9j/4AAQ"),
		omni.UserText("and this one?"),
	)
	llmtest.Run(t, t.Context(), a, req)
	msgs := llmtest.LastBody(t, srv)["messages"].([]any)
	user := msgs[0].(map[string]any)["content"].([]any)
	src := user[1].(map[string]any)["source"].(map[string]any)
	if src["type"] != "base64" || src["media_type"] != "image/png" || src["data"] != "iVBORw0KGgo=" {
		t.Errorf("base64 image = %v", src)
	}
	if src := user[2].(map[string]any)["source"].(map[string]any); src["type"] != "url" || src["url"] != "https://example.com/cat.jpg" {
		t.Errorf("url image = %v", src)
	}
	last := msgs[2].(map[string]any)["content"].([]any)
	tr := last[0].(map[string]any)
	if tr["type"] != "tool_result" || tr["is_error"] != true {
		t.Fatalf("tool result = %v", tr)
	}
	content := tr["content"].([]any)
	if content[1].(map[string]any)["type"] != "image" {
		t.Errorf("tool result content = %v", content)
	}
	if txt := last[1].(map[string]any); txt["type"] != "text" || txt["text"] != "and this one?" || txt["cache_control"] == nil {
		t.Errorf("text after the tool result = %v", txt)
	}
}

func TestThinkingLevels(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "ok"}, emulator.Turn{Text: "ok"})
	req := request()
	req.Spec = stream.ModelSpec{ID: "claude-test", Known: true, Thinking: stream.ThinkingLevels{
		penguinv1.ThinkingLevel_THINKING_LEVEL_LOW: "low", penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH: "high",
	}}
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
	llmtest.Run(t, t.Context(), a, req)
	b := llmtest.LastBody(t, srv)
	if th := b["thinking"].(map[string]any); th["type"] != "adaptive" {
		t.Errorf("thinking = %v", th)
	}
	if oc := b["output_config"].(map[string]any); oc["effort"] != "high" {
		t.Errorf("output_config = %v", oc)
	}

	// A budget that cannot fit under the caller's max_tokens is refused
	// before any I/O.
	req.Spec = stream.ModelSpec{ID: "claude-test", Known: true, Thinking: stream.ThinkingLevels{
		penguinv1.ThinkingLevel_THINKING_LEVEL_LOW: "2048",
	}}
	req.Thinking = penguinv1.ThinkingLevel_THINKING_LEVEL_LOW
	req.MaxTokens = 1000
	n := len(srv.Requests())
	r := llmtest.Run(t, t.Context(), a, req)
	if o := r.Outcome; o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_UNSUPPORTED || !o.GetPermanent() || len(srv.Requests()) != n {
		t.Errorf("outcome = %v", o)
	}
}

func TestFailures(t *testing.T) {
	cases := []struct {
		name   string
		turn   emulator.Turn
		status penguinv1.StopReason
		code   penguinv1.FailureCode
		http   int32
		retry  int64
	}{
		{"rate limit", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "7"}},
			penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT, 429, 7000},
		{"overloaded", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 529}},
			penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER, 529, 0},
		{"auth", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultAuth}},
			penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH, 401, 0},
		{"forbidden", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 403}},
			penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH, 403, 0},
		{"prompt too long", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum"}},
			penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED, 400, 0},
		{"credit balance", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Message: "Your credit balance is too low to access the Anthropic API."}},
			penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA, 400, 0},
		{"bad request", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400}},
			penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, 400, 0},
		{"dropped", emulator.Turn{Text: "This answer is cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultDrop, After: 4}},
			penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, 0, 0},
		{"reset", emulator.Turn{Text: "This answer is cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultDrop, After: 4, Reset: true}},
			penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, 0, 0},
		{"malformed", emulator.Turn{Text: "This answer is cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultMalformed, After: 4}},
			penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, 0, 0},
		{"truncated", emulator.Turn{Text: "This answer is cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultTruncate, After: 4}},
			penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, 0, 0},
		{"overloaded in stream", emulator.Turn{Text: "This answer is cut off in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultStreamError, After: 4}},
			penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER, 0, 0},
		{"empty", emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultEmpty}},
			penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, a := setup(t, tc.turn)
			r := llmtest.Run(t, t.Context(), a, request())
			o := r.Outcome
			if o.GetStatus() != tc.status || o.GetCode() != tc.code || o.GetHttpStatus() != tc.http || o.GetRetryAfterMs() != tc.retry {
				t.Fatalf("outcome = %v, want %v %v http %d retry %d\n%s", o, tc.status, tc.code, tc.http, tc.retry, llmtest.Dump(r.Frames))
			}
			if o.GetMessage() == "" {
				t.Error("failure without a message")
			}
			if want := srv.Requests()[0].RequestID; o.GetProviderRequestId() != want {
				t.Errorf("provider request id = %q, want %q", o.GetProviderRequestId(), want)
			}
		})
	}
}

func TestIdleTimeoutAndAbort(t *testing.T) {
	stall := emulator.Turn{Text: "This answer stalls in the middle.", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 4}}
	t.Run("idle", func(t *testing.T) {
		srv := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{stall}})
		t.Cleanup(srv.Close)
		a := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: llmtest.Client(t), IdleTimeout: 200 * time.Millisecond})
		r := llmtest.Run(t, t.Context(), a, request())
		if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TIMEOUT {
			t.Fatalf("outcome = %v", o)
		}
	})
	t.Run("abort", func(t *testing.T) {
		_, a := setup(t, stall)
		ctx, cancel := context.WithCancel(t.Context())
		out := llmtest.RunObserving(t, ctx, a, request(), func(m *penguinv1.OmniMessage) {
			if m.GetPartialText().GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
				cancel()
			}
		}).Outcome
		if out.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED {
			t.Fatalf("outcome = %v", out)
		}
	})
}

func TestToolsSent(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "ok"})
	req := request()
	req.Tools = []*penguinv1.ToolDefinition{
		{Name: "read_file", Description: "Read a file.", Parameters: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`},
		{Name: "noop"},
	}
	llmtest.Run(t, t.Context(), a, req)
	tools := llmtest.LastBody(t, srv)["tools"].([]any)
	got, _ := json.Marshal(tools)
	want := `[{"description":"Read a file.","input_schema":{"additionalProperties":false,"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"name":"read_file"},` +
		`{"cache_control":{"type":"ephemeral"},"input_schema":{"properties":{},"type":"object"},"name":"noop"}]`
	if string(got) != want {
		t.Errorf("tools = %s", got)
	}
}

// TestToolEditsSent checks that a tool whose schema or description
// changes under the same name is sent as it is now: the schemas parsed
// are kept by their text.
func TestToolEditsSent(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "one"}, emulator.Turn{Text: "two"})
	for i, edit := range []struct{ description, schema, want string }{
		{"Read a file.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`,
			`[{"cache_control":{"type":"ephemeral"},"description":"Read a file.","input_schema":{"properties":{"path":{"type":"string"}},"required":["path"],"type":"object"},"name":"read_file"}]`},
		{"Read one file.", `{"type":"object","properties":{"file":{"type":"string"}},"required":["file"]}`,
			`[{"cache_control":{"type":"ephemeral"},"description":"Read one file.","input_schema":{"properties":{"file":{"type":"string"}},"required":["file"],"type":"object"},"name":"read_file"}]`},
	} {
		req := request()
		req.Tools = []*penguinv1.ToolDefinition{{Name: "read_file", Description: edit.description, Parameters: edit.schema}}
		llmtest.Run(t, t.Context(), a, req)
		got, _ := json.Marshal(llmtest.LastBody(t, srv)["tools"])
		if string(got) != edit.want {
			t.Errorf("request %d: tools = %s, want %s", i, got, edit.want)
		}
	}
}

func TestMissingCredential(t *testing.T) {
	srv := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "never"}}}, emulator.WithAPIKey("sk-needed"))
	t.Cleanup(srv.Close)
	a := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: llmtest.Client(t)})
	r := llmtest.Run(t, t.Context(), a, request())
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL {
		t.Fatalf("outcome = %v", o)
	}
	if h := srv.Requests()[0].Header; h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("a keyless route sent a credential: %v", h)
	}
}
