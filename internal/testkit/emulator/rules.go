package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/penguin-agent/penguin/internal/catalog"
)

// The emulator is strict: it refuses what the real APIs refuse, with their
// status and error shape, so a test catches a request a provider would
// turn down. Two kinds of rule apply:
//
//   - protocol rules, on every request: message order and roles, every
//     tool call answered by a tool result and every tool result answering
//     a call, the tool name pattern, content shapes;
//   - model rules, when the request names a model of the catalog provider
//     the route imitates: the output-token parameter and its limit,
//     reasoning parameters only on a model that reasons and only with the
//     values it takes, a temperature only where the model takes one (and,
//     on Anthropic, never with thinking), and the request fields that
//     provider knows (an unknown one is "Unrecognized request argument").
//
// A route is a catalog provider's when its path starts with the provider's
// id ("/deepseek/chat/completions", "/anthropic/v1/messages"): then a
// model the catalog does not list is refused as not found. The plain
// routes ("/v1/chat/completions", "/v1/messages") imitate OpenAI and
// Anthropic for their catalog models and a local server (any model id, no
// model rules) for the rest, which is what the demos and the tests with
// made-up model ids use.
//
// The rules read the catalog's facts (limits, reasoning controls as the
// provider documents them), not the gateway's request shaping, so the
// gateway's choices are checked against the data rather than against
// themselves.

// route is what a request's path says about the provider imitated.
type route struct {
	// provider is the catalog provider imitated; nil for a local server.
	provider *catalog.Provider
	// strict refuses models the provider does not list.
	strict bool
}

// model returns the catalog model the request names, or nil.
func (rt route) model(id string) *catalog.Model { return rt.provider.Model(id) }

// toolNamePattern is the tool name both APIs accept.
var toolNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// chatCommonFields are the Chat Completions fields every provider takes.
var chatCommonFields = []string{
	"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"tools", "tool_choice", "parallel_tool_calls", "stop", "n", "seed", "user", "response_format", "frequency_penalty",
	"presence_penalty", "logprobs", "top_logprobs", "metadata", "store", "service_tier",
}

// dialectFields are the reasoning fields each dialect adds.
var dialectFields = map[string][]string{
	catalog.DialectEffort:       {"reasoning_effort"},
	catalog.DialectDeepSeek:     {"thinking", "reasoning_effort"},
	catalog.DialectThinkingType: {"thinking"},
	catalog.DialectQwen:         {"enable_thinking", "thinking_budget"},
	catalog.DialectOpenRouter:   {"reasoning", "reasoning_effort", "provider", "transforms"},
}

func invalidRequest(param, code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, code: code, message: fmt.Sprintf(format, args...)}
}

// chatRules checks a Chat Completions body.
func chatRules(body []byte, rt route) *apiError {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return invalidRequest("", "", "We could not parse the JSON body of your request: %v", err)
	}
	var req struct {
		Model               string            `json:"model"`
		Messages            []json.RawMessage `json:"messages"`
		MaxTokens           *int64            `json:"max_tokens"`
		MaxCompletionTokens *int64            `json:"max_completion_tokens"`
		Temperature         *float64          `json:"temperature"`
		Tools               []struct {
			Type     string `json:"type"`
			Function *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ReasoningEffort *string `json:"reasoning_effort"`
		Thinking        *struct {
			Type string `json:"type"`
		} `json:"thinking"`
		EnableThinking *bool  `json:"enable_thinking"`
		ThinkingBudget *int64 `json:"thinking_budget"`
		Reasoning      *struct {
			Enabled   *bool   `json:"enabled"`
			Effort    *string `json:"effort"`
			MaxTokens *int64  `json:"max_tokens"`
		} `json:"reasoning"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return invalidRequest("", "", "Invalid request body: %v", err)
	}
	if e := chatMessages(req.Messages); e != nil {
		return e
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function == nil {
			return invalidRequest(fmt.Sprintf("tools[%d].type", i), "invalid_value", "Invalid value for 'tools[%d].type': expected 'function'.", i)
		}
		if !toolNamePattern().MatchString(t.Function.Name) {
			return invalidRequest(fmt.Sprintf("tools[%d].function.name", i), "invalid_value",
				"Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		if p := strings.TrimSpace(string(t.Function.Parameters)); p != "" && !strings.HasPrefix(p, "{") {
			return invalidRequest(fmt.Sprintf("tools[%d].function.parameters", i), "invalid_type",
				"Invalid type for 'tools[%d].function.parameters': expected an object.", i)
		}
	}
	if rt.provider == nil {
		return nil
	}
	m := rt.model(req.Model)
	if m == nil {
		if rt.strict {
			return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found",
				message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model)}
		}
		return nil
	}
	dialect := rt.provider.Dialect
	allowed := append(slices.Clone(chatCommonFields), dialectFields[dialect]...)
	for _, k := range sortedKeys(top) {
		if !slices.Contains(allowed, k) {
			return invalidRequest(k, "unknown_parameter", "Unrecognized request argument supplied: %s", k)
		}
	}

	// The output-token parameter and its limit.
	limit := m.Output
	switch {
	case req.MaxTokens != nil && req.MaxCompletionTokens != nil:
		return invalidRequest("max_tokens", "invalid_value", "max_tokens and max_completion_tokens cannot both be set; use max_completion_tokens.")
	case req.MaxTokens != nil && rt.provider.OutputParam == "max_completion_tokens" && m.Reasoning:
		return invalidRequest("max_tokens", "unsupported_parameter",
			"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
	}
	for _, mt := range []struct {
		name string
		v    *int64
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if mt.v == nil {
			continue
		}
		if *mt.v < 1 {
			return invalidRequest(mt.name, "integer_below_min_value", "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", mt.name, *mt.v)
		}
		if limit > 0 && *mt.v > limit {
			return invalidRequest(mt.name, "invalid_value",
				"%s is too large: %d. This model supports at most %d completion tokens, whereas you provided %d.", mt.name, *mt.v, limit, *mt.v)
		}
	}
	if len(req.Tools) > 0 && !m.Tools {
		return invalidRequest("tools", "unsupported_parameter", "Unsupported parameter: 'tools' is not supported with this model.")
	}
	if req.Temperature != nil && !m.Temperature {
		return invalidRequest("temperature", "unsupported_value",
			"Unsupported value: 'temperature' does not support %v with this model. Only the default (1) value is supported.", *req.Temperature)
	}

	// Reasoning parameters: only on a model that reasons, only with the
	// controls it documents.
	ctl := m.Controls
	if ctl == nil {
		ctl = &catalog.Controls{}
	}
	effort := func(param, v string) *apiError {
		if len(ctl.Efforts) == 0 {
			return invalidRequest(param, "unsupported_parameter", "Unsupported parameter: '%s' is not supported with this model.", param)
		}
		if !slices.Contains(ctl.Efforts, v) {
			return invalidRequest(param, "unsupported_value", "Unsupported value: '%s' does not support '%s' with this model. Supported values are: %s.",
				param, v, quoteList(ctl.Efforts))
		}
		return nil
	}
	if req.ReasoningEffort != nil {
		if e := effort("reasoning_effort", *req.ReasoningEffort); e != nil {
			return e
		}
	}
	if req.Thinking != nil {
		switch {
		case req.Thinking.Type != "enabled" && req.Thinking.Type != "disabled":
			return invalidRequest("thinking.type", "invalid_value", "Invalid value for 'thinking.type': expected 'enabled' or 'disabled', got '%s'.", req.Thinking.Type)
		case !m.Reasoning:
			return invalidRequest("thinking", "unsupported_parameter", "Unsupported parameter: 'thinking' is not supported with this model.")
		case !ctl.Toggle:
			return invalidRequest("thinking.type", "unsupported_value", "Unsupported value: this model's thinking cannot be switched.")
		case req.Thinking.Type == "disabled" && req.ReasoningEffort != nil:
			return invalidRequest("reasoning_effort", "invalid_value", "reasoning_effort cannot be set while thinking is disabled.")
		}
	}
	if req.EnableThinking != nil && !ctl.Toggle {
		return invalidRequest("enable_thinking", "unsupported_parameter", "The parameter enable_thinking is not supported by this model.")
	}
	if req.ThinkingBudget != nil && (ctl.Budget == nil || *req.ThinkingBudget < ctl.Budget.Min || (ctl.Budget.Max > 0 && *req.ThinkingBudget > ctl.Budget.Max)) {
		return invalidRequest("thinking_budget", "invalid_value", "The parameter thinking_budget is not supported by this model or is out of range.")
	}
	if r := req.Reasoning; r != nil {
		switch {
		case !m.Reasoning:
			return invalidRequest("reasoning", "unsupported_parameter", "Reasoning is not supported for this model.")
		case r.Effort != nil:
			if e := effort("reasoning.effort", *r.Effort); e != nil {
				return e
			}
		case r.MaxTokens != nil && ctl.Budget == nil:
			return invalidRequest("reasoning.max_tokens", "unsupported_parameter", "reasoning.max_tokens is not supported for this model.")
		case r.Enabled != nil && !*r.Enabled && !ctl.Toggle:
			return invalidRequest("reasoning.enabled", "unsupported_value", "Reasoning is mandatory for this model and cannot be disabled.")
		}
	}
	return nil
}

// chatMessages checks message roles, order and tool-call pairing.
func chatMessages(raw []json.RawMessage) *apiError {
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var pending []string // calls of the last assistant message not yet answered
	seenNonSystem := false
	for i, r := range raw {
		var m struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  []call          `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		}
		if err := json.Unmarshal(r, &m); err != nil {
			return invalidRequest(fmt.Sprintf("messages[%d]", i), "invalid_type", "Invalid type for 'messages[%d]': expected an object.", i)
		}
		content := strings.TrimSpace(string(m.Content))
		if m.Role != "tool" && len(pending) > 0 {
			return invalidRequest("messages", "invalid_value",
				"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
				strings.Join(pending, ", "))
		}
		switch m.Role {
		case "system", "developer":
			if seenNonSystem {
				return invalidRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value", "System messages must come before the conversation (messages[%d]).", i)
			}
		case "user":
			seenNonSystem = true
			if e := userContent(i, content); e != nil {
				return e
			}
		case "assistant":
			if !seenNonSystem {
				return invalidRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value", "The first message after the system prompt must be a user message, not an assistant message (messages[%d]).", i)
			}
			if (content == "" || content == "null" || content == `""`) && len(m.ToolCalls) == 0 {
				return invalidRequest(fmt.Sprintf("messages[%d].content", i), "invalid_value",
					"Invalid value for 'messages[%d].content': an assistant message needs content or tool_calls.", i)
			}
			for j, c := range m.ToolCalls {
				switch {
				case c.ID == "":
					return invalidRequest(fmt.Sprintf("messages[%d].tool_calls[%d].id", i, j), "missing_required_parameter", "Missing required parameter: 'messages[%d].tool_calls[%d].id'.", i, j)
				case c.Type != "function":
					return invalidRequest(fmt.Sprintf("messages[%d].tool_calls[%d].type", i, j), "invalid_value", "Invalid value for 'messages[%d].tool_calls[%d].type': expected 'function'.", i, j)
				case !toolNamePattern().MatchString(c.Function.Name):
					return invalidRequest(fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j), "invalid_value", "Invalid 'messages[%d].tool_calls[%d].function.name': string does not match pattern.", i, j)
				case !json.Valid([]byte(c.Function.Arguments)):
					return invalidRequest(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), "invalid_value", "Invalid 'messages[%d].tool_calls[%d].function.arguments': not valid JSON.", i, j)
				}
				pending = append(pending, c.ID)
			}
		case "tool":
			j := slices.Index(pending, m.ToolCallID)
			if j < 0 {
				return invalidRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			pending = slices.Delete(pending, j, j+1)
			if content == "" || content == "null" {
				return invalidRequest(fmt.Sprintf("messages[%d].content", i), "invalid_value", "Invalid value for 'messages[%d].content': a tool message needs content.", i)
			}
		default:
			return invalidRequest(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", m.Role)
		}
	}
	if len(pending) > 0 {
		return invalidRequest("messages", "invalid_value",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
			strings.Join(pending, ", "))
	}
	if n := len(raw); n > 0 {
		var last struct {
			Role string `json:"role"`
		}
		_ = json.Unmarshal(raw[n-1], &last)
		if last.Role != "user" && last.Role != "tool" {
			return invalidRequest("messages", "invalid_value", "Expected last role User or Tool but got %s.", last.Role)
		}
	}
	return nil
}

// userContent checks a user message's content: a string, or parts.
func userContent(i int, content string) *apiError {
	if strings.HasPrefix(content, `"`) {
		return nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal([]byte(content), &parts); err != nil || len(parts) == 0 {
		return invalidRequest(fmt.Sprintf("messages[%d].content", i), "invalid_type",
			"Invalid type for 'messages[%d].content': expected a string or an array of content parts.", i)
	}
	for j, p := range parts {
		switch {
		case p.Type == "text" && p.Text != nil:
		case p.Type == "image_url" && p.ImageURL != nil && p.ImageURL.URL != "":
		default:
			return invalidRequest(fmt.Sprintf("messages[%d].content[%d]", i, j), "invalid_value",
				"Invalid content part messages[%d].content[%d]: a text part needs text and an image_url part needs image_url.url.", i, j)
		}
	}
	return nil
}

// anthropicRules checks a Messages body.
func anthropicRules(body []byte, rt route) *apiError {
	bad := func(format string, args ...any) *apiError {
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: fmt.Sprintf(format, args...)}
	}
	var req struct {
		Model     string   `json:"model"`
		MaxTokens int64    `json:"max_tokens"`
		System    any      `json:"system"`
		Temp      *float64 `json:"temperature"`
		TopK      *int64   `json:"top_k"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		Thinking *struct {
			Type         string `json:"type"`
			BudgetTokens *int64 `json:"budget_tokens"`
		} `json:"thinking"`
		OutputConfig *struct {
			Effort string `json:"effort"`
		} `json:"output_config"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return bad("There was an issue with your request body: %v", err)
	}
	for i, t := range req.Tools {
		if !toolNamePattern().MatchString(t.Name) {
			return bad("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
		}
	}
	var prevUses []string
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return bad("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && m.Role != "user" {
			return bad("messages: first message must use the \"user\" role")
		}
		var blocks []struct {
			Type      string  `json:"type"`
			ID        string  `json:"id"`
			Name      string  `json:"name"`
			ToolUseID string  `json:"tool_use_id"`
			Signature *string `json:"signature"`
			Text      *string `json:"text"`
		}
		if c := strings.TrimSpace(string(m.Content)); strings.HasPrefix(c, "[") {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return bad("messages.%d.content: Input should be a valid list", i)
			}
		} else if c == "" || c == `""` {
			return bad("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		var uses, results []string
		for j, b := range blocks {
			switch b.Type {
			case "tool_use":
				if m.Role != "assistant" {
					return bad("messages.%d.content.%d: tool_use blocks are only allowed in assistant messages", i, j)
				}
				if !toolNamePattern().MatchString(b.Name) {
					return bad("messages.%d.content.%d.tool_use.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i, j)
				}
				uses = append(uses, b.ID)
			case "tool_result":
				if m.Role != "user" {
					return bad("messages.%d.content.%d: tool_result blocks are only allowed in user messages", i, j)
				}
				if !slices.Contains(prevUses, b.ToolUseID) {
					return bad("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				results = append(results, b.ToolUseID)
			case "thinking":
				if m.Role != "assistant" {
					return bad("messages.%d.content.%d: thinking blocks are only allowed in assistant messages", i, j)
				}
				if b.Signature == nil || *b.Signature == "" {
					return bad("messages.%d.content.%d.thinking.signature: Field required", i, j)
				}
			case "text":
				if b.Text == nil || *b.Text == "" {
					return bad("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
			}
		}
		if len(prevUses) > 0 {
			var missing []string
			for _, u := range prevUses {
				if !slices.Contains(results, u) {
					missing = append(missing, u)
				}
			}
			if len(missing) > 0 {
				return bad("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
					i-1, strings.Join(missing, ", "))
			}
		}
		prevUses = uses
	}
	if len(prevUses) > 0 {
		return bad("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
			len(req.Messages)-1, strings.Join(prevUses, ", "))
	}

	thinkingOn := req.Thinking != nil && req.Thinking.Type != "disabled"
	if thinkingOn && req.Temp != nil && *req.Temp != 1 {
		return bad("`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking")
	}
	if thinkingOn && req.TopK != nil {
		return bad("`top_k` cannot be set when thinking is enabled or in adaptive mode.")
	}
	if t := req.Thinking; t != nil && t.Type == "enabled" {
		switch {
		case t.BudgetTokens == nil:
			return bad("thinking.enabled.budget_tokens: Field required")
		case *t.BudgetTokens < 1024:
			return bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		case *t.BudgetTokens >= req.MaxTokens:
			return bad("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
		}
	}
	if rt.provider == nil {
		return nil
	}
	m := rt.model(req.Model)
	if m == nil {
		if rt.strict {
			return &apiError{status: http.StatusNotFound, typ: "not_found_error", message: "model: " + req.Model}
		}
		return nil
	}
	if len(req.Tools) > 0 && !m.Tools {
		return bad("tools: this model does not support tool use")
	}
	if m.Output > 0 && req.MaxTokens > m.Output {
		return bad("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s", req.MaxTokens, m.Output, req.Model)
	}
	if req.Temp != nil && !m.Temperature {
		return bad("temperature: this model does not support the temperature parameter")
	}
	ctl := m.Controls
	if ctl == nil {
		ctl = &catalog.Controls{}
	}
	if t := req.Thinking; t != nil {
		switch {
		case t.Type == "enabled" && ctl.Budget == nil:
			return bad("thinking.type.enabled is not supported for this model. Use thinking.type.adaptive and output_config.effort to control thinking behavior.")
		case t.Type == "adaptive" && len(ctl.Efforts) == 0:
			return bad("adaptive thinking is not supported on this model")
		case t.Type == "disabled" && !ctl.Toggle && ctl.Budget == nil && len(ctl.Efforts) == 0:
			return bad("thinking cannot be disabled on this model")
		}
	}
	if oc := req.OutputConfig; oc != nil && oc.Effort != "" && !slices.Contains(ctl.Efforts, oc.Effort) {
		if len(ctl.Efforts) == 0 {
			return bad("output_config.effort: This model does not support the effort parameter.")
		}
		return bad("output_config.effort: Input should be %s", quoteList(ctl.Efforts))
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
