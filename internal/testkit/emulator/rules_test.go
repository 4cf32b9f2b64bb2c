package emulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// TestStrictRules sends requests the real APIs refuse and checks each is
// refused with the provider's status and error shape, naming the problem;
// and that the corrected request is accepted.
func TestStrictRules(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "ok"}}, OnExhausted: emulator.ExhaustedRepeatLast})
	user := `{"role":"user","content":"hi"}`
	chat := func(model, extra string, msgs ...string) string {
		if len(msgs) == 0 {
			msgs = []string{user}
		}
		return `{"model":"` + model + `","stream":true,"messages":[` + strings.Join(msgs, ",") + `]` + extra + `}`
	}
	call := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}`
	result := `{"role":"tool","tool_call_id":"c1","content":"a.txt"}`
	msg := func(role, content string) string { return `{"role":"` + role + `","content":` + content + `}` }
	cases := []struct {
		name, path, body string
		status           int
		want             string // in the error message; empty: accepted
	}{
		// OpenAI Chat Completions: model rules.
		{"gpt-4o takes no reasoning_effort", "/v1/chat/completions", chat("gpt-4o", `,"reasoning_effort":"medium"`), 400, "'reasoning_effort' is not supported with this model"},
		{"gpt-4o max_tokens above its limit", "/v1/chat/completions", chat("gpt-4o", `,"max_tokens":32000`), 400, "This model supports at most 16384 completion tokens"},
		{"gpt-4o within its limit", "/v1/chat/completions", chat("gpt-4o", `,"max_completion_tokens":16384,"temperature":0.2`), 200, ""},
		{"o3-mini refuses max_tokens", "/v1/chat/completions", chat("o3-mini", `,"max_tokens":1000`), 400, "Use 'max_completion_tokens' instead"},
		{"gpt-5 refuses an effort it lacks", "/v1/chat/completions", chat("gpt-5", `,"reasoning_effort":"xhigh"`), 400, `does not support 'xhigh'`},
		{"gpt-5 refuses temperature", "/v1/chat/completions", chat("gpt-5", `,"temperature":0.5`), 400, "'temperature' does not support 0.5"},
		{"an unknown argument", "/v1/chat/completions", chat("gpt-4o", `,"enable_thinking":true`), 400, "Unrecognized request argument supplied: enable_thinking"},
		{"a provider route refuses unknown models", "/deepseek/chat/completions", chat("gpt-4o", ""), 404, "The model `gpt-4o` does not exist"},
		{"deepseek-chat cannot switch thinking", "/deepseek/chat/completions", chat("deepseek-chat", `,"thinking":{"type":"enabled"}`), 400, "'thinking' is not supported"},
		{"a local server takes any model", "/v1/chat/completions", chat("my-local-model", `,"max_tokens":99999,"whatever":1`), 200, ""},
		// Protocol rules, any model.
		{"a tool result without its call", "/v1/chat/completions", chat("m", "", user, result), 400, "must be a response to a preceeding message with 'tool_calls'"},
		{"a call without its result", "/v1/chat/completions", chat("m", "", user, call, user), 400, "The following tool_call_ids did not have response messages: c1"},
		{"a call with its result", "/v1/chat/completions", chat("m", "", user, call, result), 200, ""},
		{"a bad tool name", "/v1/chat/completions", chat("m", `,"tools":[{"type":"function","function":{"name":"read file","parameters":{}}}]`), 400, "does not match pattern"},
		{"assistant first", "/v1/chat/completions", chat("m", "", msg("assistant", `"hello"`), user), 400, "must be a user message"},
		{"system after the conversation", "/v1/chat/completions", chat("m", "", user, msg("system", `"late"`), user), 400, "System messages must come before"},
		{"ends with the assistant", "/v1/chat/completions", chat("m", "", user, msg("assistant", `"hi"`)), 400, "Expected last role User or Tool"},
		{"an empty assistant message", "/v1/chat/completions", chat("m", "", user, msg("assistant", `""`), user), 400, "needs content or tool_calls"},
		// OpenAI Responses.
		{"responses: reasoning without its encrypted content", "/openai/v1/responses", `{"model":"gpt-5","store":false,"input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[]},{"role":"assistant","content":[{"type":"output_text","text":"x"}]},{"role":"user","content":"and?"}]}`, 404, "Items are not persisted when `store` is set to false"},
		{"responses: reasoning without its following item", "/openai/v1/responses", `{"model":"gpt-5","store":false,"input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e"},{"role":"user","content":"and?"}]}`, 400, "was provided without its required following item"},
		{"responses: a call without its output", "/openai/v1/responses", `{"model":"gpt-5","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"}]}`, 400, "No tool output found for function call c1"},
		{"responses: an output without its call", "/openai/v1/responses", `{"model":"gpt-5","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c9","output":"x"}]}`, 400, "No tool call found for function call output with call_id c9"},
		{"responses: effort on gpt-4o", "/openai/v1/responses", `{"model":"gpt-4o","input":"hi","reasoning":{"effort":"low"}}`, 400, "'reasoning.effort' is not supported with this model"},
		{"responses: encrypted reasoning on gpt-4o", "/openai/v1/responses", `{"model":"gpt-4o","input":"hi","include":["reasoning.encrypted_content"]}`, 400, "Encrypted content is not supported with this model"},
		{"responses: max_output_tokens above the limit", "/openai/v1/responses", `{"model":"gpt-4o","input":"hi","max_output_tokens":20000}`, 400, "max_output_tokens is too large"},
		{"responses: a valid reasoning replay", "/openai/v1/responses", `{"model":"gpt-5","store":false,"include":["reasoning.encrypted_content"],"reasoning":{"effort":"minimal"},"input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"e"},{"type":"function_call","call_id":"c1","name":"ls","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"a"}]}`, 200, ""},
		// Gemini.
		{"gemini: a level on a budget model", "/google/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingLevel":"high"}}}`, 400, "Thinking level is not supported for this model"},
		{"gemini: budget 0 on a model that always thinks", "/google/v1beta/models/gemini-2.5-pro:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}`, 400, "This model only works in thinking mode"},
		{"gemini: thinking on gemini-2.0-flash", "/google/v1beta/models/gemini-2.0-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":1024}}}`, 400, "Thinking is not supported for this model"},
		{"gemini: an unsigned call on gemini 3", "/google/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a"}}}]}]}`, 400, "Function call is missing a thought_signature"},
		{"gemini: a call without its response", "/v1beta/models/m:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}}}]},{"role":"user","parts":[{"text":"and?"}]}]}`, 400, "the number of function response parts is equal to the number of function call parts"},
		{"gemini: an empty part", "/v1beta/models/m:streamGenerateContent", `{"contents":[{"role":"user","parts":[{}]}]}`, 400, "required oneof field 'data'"},
		{"gemini: an unknown model", "/google/v1beta/models/gpt-4o:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, 404, "models/gpt-4o is not found"},
		{"gemini: a valid signed replay", "/google/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"ls","args":{}},"thoughtSignature":"s"}]},{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a"}}}]}],"generationConfig":{"thinkingConfig":{"thinkingLevel":"low","includeThoughts":true}}}`, 200, ""},
		// Anthropic Messages.
		{"anthropic: first message from the assistant", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":"x"}]}`, 400, `first message must use the "user" role`},
		{"anthropic: tool_result without tool_use", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`, 400, "must have a corresponding `tool_use` block"},
		{"anthropic: tool_use without tool_result", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]},{"role":"user","content":"and?"}]}`, 400, "without `tool_result` blocks immediately after: t1"},
		{"anthropic: budget not below max_tokens", "/v1/messages", `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"hi"}]}`, 400, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"anthropic: temperature with thinking", "/v1/messages", `{"model":"m","max_tokens":4000,"temperature":0.3,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"hi"}]}`, 400, "`temperature` may only be set to 1 when thinking is enabled"},
		{"anthropic: max_tokens above the model's", "/v1/messages", `{"model":"claude-3-haiku-20240307","max_tokens":8192,"messages":[{"role":"user","content":"hi"}]}`, 400, "8192 > 4096, which is the maximum allowed number of output tokens"},
		{"anthropic: thinking on a model without it", "/anthropic/v1/messages", `{"model":"claude-3-haiku-20240307","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2000},"messages":[{"role":"user","content":"hi"}]}`, 400, "thinking.type.enabled is not supported for this model"},
		{"anthropic: an effort the model lacks", "/anthropic/v1/messages", `{"model":"claude-opus-4-7","max_tokens":4096,"thinking":{"type":"adaptive"},"output_config":{"effort":"huge"},"messages":[{"role":"user","content":"hi"}]}`, 400, "output_config.effort: Input should be"},
		{"anthropic: unsigned thinking in history", "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"x"}]},{"role":"user","content":"and?"}]}`, 400, "thinking.signature: Field required"},
		{"anthropic: a valid thinking request", "/anthropic/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":20000,"thinking":{"type":"enabled","budget_tokens":16384},"messages":[{"role":"user","content":"hi"}]}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodPost, srv.URL+tc.path, bytes.NewReader([]byte(tc.body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.want == "" {
				return
			}
			// The provider's error shape: OpenAI's {"error":{message,type,param,code}},
			// Anthropic's {"type":"error","error":{type,message}} or Gemini's
			// {"error":{code,message,status}}.
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Status  string `json:"status"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Type == "" && e.Error.Status == "" {
				t.Fatalf("error body %s is not in the provider's shape: %v", body, err)
			}
			if strings.HasSuffix(tc.path, "/messages") != (e.Type == "error") {
				t.Errorf("error body %s is in the other provider's shape", body)
			}
			if !strings.Contains(e.Error.Message, tc.want) {
				t.Errorf("message %q, want it to contain %q", e.Error.Message, tc.want)
			}
		})
	}
}
