package responses_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/responses"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts an emulator on OpenAI's route and an adapter pointed at it.
func setup(t *testing.T, turns ...emulator.Turn) (*emulator.Server, *responses.Adapter) {
	t.Helper()
	srv := emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("sk-test"))
	t.Cleanup(srv.Close)
	a := responses.New(responses.Config{BaseURL: srv.URL + "/openai/v1", APIKey: "sk-test", HTTPClient: llmtest.Client(t), IdleTimeout: 5 * time.Second})
	return srv, a
}

func request(model string, reasoning bool, msgs ...*penguinv1.OmniMessage) *stream.Request {
	if len(msgs) == 0 {
		msgs = []*penguinv1.OmniMessage{omni.UserText("hello")}
	}
	spec := stream.ModelSpec{ID: model, Known: true, Reasoning: reasoning}
	if reasoning {
		spec.Thinking = stream.ThinkingLevels{penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "medium"}
	}
	return &stream.Request{Provider: "openai", Model: model, Spec: spec, Messages: msgs, System: "be brief", MaxTokens: 1000,
		Thinking: penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM}
}

func TestText(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "Hello there, how are you?", Usage: emulator.Usage{Input: 12, Output: 7, CacheRead: 4}})
	r := llmtest.Run(t, t.Context(), a, request("gpt-4o", false))
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || r.Texts() != "Hello there, how are you?" {
		t.Fatalf("outcome %v text %q\n%s", r.Outcome, r.Texts(), llmtest.Dump(r.Frames))
	}
	if u := r.Usage().GetRequest(); u.GetTotal() != 23 || u.GetOutput() != 7 || u.GetCacheRead() != 4 {
		t.Errorf("usage = %v", u)
	}
	b := llmtest.LastBody(t, srv)
	if b["store"] != false || b["instructions"] != "be brief" || b["max_output_tokens"] != float64(1000) || b["include"] != nil || b["reasoning"] != nil {
		t.Errorf("body = %v", b)
	}
	if r.Outcome.GetProviderRequestId() == "" {
		t.Error("no provider request id")
	}
}

// TestReasoningRoundTrip plays a turn that reasons and calls a tool, then
// sends the history back: the reasoning item goes back verbatim, its
// encrypted content included, right before the call it led to.
func TestReasoningRoundTrip(t *testing.T) {
	srv, a := setup(t,
		emulator.Turn{Thinking: "The user wants the file.", Signature: "ENCRYPTED-REASONING-1",
			ToolCalls: []emulator.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		emulator.Turn{Text: "It says hello."},
	)
	hist := []*penguinv1.OmniMessage{omni.UserText("read a")}
	r := llmtest.Run(t, t.Context(), a, request("gpt-5", true, hist...))
	th := r.Thinking()
	if len(th) != 1 || th[0].GetThinking() != "The user wants the file." || !strings.Contains(string(th[0].GetFidelity()), "ENCRYPTED-REASONING-1") {
		t.Fatalf("thinking = %v\n%s", th, llmtest.Dump(r.Frames))
	}
	first := llmtest.LastBody(t, srv)
	if inc, _ := first["include"].([]any); len(inc) != 1 || inc[0] != "reasoning.encrypted_content" {
		t.Errorf("include = %v", first["include"])
	}
	if rp, _ := first["reasoning"].(map[string]any); rp["effort"] != "medium" || rp["summary"] != "auto" {
		t.Errorf("reasoning = %v", first["reasoning"])
	}
	hist = append(hist, r.Complete()...)
	hist = append(hist, omni.ToolCallOutput("call_1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED))
	if r2 := llmtest.Run(t, t.Context(), a, request("gpt-5", true, hist...)); r2.Texts() != "It says hello." {
		t.Fatalf("second answer: %v\n%s", r2.Outcome, llmtest.Dump(r2.Frames))
	}
	var sent struct {
		Input []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(srv.Requests()[1].RawBody, &sent); err != nil {
		t.Fatal(err)
	}
	var fid map[string]json.RawMessage
	if err := json.Unmarshal(th[0].GetFidelity(), &fid); err != nil {
		t.Fatal(err)
	}
	if len(sent.Input) != 4 || string(sent.Input[1]) != string(fid["responses_item"]) {
		t.Fatalf("input = %s\nwant the reasoning item verbatim: %s", sent.Input, fid["responses_item"])
	}
	if !strings.Contains(string(sent.Input[2]), `"type":"function_call"`) || !strings.Contains(string(sent.Input[3]), `"function_call_output"`) {
		t.Errorf("input = %s", sent.Input)
	}
}

func TestIncompleteAtTheOutputLimit(t *testing.T) {
	_, a := setup(t, emulator.Turn{Text: "A long answer that", StopReason: "length"})
	r := llmtest.Run(t, t.Context(), a, request("gpt-4o", false))
	o := r.Outcome
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || !strings.Contains(o.GetMessage(), "max_output_tokens") {
		t.Errorf("outcome = %v", o)
	}
}

func TestFailures(t *testing.T) {
	_, a := setup(t,
		emulator.Turn{Text: "Partial answer that stops.", Fault: &emulator.Fault{Kind: emulator.FaultStreamError, After: 4, Code: "server_error", Message: "The server had an error"}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: http.StatusTooManyRequests, RetryAfter: "3"}},
		emulator.Turn{Text: "cut", Fault: &emulator.Fault{Kind: emulator.FaultTruncate, After: 3}},
	)
	o := llmtest.Run(t, t.Context(), a, request("gpt-4o", false)).Outcome
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || !strings.Contains(o.GetMessage(), "The server had an error") {
		t.Errorf("stream error = %v", o)
	}
	o = llmtest.Run(t, t.Context(), a, request("gpt-4o", false)).Outcome
	if o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT || o.GetRetryAfterMs() != 3000 {
		t.Errorf("429 = %v", o)
	}
	o = llmtest.Run(t, t.Context(), a, request("gpt-4o", false)).Outcome
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_MALFORMED {
		t.Errorf("truncated stream = %v", o)
	}
	srv := emulator.NewServer(emulator.Script{}, emulator.WithAPIKey("right"))
	t.Cleanup(srv.Close)
	bad := responses.New(responses.Config{BaseURL: srv.URL + "/v1", APIKey: "wrong", HTTPClient: llmtest.Client(t)})
	if o := llmtest.Run(t, t.Context(), bad, request("gpt-4o", false)).Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH {
		t.Errorf("a wrong key = %v", o)
	}
}
