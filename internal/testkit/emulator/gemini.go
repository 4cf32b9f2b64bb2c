package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/penguin-agent/penguin/internal/catalog"
)

// geminiAPI speaks Google's Gemini API: POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse (SSE of
// GenerateContentResponse chunks, the last with the finish reason and the
// usage) or :generateContent (one response). A thinking block is a thought
// part with its signature as thoughtSignature; a tool call is a
// functionCall part with its signature; the model comes from the path.
type geminiAPI struct {
	model     string
	streaming bool
}

// geminiPath matches a Gemini method path.
var geminiPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^/v1(?:beta)?/models/([^/:]+):(streamGenerateContent|generateContent)$`)
})

func (geminiAPI) name() string { return "gemini" }

func (geminiAPI) authorized(r *http.Request, key string) bool {
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return keyEqual(k, key)
	}
	return keyEqual(r.URL.Query().Get("key"), key)
}

func (geminiAPI) checkHeaders(*http.Request) *apiError { return nil }

func (geminiAPI) catalogID() string { return "google" }

func (g geminiAPI) parse(body []byte, wantText bool) (callInfo, *apiError) {
	var req struct {
		Contents []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return callInfo{}, geminiError(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
	}
	if len(req.Contents) == 0 {
		return callInfo{}, geminiError(http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
	}
	info := callInfo{model: g.model, stream: g.streaming, includeUsage: true}
	if wantText {
		var b strings.Builder
		for _, p := range req.Contents[len(req.Contents)-1].Parts {
			if t, ok := p["text"].(string); ok {
				b.WriteString(t + "\n")
			}
			if u := imageURL(p); u != "" {
				b.WriteString("[image " + u + "]\n")
			}
			if fr, ok := p["functionResponse"].(map[string]any); ok {
				b.WriteString(messageText(map[string]any{"content": fr["response"]}))
			}
		}
		info.lastText = b.String()
	}
	return info, nil
}

func geminiError(status int, msg string) *apiError {
	typ := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}[status]
	if typ == "" {
		typ = "INTERNAL"
	}
	return &apiError{status: status, typ: typ, message: msg}
}

func (geminiAPI) errorFor(f *Fault) *apiError {
	status := f.Status
	if f.Kind == FaultAuth {
		return geminiError(http.StatusBadRequest, "API key not valid. Please pass a valid API key.")
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	e := geminiError(status, "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
	if status == http.StatusTooManyRequests {
		e.message = "Resource has been exhausted (e.g. check quota)."
	}
	e.body, e.retryAfter = f.Body, f.RetryAfter
	if f.Message != "" {
		e.message = f.Message
	}
	if f.Type != "" {
		e.typ = f.Type
	}
	return e
}

func appendGeminiError(dst []byte, e *apiError) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": e.status, "message": e.message, "status": e.typ}})
	return append(dst, b...)
}

func (geminiAPI) writeError(w http.ResponseWriter, _ string, e *apiError) {
	writeErrorBody(w, e, func() []byte { return appendGeminiError(nil, e) })
}

func (geminiAPI) appendMalformed(dst []byte, body string) []byte {
	dst = append(dst, "data: "...)
	if body == "" {
		body = `{"candidates":[{"content":{"parts":[{"text":"cut of`
	}
	dst = append(dst, body...)
	return append(dst, "\r\n\r\n"...)
}

func (g geminiAPI) appendStreamError(dst []byte, f *Fault) []byte {
	e := g.errorFor(&Fault{Kind: FaultHTTPError, Status: http.StatusServiceUnavailable, Message: f.Message, Type: f.Type})
	dst = append(dst, "data: "...)
	dst = appendGeminiError(dst, e)
	return append(dst, "\r\n\r\n"...)
}

func geminiFinish(t *compiledTurn) string {
	r, ok := portableStop(t.turn.StopReason)
	switch {
	case t.turn.StopReason == "" || r == "stop" || r == "tool_calls":
		return "STOP"
	case r == "length":
		return "MAX_TOKENS"
	case r == "content_filter":
		return "SAFETY"
	case !ok:
		return t.turn.StopReason
	}
	return "STOP"
}

func geminiUsage(u Usage) map[string]any {
	prompt := u.Input + u.CacheRead + u.CacheWrite
	out := map[string]any{
		"promptTokenCount": prompt, "candidatesTokenCount": u.Output - u.Reasoning,
		"totalTokenCount": prompt + u.Output,
	}
	if u.Reasoning > 0 {
		out["thoughtsTokenCount"] = u.Reasoning
	}
	if u.CacheRead > 0 {
		out["cachedContentTokenCount"] = u.CacheRead
	}
	return out
}

// parts returns the turn's parts, each piece of text its own part, as a
// stream sends them.
func (geminiAPI) parts(c *call) []map[string]any {
	var out []map[string]any
	t := c.turn
	for i := range t.blocks {
		blk := &t.blocks[i]
		switch blk.Type {
		case BlockThinking, BlockText:
			pieces := chunks(blk.Text, t.chunk)
			for j, p := range pieces {
				part := map[string]any{"text": p}
				if blk.Type == BlockThinking {
					part["thought"] = true
					if j == len(pieces)-1 && blk.Signature != "" {
						part["thoughtSignature"] = blk.Signature
					}
				}
				out = append(out, part)
			}
		case BlockToolCall:
			var args any = json.RawMessage(blk.Arguments)
			if !json.Valid([]byte(blk.Arguments)) {
				args = map[string]any{}
			}
			fc := map[string]any{"name": blk.Name, "args": args}
			if blk.ID != "" {
				fc["id"] = blk.ID
			}
			part := map[string]any{"functionCall": fc}
			if blk.Signature != "" {
				part["thoughtSignature"] = blk.Signature
			}
			out = append(out, part)
		}
	}
	return out
}

func (g geminiAPI) stream(sw *sseWriter, c *call) error {
	send := func(paced bool, v map[string]any) error {
		v["modelVersion"] = c.model
		v["responseId"] = c.idSuffix
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b := append(sw.buf[:0], "data: "...)
		b = append(b, data...)
		sw.buf = append(b, "\r\n\r\n"...)
		return sw.send(paced)
	}
	for _, p := range g.parts(c) {
		if err := send(true, map[string]any{"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{p}}, "index": 0}}}); err != nil {
			return err
		}
	}
	return send(false, map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": ""}}}, "finishReason": geminiFinish(c.turn), "index": 0}},
		"usageMetadata": geminiUsage(c.turn.turn.Usage),
	})
}

func (g geminiAPI) respond(w http.ResponseWriter, c *call) error {
	parts := []any{}
	for _, p := range g.parts(c) {
		parts = append(parts, p)
	}
	body, err := json.Marshal(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": geminiFinish(c.turn), "index": 0}},
		"usageMetadata": geminiUsage(c.turn.turn.Usage), "modelVersion": c.model,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(body)
	return err
}

// geminiName is the function name pattern Gemini takes.
var geminiName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`) })

func (g geminiAPI) validate(body []byte, rt route) *apiError {
	bad := func(format string, args ...any) *apiError {
		return geminiError(http.StatusBadRequest, fmt.Sprintf(format, args...))
	}
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text             *string         `json:"text"`
				Thought          bool            `json:"thought"`
				ThoughtSignature string          `json:"thoughtSignature"`
				InlineData       json.RawMessage `json:"inlineData"`
				FileData         json.RawMessage `json:"fileData"`
				FunctionCall     *struct {
					Name string `json:"name"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					Name string `json:"name"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig *struct {
			MaxOutputTokens *int64   `json:"maxOutputTokens"`
			Temperature     *float64 `json:"temperature"`
			ThinkingConfig  *struct {
				ThinkingBudget  *int64 `json:"thinkingBudget"`
				ThinkingLevel   string `json:"thinkingLevel"`
				IncludeThoughts bool   `json:"includeThoughts"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return bad("Invalid JSON payload received. %v", err)
	}
	for i, tg := range req.Tools {
		for j, fd := range tg.FunctionDeclarations {
			if !geminiName().MatchString(fd.Name) {
				return bad("* GenerateContentRequest.tools[%d].function_declarations[%d].name: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 64.", i, j)
			}
		}
	}
	// Turns: roles, one datum per part, function calls and responses in
	// their places.
	lastUserText := -1
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return bad("Please use a valid role: user, model.")
		}
		if len(c.Parts) == 0 {
			return bad("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i)
		}
		for j, p := range c.Parts {
			n := 0
			for _, set := range []bool{p.Text != nil, len(p.InlineData) > 0, len(p.FileData) > 0, p.FunctionCall != nil, p.FunctionResponse != nil} {
				if set {
					n++
				}
			}
			if n != 1 && !(n == 0 && p.Thought && p.ThoughtSignature != "") {
				return bad("* GenerateContentRequest.contents[%d].parts[%d].data: required oneof field 'data' must have one initialized field", i, j)
			}
			if p.FunctionCall != nil && c.Role != "model" || p.FunctionResponse != nil && c.Role != "user" {
				return bad("* GenerateContentRequest.contents[%d].parts[%d]: function calls come from the model and function responses from the user.", i, j)
			}
			if p.Text != nil && c.Role == "user" {
				lastUserText = i
			}
		}
	}
	for i, c := range req.Contents {
		calls, responses := 0, 0
		for _, p := range c.Parts {
			if p.FunctionCall != nil {
				calls++
			}
			if p.FunctionResponse != nil {
				responses++
			}
		}
		if calls > 0 {
			if i+1 >= len(req.Contents) {
				return bad("Please ensure that function call turn comes immediately after a user turn or after a function response turn, and is followed by a function response turn.")
			}
			next := 0
			for _, p := range req.Contents[i+1].Parts {
				if p.FunctionResponse != nil {
					next++
				}
			}
			if next != calls {
				return bad("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
			}
		}
		if responses > 0 {
			prev := 0
			if i > 0 {
				for _, p := range req.Contents[i-1].Parts {
					if p.FunctionCall != nil {
						prev++
					}
				}
			}
			if prev == 0 {
				return bad("Please ensure that function response turn comes immediately after a function call turn.")
			}
		}
	}
	if rt.provider == nil {
		return nil
	}
	m := rt.model(g.model)
	if m == nil {
		if rt.strict {
			return geminiError(http.StatusNotFound, fmt.Sprintf("models/%s is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", g.model))
		}
		return nil
	}
	// Gemini 3 checks the thought signatures of the current turn's calls.
	if strings.HasPrefix(g.model, "gemini-3") {
		for i := lastUserText + 1; i < len(req.Contents); i++ {
			for j, p := range req.Contents[i].Parts {
				if p.FunctionCall != nil && p.ThoughtSignature == "" {
					return bad("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:%s` , position %d. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.FunctionCall.Name, j+1)
				}
			}
		}
	}
	if len(req.Tools) > 0 && !m.Tools {
		return bad("Function calling is not enabled for models/%s", g.model)
	}
	gc := req.GenerationConfig
	if gc == nil {
		return nil
	}
	if v := gc.MaxOutputTokens; v != nil && m.Output > 0 && *v > m.Output {
		return bad("The specified max_output_tokens %d exceeds the maximum of %d.", *v, m.Output)
	}
	if gc.Temperature != nil && !m.Temperature {
		return bad("temperature is not supported for models/%s", g.model)
	}
	tc := gc.ThinkingConfig
	if tc == nil {
		return nil
	}
	ctl := m.Controls
	if ctl == nil {
		ctl = &catalog.Controls{}
	}
	switch {
	case !m.Reasoning:
		return bad("Thinking is not supported for this model.")
	case tc.ThinkingBudget != nil && tc.ThinkingLevel != "":
		return bad("You can only set only one of thinking budget and thinking level.")
	case tc.ThinkingLevel != "" && !slices.Contains(ctl.Efforts, tc.ThinkingLevel):
		if len(ctl.Efforts) == 0 {
			return bad("Thinking level is not supported for this model.")
		}
		return bad("Invalid thinking level %q: this model supports %s.", tc.ThinkingLevel, quoteList(ctl.Efforts))
	case tc.ThinkingBudget != nil:
		b := *tc.ThinkingBudget
		switch {
		case b == 0 && !ctl.Toggle:
			return bad("Budget 0 is invalid. This model only works in thinking mode.")
		case b == 0: // turns thinking off
		case ctl.Budget == nil && len(ctl.Efforts) == 0:
			return bad("Thinking budget is not supported for this model.")
		case b != 0 && b != -1 && ctl.Budget != nil && (b < ctl.Budget.Min || (ctl.Budget.Max > 0 && b > ctl.Budget.Max)):
			return bad("The thinking budget %d is invalid. Please choose a value between %d and %d.", b, ctl.Budget.Min, ctl.Budget.Max)
		}
	}
	return nil
}
