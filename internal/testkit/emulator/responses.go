package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/penguin-agent/penguin/internal/catalog"
)

// responsesAPI speaks the OpenAI Responses API: POST /v1/responses, SSE of
// named events (response.created, response.output_item.added/done, the
// text, reasoning summary and function-call argument deltas,
// response.completed or response.incomplete, error), or one response
// object when stream is false. A thinking block is a reasoning item whose
// summary is the block's text and whose encrypted content is its
// signature (a made-up one when the script sets none); a redacted thinking
// block is a reasoning item with its data as encrypted content only.
type responsesAPI struct{}

func (responsesAPI) name() string { return "responses" }

func (responsesAPI) authorized(r *http.Request, key string) bool { return keyEqual(bearer(r), key) }

func (responsesAPI) checkHeaders(*http.Request) *apiError { return nil }

func (responsesAPI) catalogID() string { return "openai" }

func (responsesAPI) parse(body []byte, wantText bool) (callInfo, *apiError) {
	var req struct {
		Model  string          `json:"model"`
		Input  json.RawMessage `json:"input"`
		Stream bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return callInfo{}, invalidRequest("", "", "We could not parse the JSON body of your request: %v", err)
	}
	if req.Model == "" {
		return callInfo{}, invalidRequest("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	info := callInfo{model: req.Model, stream: req.Stream, includeUsage: true}
	if wantText {
		var items []json.RawMessage
		if json.Unmarshal(req.Input, &items) == nil && len(items) > 0 {
			var last map[string]any
			if json.Unmarshal(items[len(items)-1], &last) == nil {
				if out, ok := last["output"].(string); ok {
					info.lastText = out
				} else {
					info.lastText = messageText(last)
				}
			}
		} else {
			var s string
			_ = json.Unmarshal(req.Input, &s)
			info.lastText = s
		}
	}
	return info, nil
}

func (responsesAPI) validate(body []byte, rt route) *apiError { return responsesRules(body, rt) }

func (responsesAPI) errorFor(f *Fault) *apiError { return openAI{}.errorFor(f) }

func (responsesAPI) writeError(w http.ResponseWriter, requestID string, e *apiError) {
	openAI{}.writeError(w, requestID, e)
}

func (responsesAPI) appendMalformed(dst []byte, body string) []byte {
	dst = append(dst, "event: response.output_text.delta\ndata: "...)
	if body == "" {
		body = `{"type":"response.output_text.delta","delta":"cut of`
	}
	dst = append(dst, body...)
	return append(dst, "\n\n"...)
}

func (responsesAPI) appendStreamError(dst []byte, f *Fault) []byte {
	e := openAI{}.errorFor(&Fault{Kind: FaultHTTPError, Status: http.StatusInternalServerError, Message: f.Message, Type: f.Type, Code: f.Code})
	dst = append(dst, "event: error\ndata: "...)
	b, _ := json.Marshal(map[string]any{"type": "error", "code": e.code, "message": e.message, "param": nil})
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// responseItems renders a turn's blocks as output items, each with its
// text deltas, in order.
type responseItem struct {
	item   map[string]any // the done item
	kind   string         // reasoning, message or function_call
	pieces []string       // summary, text or argument deltas
}

func (responsesAPI) items(c *call) []responseItem {
	t := c.turn
	var out []responseItem
	toolN := 0
	for i := range t.blocks {
		blk := &t.blocks[i]
		id := fmt.Sprintf("%s%s%d", "item_", c.idSuffix, i)
		switch blk.Type {
		case BlockThinking, BlockRedactedThinking:
			enc := blk.Signature
			if blk.Type == BlockRedactedThinking {
				enc = blk.Data
			}
			if enc == "" {
				enc = "enc-" + c.idSuffix + strconv.Itoa(i)
			}
			summary := []any{}
			if blk.Text != "" {
				summary = append(summary, map[string]any{"type": "summary_text", "text": blk.Text})
			}
			out = append(out, responseItem{kind: "reasoning", pieces: chunks(blk.Text, t.chunk),
				item: map[string]any{"type": "reasoning", "id": "rs_" + id, "summary": summary, "encrypted_content": enc}})
		case BlockText:
			out = append(out, responseItem{kind: "message", pieces: chunks(blk.Text, t.chunk),
				item: map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
					"content": []any{map[string]any{"type": "output_text", "text": blk.Text, "annotations": []any{}}}}})
		case BlockToolCall:
			out = append(out, responseItem{kind: "function_call", pieces: chunks(blk.Arguments, t.chunk),
				item: map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": c.toolID("call_", blk, toolN),
					"name": blk.Name, "arguments": blk.Arguments, "status": "completed"}})
			toolN++
		}
	}
	return out
}

func chunks(s string, size int) []string {
	var out []string
	for s != "" {
		var piece string
		piece, s = nextPiece(s, size)
		out = append(out, piece)
	}
	return out
}

func responsesUsage(u Usage) map[string]any {
	input := u.Input + u.CacheRead + u.CacheWrite
	return map[string]any{
		"input_tokens": input, "input_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
		"total_tokens": input + u.Output,
	}
}

// status is the response's status and incomplete reason for the turn's
// stop reason.
func responsesStatus(t *compiledTurn) (status, reason string) {
	r, _ := portableStop(t.turn.StopReason)
	switch {
	case t.turn.StopReason == "":
		return "completed", ""
	case r == "length":
		return "incomplete", "max_output_tokens"
	case r == "content_filter":
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

func (a responsesAPI) response(c *call, status, reason string, output []any) map[string]any {
	resp := map[string]any{
		"id": "resp_" + c.idSuffix, "object": "response", "created_at": c.created, "model": c.model,
		"status": status, "output": output, "usage": responsesUsage(c.turn.turn.Usage), "error": nil,
		"incomplete_details": nil,
	}
	if reason != "" {
		resp["incomplete_details"] = map[string]any{"reason": reason}
	}
	return resp
}

func (a responsesAPI) stream(sw *sseWriter, c *call) error {
	seq := 0
	send := func(paced bool, typ string, fields map[string]any) error {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		data, err := json.Marshal(fields)
		if err != nil {
			return err
		}
		b := append(sw.buf[:0], "event: "...)
		b = append(b, typ...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		sw.buf = append(b, "\n\n"...)
		return sw.send(paced)
	}
	if err := send(false, "response.created", map[string]any{"response": a.response(c, "in_progress", "", []any{})}); err != nil {
		return err
	}
	items := a.items(c)
	var output []any
	for i, it := range items {
		added := map[string]any{}
		for k, v := range it.item {
			added[k] = v
		}
		switch it.kind {
		case "function_call":
			added["arguments"] = ""
		case "message":
			added["content"] = []any{}
		case "reasoning":
			added["summary"] = []any{}
		}
		if err := send(false, "response.output_item.added", map[string]any{"output_index": i, "item": added}); err != nil {
			return err
		}
		for j, p := range it.pieces {
			var err error
			switch it.kind {
			case "reasoning":
				if j == 0 {
					if err = send(false, "response.reasoning_summary_part.added", map[string]any{"output_index": i, "item_id": it.item["id"], "summary_index": 0}); err != nil {
						return err
					}
				}
				err = send(true, "response.reasoning_summary_text.delta", map[string]any{"output_index": i, "item_id": it.item["id"], "summary_index": 0, "delta": p})
			case "message":
				err = send(true, "response.output_text.delta", map[string]any{"output_index": i, "item_id": it.item["id"], "content_index": 0, "delta": p})
			case "function_call":
				err = send(true, "response.function_call_arguments.delta", map[string]any{"output_index": i, "item_id": it.item["id"], "delta": p})
			}
			if err != nil {
				return err
			}
		}
		if err := send(false, "response.output_item.done", map[string]any{"output_index": i, "item": it.item}); err != nil {
			return err
		}
		output = append(output, it.item)
	}
	status, reason := responsesStatus(c.turn)
	return send(false, "response."+status, map[string]any{"response": a.response(c, status, reason, output)})
}

func (a responsesAPI) respond(w http.ResponseWriter, c *call) error {
	var output []any
	for _, it := range a.items(c) {
		output = append(output, it.item)
	}
	status, reason := responsesStatus(c.turn)
	body, err := json.Marshal(a.response(c, status, reason, output))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(body)
	return err
}

// responsesFields are the request fields the Responses API takes.
var responsesFields = []string{
	"model", "input", "instructions", "stream", "store", "include", "max_output_tokens", "reasoning", "temperature",
	"top_p", "tools", "tool_choice", "parallel_tool_calls", "previous_response_id", "metadata", "user", "text",
	"truncation", "service_tier", "prompt_cache_key", "background", "stream_options",
}

// responsesRules checks a Responses body: its items in order (a tool
// output answers an earlier call, every call gets its output, a reasoning
// item is followed by the output item it led to and carries its encrypted
// content when nothing is stored), the tools, and the model's rules.
func responsesRules(body []byte, rt route) *apiError {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return invalidRequest("", "", "We could not parse the JSON body of your request: %v", err)
	}
	for _, k := range sortedKeys(top) {
		if !slices.Contains(responsesFields, k) {
			return invalidRequest(k, "unknown_parameter", "Unknown parameter: '%s'.", k)
		}
	}
	var req struct {
		Model           string            `json:"model"`
		RawInput        json.RawMessage   `json:"input"`
		Input           []json.RawMessage `json:"-"`
		Store           *bool             `json:"store"`
		Include         []string          `json:"include"`
		MaxOutputTokens *int64            `json:"max_output_tokens"`
		Temperature     *float64          `json:"temperature"`
		Reasoning       *struct {
			Effort  *string `json:"effort"`
			Summary string  `json:"summary"`
		} `json:"reasoning"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return invalidRequest("", "", "Invalid request body: %v", err)
	}
	// The input is a list of items, or a string: one user message.
	var text string
	if json.Unmarshal(req.RawInput, &text) == nil && text != "" {
		req.Input = []json.RawMessage{json.RawMessage(`{"role":"user","content":` + string(req.RawInput) + `}`)}
	} else if err := json.Unmarshal(req.RawInput, &req.Input); err != nil {
		return invalidRequest("input", "invalid_type", "Invalid type for 'input': expected a string or an array of items.")
	}
	if len(req.Input) == 0 {
		return invalidRequest("input", "missing_required_parameter", "Missing required parameter: 'input'.")
	}
	stored := req.Store == nil || *req.Store
	for i, t := range req.Tools {
		if t.Type != "function" {
			continue
		}
		if !toolNamePattern().MatchString(t.Name) {
			return invalidRequest(fmt.Sprintf("tools[%d].name", i), "invalid_value", "Invalid 'tools[%d].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
	}
	var calls, answered []string
	for i, raw := range req.Input {
		var it struct {
			Type             string          `json:"type"`
			Role             string          `json:"role"`
			ID               string          `json:"id"`
			CallID           string          `json:"call_id"`
			Name             string          `json:"name"`
			Arguments        string          `json:"arguments"`
			EncryptedContent *string         `json:"encrypted_content"`
			Content          json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return invalidRequest(fmt.Sprintf("input[%d]", i), "invalid_type", "Invalid type for 'input[%d]': expected an object.", i)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			if e := responsesContent(i, it.Role, it.Content); e != nil {
				return e
			}
		case "function_call":
			if !toolNamePattern().MatchString(it.Name) || it.CallID == "" || !json.Valid([]byte(it.Arguments)) {
				return invalidRequest(fmt.Sprintf("input[%d]", i), "invalid_value", "Invalid function_call item input[%d]: it needs a call_id, a valid name and JSON arguments.", i)
			}
			calls = append(calls, it.CallID)
		case "function_call_output":
			if !slices.Contains(calls, it.CallID) {
				return invalidRequest(fmt.Sprintf("input[%d]", i), "invalid_value", "No tool call found for function call output with call_id %s.", it.CallID)
			}
			answered = append(answered, it.CallID)
		case "reasoning":
			if !stored && (it.EncryptedContent == nil || *it.EncryptedContent == "") {
				return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "input", message: fmt.Sprintf(
					"Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID)}
			}
			if i+1 >= len(req.Input) || !followsReasoning(req.Input[i+1]) {
				return invalidRequest("input", "invalid_value", "Item '%s' of type 'reasoning' was provided without its required following item.", it.ID)
			}
		default:
			return invalidRequest(fmt.Sprintf("input[%d].type", i), "invalid_value", "Invalid value: '%s' is not a supported input item type.", it.Type)
		}
	}
	for _, c := range calls {
		if !slices.Contains(answered, c) {
			return invalidRequest("input", "invalid_value", "No tool output found for function call %s.", c)
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
	if v := req.MaxOutputTokens; v != nil {
		if *v < 16 {
			return invalidRequest("max_output_tokens", "integer_below_min_value", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got %d instead.", *v)
		}
		if m.Output > 0 && *v > m.Output {
			return invalidRequest("max_output_tokens", "invalid_value", "max_output_tokens is too large: %d. This model supports at most %d output tokens.", *v, m.Output)
		}
	}
	if len(req.Tools) > 0 && !m.Tools {
		return invalidRequest("tools", "unsupported_parameter", "Unsupported parameter: 'tools' is not supported with this model.")
	}
	if req.Temperature != nil && !m.Temperature {
		return invalidRequest("temperature", "unsupported_parameter", "Unsupported parameter: 'temperature' is not supported with this model.")
	}
	if slices.Contains(req.Include, "reasoning.encrypted_content") && !m.Reasoning {
		return invalidRequest("include", "unsupported_value", "Encrypted content is not supported with this model.")
	}
	if r := req.Reasoning; r != nil && r.Effort != nil {
		ctl := m.Controls
		if ctl == nil {
			ctl = &catalog.Controls{}
		}
		if !m.Reasoning || len(ctl.Efforts) == 0 {
			return invalidRequest("reasoning.effort", "unsupported_parameter", "Unsupported parameter: 'reasoning.effort' is not supported with this model.")
		}
		if !slices.Contains(ctl.Efforts, *r.Effort) {
			return invalidRequest("reasoning.effort", "unsupported_value", "Unsupported value: 'reasoning.effort' does not support '%s' with this model. Supported values are: %s.", *r.Effort, quoteList(ctl.Efforts))
		}
	}
	return nil
}

// followsReasoning reports whether an item may follow a reasoning item:
// the output it led to (an assistant message, a function call, more
// reasoning).
func followsReasoning(raw json.RawMessage) bool {
	var it struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	_ = json.Unmarshal(raw, &it)
	return it.Type == "function_call" || it.Type == "reasoning" || ((it.Type == "message" || it.Type == "") && it.Role == "assistant")
}

// responsesContent checks a message item's content parts for its role.
func responsesContent(i int, role string, content json.RawMessage) *apiError {
	if s := strings.TrimSpace(string(content)); strings.HasPrefix(s, `"`) {
		return nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL string  `json:"image_url"`
	}
	if err := json.Unmarshal(content, &parts); err != nil || len(parts) == 0 {
		return invalidRequest(fmt.Sprintf("input[%d].content", i), "invalid_type", "Invalid type for 'input[%d].content': expected a string or a non-empty array.", i)
	}
	for j, p := range parts {
		var ok bool
		switch role {
		case "user", "system", "developer":
			ok = (p.Type == "input_text" && p.Text != nil) || (p.Type == "input_image" && p.ImageURL != "")
		case "assistant":
			ok = (p.Type == "output_text" || p.Type == "refusal") && p.Text != nil
		}
		if !ok {
			return invalidRequest(fmt.Sprintf("input[%d].content[%d]", i, j), "invalid_value",
				"Invalid value: '%s'. A %s message takes %s content.", p.Type, role, map[bool]string{true: "output_text", false: "input_text and input_image"}[role == "assistant"])
		}
	}
	return nil
}
