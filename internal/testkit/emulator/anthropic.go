package emulator

import (
	"encoding/json"
	"net/http"
)

// anthropic speaks Anthropic Messages: POST /v1/messages, SSE of named
// events (message_start, content_block_start/delta/stop, message_delta,
// message_stop, ping, error), or one message object when stream is false.
type anthropic struct{}

func (anthropic) name() string { return "anthropic" }

func (anthropic) authorized(r *http.Request, key string) bool {
	if k := r.Header.Get("x-api-key"); k != "" {
		return keyEqual(k, key)
	}
	return keyEqual(bearer(r), key)
}

func (anthropic) parse(body []byte, wantText bool) (callInfo, *apiError) {
	var req struct {
		Model     string            `json:"model"`
		MaxTokens *int              `json:"max_tokens"`
		Messages  []json.RawMessage `json:"messages"`
		Stream    bool              `json:"stream"`
	}
	bad := func(msg string) (callInfo, *apiError) {
		return callInfo{}, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: msg}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return bad("There was an issue with your request body: " + err.Error())
	}
	switch {
	case req.Model == "":
		return bad("model: Field required")
	case req.MaxTokens == nil:
		return bad("max_tokens: Field required")
	case *req.MaxTokens < 1:
		return bad("max_tokens: Input should be greater than or equal to 1")
	case len(req.Messages) == 0:
		return bad("messages: at least one message is required")
	}
	info := callInfo{model: req.Model, stream: req.Stream}
	if wantText {
		info.lastText = lastMessageText(req.Messages)
	}
	return info, nil
}

func (anthropic) validate(body []byte, rt route) *apiError { return anthropicRules(body, rt) }

func (anthropic) catalogID() string { return "anthropic" }

// checkHeaders enforces the anthropic-version header, as the real API does.
func (anthropic) checkHeaders(r *http.Request) *apiError {
	if r.Header.Get("anthropic-version") == "" {
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: "anthropic-version: header is required"}
	}
	return nil
}

// anthropicErrorDefaults are the type and message Anthropic sends for a
// status.
func anthropicErrorDefaults(status int) (typ, msg string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", "Invalid request."
	case http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "not_found_error", "The requested resource could not be found."
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."
	case http.StatusGatewayTimeout:
		return "timeout_error", "Request timed out."
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", "Invalid request."
}

func (anthropic) errorFor(f *Fault) *apiError {
	status := f.Status
	if f.Kind == FaultAuth {
		status = http.StatusUnauthorized
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	typ, msg := anthropicErrorDefaults(status)
	e := &apiError{status: status, typ: typ, message: msg, body: f.Body, retryAfter: f.RetryAfter}
	if f.Type != "" {
		e.typ = f.Type
	}
	if f.Message != "" {
		e.message = f.Message
	}
	return e
}

// appendAnthropicError appends {"type":"error","error":{"type","message"}}
// and, when known, the request_id the API adds to error bodies.
func appendAnthropicError(dst []byte, e *apiError, requestID string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = appendJSONString(dst, e.typ)
	dst = append(dst, `,"message":`...)
	dst = appendJSONString(dst, e.message)
	dst = append(dst, '}')
	if requestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendJSONString(dst, requestID)
	}
	return append(dst, '}')
}

func (anthropic) writeError(w http.ResponseWriter, requestID string, e *apiError) {
	writeErrorBody(w, e, func() []byte { return appendAnthropicError(nil, e, requestID) })
}

func (anthropic) appendMalformed(dst []byte, body string) []byte {
	dst = append(dst, "event: content_block_delta\ndata: "...)
	if body == "" {
		body = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut of`
	}
	dst = append(dst, body...)
	return append(dst, "\n\n"...)
}

func (a anthropic) appendStreamError(dst []byte, f *Fault) []byte {
	e := a.errorFor(&Fault{Kind: FaultHTTPError, Status: 529, Message: f.Message, Type: f.Type})
	dst = append(dst, "event: error\ndata: "...)
	dst = appendAnthropicError(dst, e, "")
	return append(dst, "\n\n"...)
}

func anthropicStop(t *compiledTurn) string {
	if t.turn.StopReason == "" {
		if t.tools > 0 {
			return "tool_use"
		}
		return "end_turn"
	}
	switch r, ok := portableStop(t.turn.StopReason); {
	case !ok:
		return r
	case r == "stop":
		return "end_turn"
	case r == "length":
		return "max_tokens"
	case r == "tool_calls":
		return "tool_use"
	default:
		return "refusal"
	}
}

// eventWriter builds one request's named SSE events.
type eventWriter struct {
	sw *sseWriter
}

// open starts an event named name whose data begins with {"type":"name".
func (ew eventWriter) open(name string) []byte {
	b := append(ew.sw.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	return append(b, '"')
}

func (ew eventWriter) close(b []byte, paced bool) error {
	ew.sw.buf = append(b, "}\n\n"...)
	return ew.sw.send(paced)
}

func (ew eventWriter) blockStart(index int, block func(b []byte) []byte) error {
	b := ew.open("content_block_start")
	b = append(b, `,"index":`...)
	b = appendInt(b, index)
	b = append(b, `,"content_block":`...)
	b = block(b)
	return ew.close(b, false)
}

func (ew eventWriter) blockDelta(index int, deltaType, field, value string) error {
	b := ew.open("content_block_delta")
	b = append(b, `,"index":`...)
	b = appendInt(b, index)
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, deltaType...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = appendJSONString(b, value)
	b = append(b, '}')
	return ew.close(b, true)
}

func (ew eventWriter) blockStop(index int) error {
	b := ew.open("content_block_stop")
	b = append(b, `,"index":`...)
	b = appendInt(b, index)
	return ew.close(b, false)
}

func (ew eventWriter) ping() error {
	return ew.close(ew.open("ping"), false)
}

// deltas sends s in pieces as deltaType deltas of block index.
func (ew eventWriter) deltas(index int, deltaType, field, s string, size int) error {
	for s != "" {
		var piece string
		piece, s = nextPiece(s, size)
		if err := ew.blockDelta(index, deltaType, field, piece); err != nil {
			return err
		}
	}
	return nil
}

func (a anthropic) stream(sw *sseWriter, c *call) error {
	t := c.turn
	u := t.turn.Usage
	ew := eventWriter{sw: sw}

	b := ew.open("message_start")
	b = append(b, `,"message":{"id":"msg_`...)
	b = append(b, c.idSuffix...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, c.model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = appendInt(b, u.Input)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, u.CacheWrite)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = appendInt(b, u.CacheRead)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = appendInt(b, u.CacheWrite)
	b = append(b, `,"ephemeral_1h_input_tokens":0}`...)
	// Like the real API, message_start reports the output so far (at most
	// one token); message_delta carries the final count.
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, min(u.Output, 1))
	b = append(b, `,"service_tier":"standard"}}`...)
	if err := ew.close(b, false); err != nil {
		return err
	}

	pinged := false
	ping := func() error {
		if pinged {
			return nil
		}
		pinged = true
		return ew.ping()
	}
	toolN := 0
	for i := range t.blocks {
		blk := &t.blocks[i]
		var err error
		switch blk.Type {
		case BlockThinking:
			err = ew.blockStart(i, func(b []byte) []byte {
				return append(b, `{"type":"thinking","thinking":"","signature":""}`...)
			})
			if err == nil {
				err = ping()
			}
			if err == nil {
				err = ew.deltas(i, "thinking_delta", "thinking", blk.Text, t.chunk)
			}
			if err == nil && blk.Signature != "" {
				err = ew.blockDelta(i, "signature_delta", "signature", blk.Signature)
			}
		case BlockRedactedThinking:
			err = ew.blockStart(i, func(b []byte) []byte {
				b = append(b, `{"type":"redacted_thinking","data":`...)
				b = appendJSONString(b, blk.Data)
				return append(b, '}')
			})
			if err == nil {
				err = ping()
			}
		case BlockText:
			err = ew.blockStart(i, func(b []byte) []byte {
				return append(b, `{"type":"text","text":""}`...)
			})
			if err == nil {
				err = ping()
			}
			if err == nil {
				err = ew.deltas(i, "text_delta", "text", blk.Text, t.chunk)
			}
		case BlockToolCall:
			id := c.toolID("toolu_", blk, toolN)
			toolN++
			err = ew.blockStart(i, func(b []byte) []byte {
				b = append(b, `{"type":"tool_use","id":`...)
				b = appendJSONString(b, id)
				b = append(b, `,"name":`...)
				b = appendJSONString(b, blk.Name)
				return append(b, `,"input":{}}`...)
			})
			if err == nil {
				err = ping()
			}
			if err == nil {
				err = ew.deltas(i, "input_json_delta", "partial_json", blk.Arguments, t.chunk)
			}
		}
		if err == nil {
			err = ew.blockStop(i)
		}
		if err != nil {
			return err
		}
	}
	if err := ping(); err != nil {
		return err
	}

	b = ew.open("message_delta")
	b = append(b, `,"delta":{"stop_reason":`...)
	b = appendJSONString(b, anthropicStop(t))
	b = append(b, `,"stop_sequence":null},"usage":{"output_tokens":`...)
	b = appendInt(b, u.Output)
	b = append(b, '}')
	if err := ew.close(b, false); err != nil {
		return err
	}
	return ew.close(ew.open("message_stop"), false)
}

func (anthropic) respond(w http.ResponseWriter, c *call) error {
	t := c.turn
	content := make([]any, 0, len(t.blocks))
	toolN := 0
	for i := range t.blocks {
		blk := &t.blocks[i]
		switch blk.Type {
		case BlockThinking:
			content = append(content, map[string]any{"type": "thinking", "thinking": blk.Text, "signature": blk.Signature})
		case BlockRedactedThinking:
			content = append(content, map[string]any{"type": "redacted_thinking", "data": blk.Data})
		case BlockText:
			content = append(content, map[string]any{"type": "text", "text": blk.Text})
		case BlockToolCall:
			var input any = json.RawMessage(blk.Arguments)
			if !json.Valid([]byte(blk.Arguments)) {
				// A body must parse; broken arguments travel as a string.
				input = blk.Arguments
			}
			content = append(content, map[string]any{"type": "tool_use", "id": c.toolID("toolu_", blk, toolN), "name": blk.Name, "input": input})
			toolN++
		}
	}
	u := t.turn.Usage
	resp := map[string]any{
		"id":            "msg_" + c.idSuffix,
		"type":          "message",
		"role":          "assistant",
		"model":         c.model,
		"content":       content,
		"stop_reason":   anthropicStop(t),
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                u.Input,
			"cache_creation_input_tokens": u.CacheWrite,
			"cache_read_input_tokens":     u.CacheRead,
			"cache_creation":              map[string]int{"ephemeral_5m_input_tokens": u.CacheWrite, "ephemeral_1h_input_tokens": 0},
			"output_tokens":               u.Output,
			"service_tier":                "standard",
		},
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(body)
	return err
}
