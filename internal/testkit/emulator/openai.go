package emulator

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// openAI speaks OpenAI Chat Completions: POST /v1/chat/completions, SSE of
// "data: {chat.completion.chunk}" lines ending with "data: [DONE]", or one
// chat.completion object when stream is false.
type openAI struct{}

func (openAI) name() string { return "openai" }

func (openAI) authorized(r *http.Request, key string) bool {
	return keyEqual(bearer(r), key)
}

func (openAI) checkHeaders(*http.Request) *apiError { return nil }

func (openAI) validate(body []byte, rt route) *apiError { return chatRules(body, rt) }

func (openAI) catalogID() string { return "openai" }

func (openAI) parse(body []byte, wantText bool) (callInfo, *apiError) {
	var req struct {
		Model         string            `json:"model"`
		Messages      []json.RawMessage `json:"messages"`
		Stream        bool              `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return callInfo{}, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error",
			message: "We could not parse the JSON body of your request: " + err.Error()}
	}
	if req.Model == "" {
		return callInfo{}, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "missing_required_parameter",
			message: "you must provide a model parameter"}
	}
	if len(req.Messages) == 0 {
		return callInfo{}, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "empty_array",
			message: "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."}
	}
	info := callInfo{model: req.Model, stream: req.Stream}
	if req.StreamOptions != nil {
		info.includeUsage = req.StreamOptions.IncludeUsage
	}
	if wantText {
		info.lastText = lastMessageText(req.Messages)
	}
	return info, nil
}

// openAIErrorDefaults are the type, code and message OpenAI sends for a
// status.
func openAIErrorDefaults(status int) (typ, code, msg string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key", "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
	case status == http.StatusForbidden:
		return "invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported"
	case status == http.StatusNotFound:
		return "invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."
	case status == http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."
	case status == http.StatusServiceUnavailable:
		return "server_error", "", "The engine is currently overloaded, please try again later"
	case status >= 500:
		return "server_error", "", "The server had an error while processing your request. Sorry about that!"
	default:
		return "invalid_request_error", "", "Invalid request."
	}
}

func (openAI) errorFor(f *Fault) *apiError {
	status := f.Status
	if f.Kind == FaultAuth {
		status = http.StatusUnauthorized
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	typ, code, msg := openAIErrorDefaults(status)
	e := &apiError{status: status, typ: typ, code: code, message: msg, body: f.Body, retryAfter: f.RetryAfter}
	if f.Type != "" {
		e.typ = f.Type
	}
	if f.Code != "" {
		e.code = f.Code
	}
	if f.Message != "" {
		e.message = f.Message
	}
	return e
}

// appendOpenAIError appends {"error":{"message","type","param","code"}}.
func appendOpenAIError(dst []byte, e *apiError) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendJSONString(dst, e.message)
	dst = append(dst, `,"type":`...)
	dst = appendJSONString(dst, e.typ)
	dst = append(dst, `,"param":`...)
	if e.param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, e.param)
	}
	dst = append(dst, `,"code":`...)
	if e.code == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, e.code)
	}
	return append(dst, "}}"...)
}

func (openAI) writeError(w http.ResponseWriter, requestID string, e *apiError) {
	writeErrorBody(w, e, func() []byte { return appendOpenAIError(nil, e) })
}

// writeErrorBody sends an error answer with its Retry-After header.
func writeErrorBody(w http.ResponseWriter, e *apiError, body func() []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.retryAfter != "" {
		h.Set("Retry-After", e.retryAfter)
	}
	w.WriteHeader(e.status)
	if e.body != "" {
		_, _ = w.Write([]byte(e.body))
		return
	}
	_, _ = w.Write(body())
}

func (openAI) appendMalformed(dst []byte, body string) []byte {
	dst = append(dst, "data: "...)
	if body == "" {
		body = `{"id":"chatcmpl-broken","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"cut of`
	}
	dst = append(dst, body...)
	return append(dst, "\n\n"...)
}

func (o openAI) appendStreamError(dst []byte, f *Fault) []byte {
	e := o.errorFor(&Fault{Kind: FaultHTTPError, Status: http.StatusInternalServerError, Message: f.Message, Type: f.Type, Code: f.Code})
	dst = append(dst, "data: "...)
	dst = appendOpenAIError(dst, e)
	return append(dst, "\n\n"...)
}

// openAIStop returns the finish_reason of a turn.
func openAIStop(t *compiledTurn) string {
	if t.turn.StopReason == "" {
		if t.tools > 0 {
			return "tool_calls"
		}
		return "stop"
	}
	r, _ := portableStop(t.turn.StopReason)
	return r
}

func reasoningField(t *Turn) string {
	if t.ReasoningField == "" {
		return "reasoning_content"
	}
	return t.ReasoningField
}

// chunkWriter builds chat.completion.chunk frames for one request: the
// envelope (id, created, model) is rendered once and every frame reuses it.
type chunkWriter struct {
	sw     *sseWriter
	prefix []byte // data: {"id":…,"choices":[
	suffix []byte // ]…}\n\n
}

func (cw *chunkWriter) open() []byte {
	b := append(cw.sw.buf[:0], cw.prefix...)
	return append(b, `{"index":0,"delta":{`...)
}

func (cw *chunkWriter) close(b []byte, finish string, paced bool) error {
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, finish)
	}
	b = append(b, '}')
	b = append(b, cw.suffix...)
	cw.sw.buf = b
	return cw.sw.send(paced)
}

// part sends one chunk whose delta content is a one-part list: a text
// part, or a thinking part holding a text part (Mistral's shape).
func (cw *chunkWriter) part(thinking bool, piece string) error {
	b := cw.open()
	if thinking {
		b = append(b, `"content":[{"type":"thinking","thinking":[{"type":"text","text":`...)
		b = appendJSONString(b, piece)
		b = append(b, `}]}]`...)
	} else {
		b = append(b, `"content":[{"type":"text","text":`...)
		b = appendJSONString(b, piece)
		b = append(b, `}]`...)
	}
	return cw.close(b, "", true)
}

// delta sends one chunk whose delta is {field: piece}.
func (cw *chunkWriter) delta(field, piece string) error {
	b := cw.open()
	b = appendJSONString(b, field)
	b = append(b, ':')
	b = appendJSONString(b, piece)
	return cw.close(b, "", true)
}

// toolDelta sends one tool_calls delta; the first one of a call carries its
// id, type and name.
func (cw *chunkWriter) toolDelta(index int, id, name, args string, first bool) error {
	b := cw.open()
	b = append(b, `"tool_calls":[{"index":`...)
	b = appendInt(b, index)
	if first {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, id)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = appendJSONString(b, name)
		b = append(b, `,"arguments":`...)
	} else {
		b = append(b, `,"function":{"arguments":`...)
	}
	b = appendJSONString(b, args)
	b = append(b, "}}]"...)
	return cw.close(b, "", true)
}

// toolStream is the progress of one tool call's argument pieces.
type toolStream struct {
	index    int
	id, name string
	rest     string
}

func (o openAI) stream(sw *sseWriter, c *call) error {
	t := c.turn
	cw := &chunkWriter{sw: sw}
	p := append(make([]byte, 0, 160), `data: {"id":"chatcmpl-`...)
	p = append(p, c.idSuffix...)
	p = append(p, `","object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, c.created, 10)
	p = append(p, `,"model":`...)
	p = appendJSONString(p, c.model)
	p = append(p, `,"system_fingerprint":"fp_emulator","choices":[`...)
	cw.prefix = p
	if c.includeUsage && !t.turn.NoUsage {
		cw.suffix = []byte(`],"usage":null}` + "\n\n")
	} else {
		cw.suffix = []byte("]}\n\n")
	}

	// The first chunk announces the role, as OpenAI's does.
	b := cw.open()
	b = append(b, `"role":"assistant","content":""`...)
	if err := cw.close(b, "", false); err != nil {
		return err
	}

	field := reasoningField(t.turn)
	toolsDone := false
	toolIndex := 0
	for i := range t.blocks {
		blk := &t.blocks[i]
		switch blk.Type {
		case BlockThinking, BlockText:
			f := "content"
			if blk.Type == BlockThinking {
				f = field
			}
			for rest := blk.Text; rest != ""; {
				var piece string
				piece, rest = nextPiece(rest, t.chunk)
				var err error
				if t.turn.ContentParts {
					err = cw.part(blk.Type == BlockThinking, piece)
				} else {
					err = cw.delta(f, piece)
				}
				if err != nil {
					return err
				}
			}
		case BlockToolCall:
			if t.turn.InterleaveToolCalls {
				if toolsDone {
					continue
				}
				toolsDone = true
				if err := o.interleaved(cw, c); err != nil {
					return err
				}
				continue
			}
			id := c.toolID("call_", blk, toolIndex)
			if err := cw.toolDelta(toolIndex, id, blk.Name, "", true); err != nil {
				return err
			}
			for rest := blk.Arguments; rest != ""; {
				var piece string
				piece, rest = nextPiece(rest, t.chunk)
				if err := cw.toolDelta(toolIndex, "", "", piece, false); err != nil {
					return err
				}
			}
			toolIndex++
		}
	}

	b = cw.open()
	if err := cw.close(b, openAIStop(t), false); err != nil {
		return err
	}
	if c.includeUsage && !t.turn.NoUsage {
		b = append(sw.buf[:0], cw.prefix...)
		b = append(b, `],"usage":`...)
		b = appendOpenAIUsage(b, t.turn.Usage)
		b = append(b, "}\n\n"...)
		sw.buf = b
		if err := sw.send(false); err != nil {
			return err
		}
	}
	sw.buf = append(sw.buf[:0], "data: [DONE]\n\n"...)
	return sw.send(false)
}

// interleaved sends every tool call of the turn round-robin by index: first
// each call's header, then one argument piece of each call in turn.
func (openAI) interleaved(cw *chunkWriter, c *call) error {
	t := c.turn
	calls := make([]toolStream, 0, t.tools)
	for i := range t.blocks {
		if blk := &t.blocks[i]; blk.Type == BlockToolCall {
			calls = append(calls, toolStream{index: len(calls), id: c.toolID("call_", blk, len(calls)), name: blk.Name, rest: blk.Arguments})
		}
	}
	for i := range calls {
		if err := cw.toolDelta(i, calls[i].id, calls[i].name, "", true); err != nil {
			return err
		}
	}
	for more := true; more; {
		more = false
		for i := range calls {
			if calls[i].rest == "" {
				continue
			}
			var piece string
			piece, calls[i].rest = nextPiece(calls[i].rest, t.chunk)
			if err := cw.toolDelta(i, "", "", piece, false); err != nil {
				return err
			}
			more = true
		}
	}
	return nil
}

func appendOpenAIUsage(b []byte, u Usage) []byte {
	prompt := u.Input + u.CacheRead + u.CacheWrite
	completion := u.Output
	if u.ReasoningApart {
		completion -= u.Reasoning
	}
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, prompt)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, completion)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, prompt+u.Output)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CacheRead)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, u.Reasoning)
	return append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (openAI) respond(w http.ResponseWriter, c *call) error {
	t := c.turn
	var content, reasoning string
	var tools []openAIToolCall
	for i := range t.blocks {
		blk := &t.blocks[i]
		switch blk.Type {
		case BlockThinking:
			reasoning += blk.Text
		case BlockText:
			content += blk.Text
		case BlockToolCall:
			tc := openAIToolCall{ID: c.toolID("call_", blk, len(tools)), Type: "function"}
			tc.Function.Name, tc.Function.Arguments = blk.Name, blk.Arguments
			tools = append(tools, tc)
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if content != "" || len(tools) == 0 {
		msg["content"] = content
	}
	if reasoning != "" {
		msg[reasoningField(t.turn)] = reasoning
	}
	if len(tools) > 0 {
		msg["tool_calls"] = tools
	}
	resp := map[string]any{
		"id":                 "chatcmpl-" + c.idSuffix,
		"object":             "chat.completion",
		"created":            c.created,
		"model":              c.model,
		"system_fingerprint": "fp_emulator",
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": openAIStop(t),
		}},
		"usage": json.RawMessage(appendOpenAIUsage(nil, t.turn.Usage)),
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(body)
	return err
}
