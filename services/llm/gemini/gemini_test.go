package gemini_test

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
	"github.com/penguin-agent/penguin/services/llm/gemini"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, turns ...emulator.Turn) (*emulator.Server, *gemini.Adapter) {
	t.Helper()
	srv := emulator.NewServer(emulator.Script{Turns: turns}, emulator.WithAPIKey("g-key"))
	t.Cleanup(srv.Close)
	return srv, gemini.New(gemini.Config{BaseURL: srv.URL + "/google/v1beta", APIKey: "g-key", HTTPClient: llmtest.Client(t), IdleTimeout: 5 * time.Second})
}

func request(model string, msgs ...*penguinv1.OmniMessage) *stream.Request {
	if len(msgs) == 0 {
		msgs = []*penguinv1.OmniMessage{omni.UserText("hello")}
	}
	return &stream.Request{Provider: "google", Model: model, Messages: msgs, System: "be brief", MaxTokens: 1000,
		Spec: stream.ModelSpec{ID: model, Known: true, Reasoning: true, Thinking: stream.ThinkingLevels{
			penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "medium",
		}},
		Thinking: penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM,
		Tools:    []*penguinv1.ToolDefinition{{Name: "read_file", Parameters: `{"type":"object","properties":{"path":{"type":"string"}}}`}},
	}
}

func TestTextAndUsage(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Thinking: "Considering.", Text: "Hello there.", Usage: emulator.Usage{Input: 20, Output: 30, Reasoning: 12, CacheRead: 5}})
	r := llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview"))
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || r.Texts() != "Hello there." {
		t.Fatalf("outcome %v\n%s", r.Outcome, llmtest.Dump(r.Frames))
	}
	if th := r.Thinking(); len(th) != 1 || th[0].GetThinking() != "Considering." {
		t.Errorf("thinking = %v", th)
	}
	// Thoughts are counted apart from the candidates: output has both.
	if u := r.Usage().GetRequest(); u.GetOutput() != 30 || u.GetReasoning() != 12 || u.GetTotal() != 55 || u.GetCacheRead() != 5 {
		t.Errorf("usage = %v", u)
	}
	req := srv.Requests()[0]
	if req.Header.Get("X-Goog-Api-Key") != "g-key" || !strings.HasSuffix(req.Path, "/models/gemini-3.1-pro-preview:streamGenerateContent") {
		t.Errorf("request %s %v", req.Path, req.Header)
	}
	gc := req.Body["generationConfig"].(map[string]any)
	if gc["maxOutputTokens"] != float64(1000) || gc["thinkingConfig"].(map[string]any)["thinkingLevel"] != "medium" {
		t.Errorf("generationConfig = %v", gc)
	}
	if si := req.Body["systemInstruction"].(map[string]any); si["parts"].([]any)[0].(map[string]any)["text"] != "be brief" {
		t.Errorf("systemInstruction = %v", si)
	}
}

// TestThoughtSignaturesRoundTrip: the signatures Gemini put on a thought
// and on a function call go back on the same parts; a call from another
// provider gets the documented placeholder, so Gemini 3 accepts it.
func TestThoughtSignaturesRoundTrip(t *testing.T) {
	srv, a := setup(t,
		emulator.Turn{Thinking: "Read the file first.", Signature: "SIG-THOUGHT",
			ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: `{"path":"a"}`, Signature: "SIG-CALL"}}},
		emulator.Turn{Text: "It says hello."},
		emulator.Turn{Text: "Fine."},
	)
	hist := []*penguinv1.OmniMessage{omni.UserText("read a")}
	r := llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview", hist...))
	calls := r.ToolCalls()
	if len(calls) != 1 || !strings.Contains(string(calls[0].GetFidelity()), "SIG-CALL") {
		t.Fatalf("calls = %v\n%s", calls, llmtest.Dump(r.Frames))
	}
	hist = append(hist, r.Complete()...)
	hist = append(hist, omni.ToolCallOutput(calls[0].GetToolCallId(), "hello", penguinv1.StopReason_STOP_REASON_COMPLETED))
	if r2 := llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview", hist...)); r2.Texts() != "It says hello." {
		t.Fatalf("second answer: %v\n%s", r2.Outcome, llmtest.Dump(r2.Frames))
	}
	var sent struct {
		Contents []struct {
			Role  string            `json:"role"`
			Parts []json.RawMessage `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(srv.Requests()[1].RawBody, &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Contents) != 3 || sent.Contents[1].Role != "model" {
		t.Fatalf("contents = %+v", sent.Contents)
	}
	model := string(sent.Contents[1].Parts[0]) + string(sent.Contents[1].Parts[1])
	if !strings.Contains(model, `"thought":true,"thoughtSignature":"SIG-THOUGHT"`) || !strings.Contains(model, `"thoughtSignature":"SIG-CALL"`) {
		t.Errorf("model parts = %s", model)
	}
	if fr := string(sent.Contents[2].Parts[0]); !strings.Contains(fr, `"functionResponse":{"name":"read_file","response":{"output":"hello"}}`) {
		t.Errorf("function response = %s", fr)
	}

	// A call another provider made, moved to Gemini 3.
	foreign := []*penguinv1.OmniMessage{omni.UserText("read b"), omni.ToolCall("toolu_1", "read_file", `{"path":"b"}`),
		omni.ToolCallOutput("toolu_1", "bye", penguinv1.StopReason_STOP_REASON_COMPLETED)}
	if r3 := llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview", foreign...)); r3.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Errorf("a foreign call: %v", r3.Outcome)
	}
}

func TestStopsAndFailures(t *testing.T) {
	srv, a := setup(t,
		emulator.Turn{Text: "A long answer", StopReason: "length"},
		emulator.Turn{Text: "x", StopReason: "SAFETY"},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: http.StatusTooManyRequests, RetryAfter: "2"}},
		emulator.Turn{Text: "partial answer here", Fault: &emulator.Fault{Kind: emulator.FaultTruncate, After: 1}},
	)
	o := llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview")).Outcome
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || !strings.Contains(o.GetMessage(), "MAX_TOKENS") {
		t.Errorf("MAX_TOKENS = %v", o)
	}
	o = llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview")).Outcome
	if !strings.Contains(o.GetMessage(), "finishReason SAFETY") {
		t.Errorf("SAFETY = %v", o)
	}
	o = llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview")).Outcome
	if o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT || o.GetRetryAfterMs() != 2000 || !strings.Contains(o.GetMessage(), "RESOURCE_EXHAUSTED") {
		t.Errorf("429 = %v", o)
	}
	o = llmtest.Run(t, t.Context(), a, request("gemini-3.1-pro-preview")).Outcome
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_MALFORMED {
		t.Errorf("a stream without a finish reason = %v", o)
	}
	// Gemini answers a bad key with 400 INVALID_ARGUMENT: it is auth.
	bad := gemini.New(gemini.Config{BaseURL: srv.URL + "/v1beta", APIKey: "wrong", HTTPClient: llmtest.Client(t)})
	if o := llmtest.Run(t, t.Context(), bad, request("gemini-3.1-pro-preview")).Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH {
		t.Errorf("a wrong key = %v", o)
	}
}

// TestToolsAndTheirEdits checks the tools' JSON, encoded once and kept
// (translate.ToolEncodings): every function declaration in one group, and
// a tool whose description or schema changes under the same name sent as
// it is now, not as it was kept.
func TestToolsAndTheirEdits(t *testing.T) {
	srv, a := setup(t, emulator.Turn{Text: "one"}, emulator.Turn{Text: "two"}, emulator.Turn{Text: "three"})
	schema := `{"type":"object","properties":{"path":{"type":"string"}}}`
	edits := [][]*penguinv1.ToolDefinition{
		{{Name: "read_file", Description: "Reads.", Parameters: schema}, {Name: "noop"}},
		{{Name: "read_file", Description: "Reads a file.", Parameters: schema}, {Name: "noop"}},
		{{Name: "read_file", Description: "Reads a file.", Parameters: `{"type":"object","properties":{"file":{"type":"string"}}}`}, {Name: "noop", Parameters: "null"}},
	}
	for i, tools := range edits {
		req := request("gemini-3.1-pro-preview")
		req.Tools = tools
		if r := llmtest.Run(t, t.Context(), a, req); r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			t.Fatalf("request %d: outcome %v", i, r.Outcome)
		}
		var got any = srv.Requests()[i].Body["tools"]
		var want []map[string][]map[string]any
		var decls []map[string]any
		for _, tool := range tools {
			d := map[string]any{"name": tool.GetName()}
			if tool.GetDescription() != "" {
				d["description"] = tool.GetDescription()
			}
			if p := tool.GetParameters(); p != "" && p != "null" {
				var s any
				if err := json.Unmarshal([]byte(p), &s); err != nil {
					t.Fatal(err)
				}
				d["parametersJsonSchema"] = s
			}
			decls = append(decls, d)
		}
		want = append(want, map[string][]map[string]any{"functionDeclarations": decls})
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("request %d: tools %s, want %s", i, gotJSON, wantJSON)
		}
	}
}
