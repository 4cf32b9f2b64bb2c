// Package responses is the llm service's adapter for the OpenAI Responses
// API (POST /responses, streaming), the API in which OpenAI's reasoning
// models keep their reasoning across turns: each reasoning item comes back
// with its encrypted content (the request asks for
// reasoning.encrypted_content and stores nothing on the provider's side),
// the adapter keeps the whole item, byte for byte, as the fidelity of the
// thinking message it becomes (its summary is the thinking text), and sends
// it back verbatim as an input item on the next turn. Thinking from any
// other source is not sent.
//
// Requests are shaped for the model: max_output_tokens, reasoning.effort
// (with a summary) and the encrypted reasoning only for a model that
// reasons, a temperature only when the service passed one on. Messages,
// function calls and their outputs map to the API's input items; a
// response cut at max_output_tokens says so in its outcome.
package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// fidelityKey names the reasoning item kept in a thinking message's
// fidelity.
const fidelityKey = "responses_item"

// outputLimitCut is how a response cut at max_output_tokens ends.
var outputLimitCut = translate.OutputLimit("incomplete_details.reason max_output_tokens")

// Config configures one Responses API route.
type Config struct {
	// BaseURL is the API base, ending in /v1 (DefaultBaseURL when empty).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none.
	APIKey string
	// Headers are added to every request.
	Headers http.Header
	// HTTPClient sends the requests; nil means a new http.Client.
	HTTPClient *http.Client
	// IdleTimeout ends a stream that sends nothing for this long; zero or
	// less turns it off.
	IdleTimeout time.Duration
	// Now is the clock for Retry-After dates; nil means time.Now.
	Now func() time.Time
}

// Adapter streams the Responses API for one route. It is safe for
// concurrent use.
type Adapter struct {
	url      string
	endpoint *sse.Endpoint
}

// New returns the adapter for cfg.
func New(cfg Config) *Adapter {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	header := http.Header{}
	if cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return &Adapter{url: base + "/responses", endpoint: &sse.Endpoint{
		Doer: &httpwatch.Doer{Client: hc, Headers: cfg.Headers}, Header: header, IdleTimeout: cfg.IdleTimeout,
		Keyless: cfg.APIKey == "", Now: cfg.Now, InBandError: sse.OpenAIError,
	}}
}

// Stream sends req and relays the answer.
func (a *Adapter) Stream(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	ids := translate.NewIDs(req.Messages)
	tr := translate.New(emit, ids)
	body := sse.NewBody()
	if err := buildBody(body.Buffer(), req, ids); err != nil {
		body.Release()
		fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, "%v", err)
		fe.Permanent = true
		return tr.Finish(fe)
	}
	s, fe := a.endpoint.Post(ctx, a.url, body)
	var out *penguinv1.LLMOutcome
	if fe != nil {
		out = tr.Finish(fe)
	} else {
		defer s.Close()
		out = read(s.Ctx, s.Events, tr, s.Exchange)
	}
	if out.GetProviderRequestId() == "" {
		out.ProviderRequestId = s.RequestID()
	}
	return out
}

// event is the part of a streaming event the adapter reads.
type event struct {
	Type         string          `json:"type"`
	OutputIndex  int             `json:"output_index"`
	SummaryIndex int             `json:"summary_index"`
	Delta        string          `json:"delta"`
	Item         json.RawMessage `json:"item"`
	Response     *struct {
		Status            string `json:"status"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Usage *usage `json:"usage"`
	} `json:"response"`
	// The "error" event's fields.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type item struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

type usage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *usage) counts() *penguinv1.TokenCounts {
	c := &penguinv1.TokenCounts{Output: u.OutputTokens, Total: u.TotalTokens}
	if d := u.InputTokensDetails; d != nil {
		c.CacheRead = d.CachedTokens
	}
	if d := u.OutputTokensDetails; d != nil {
		c.Reasoning = d.ReasoningTokens
	}
	if c.Total == 0 {
		c.Total = u.InputTokens + u.OutputTokens
	}
	return c
}

// read relays the events of an open stream until it ends.
func read(ctx context.Context, s *sse.Reader, tr *translate.Translator, ex *httpwatch.Exchange) *penguinv1.LLMOutcome {
	var dec sse.DataDecoder
	for {
		ev, err := s.Next()
		if fe := failure.Cancelled(ctx); fe != nil {
			return tr.Finish(fe)
		}
		if errors.Is(err, io.EOF) {
			return tr.Finish(failure.Malformed(nil, "the stream ended before the provider sent response.completed"))
		}
		if err != nil {
			return tr.Finish(failure.Transport(ctx, err))
		}
		var e event
		if err := dec.Decode(ev.Data, &e); err != nil {
			return tr.Finish(failure.Malformed(err, "the provider sent an event that is not valid JSON: %v", err))
		}
		if e.Type == "" {
			e.Type = ev.Name
		}
		switch e.Type {
		case "response.output_item.added":
			var it item
			if dec.Decode(e.Item, &it) == nil && it.Type == "function_call" {
				tr.ToolCallDelta(e.OutputIndex, it.CallID, it.Name, "")
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			tr.ThinkingDelta(e.Delta, nil)
		case "response.reasoning_summary_part.added":
			// Summary parts of one item are paragraphs of one thinking.
			if e.SummaryIndex > 0 {
				tr.ThinkingDelta("\n\n", nil)
			}
		case "response.output_text.delta", "response.refusal.delta":
			tr.TextDelta(e.Delta, nil)
		case "response.function_call_arguments.delta":
			tr.ToolCallDelta(e.OutputIndex, "", "", e.Delta)
		case "response.output_item.done":
			var it item
			if err := dec.Decode(e.Item, &it); err != nil {
				return tr.Finish(failure.Malformed(err, "the provider sent an output item that is not valid JSON: %v", err))
			}
			switch it.Type {
			case "reasoning":
				// The whole item, encrypted content included, goes back
				// verbatim on the next turn.
				fid, err := json.Marshal(map[string]json.RawMessage{fidelityKey: e.Item})
				if err != nil {
					return tr.Finish(failure.Malformed(err, "the reasoning item cannot be kept: %v", err))
				}
				tr.CloseThinking(fid)
			case "message":
				tr.CloseText(nil)
			case "function_call":
				tr.CloseToolCall(e.OutputIndex)
			}
		case "response.completed", "response.incomplete":
			ex.Complete()
			r := e.Response
			if r != nil && r.Usage != nil {
				tr.Usage(r.Usage.counts())
			}
			if e.Type == "response.incomplete" {
				reason := ""
				if r != nil && r.IncompleteDetails != nil {
					reason = r.IncompleteDetails.Reason
				}
				if reason == "max_output_tokens" {
					return tr.FinishCut(outputLimitCut)
				}
				return tr.FinishCut(translate.Cut{
					Note:  "the response is incomplete (incomplete_details.reason " + reason + ")",
					Cause: "by the end of the response (incomplete_details.reason " + reason + ")",
				})
			}
			return tr.Finish(nil)
		case "response.failed":
			kind, msg := "server_error", "the response failed"
			if r := e.Response; r != nil && r.Error != nil {
				kind, msg = r.Error.Code, r.Error.Message
			}
			return tr.Finish(failure.InBand(kind, msg))
		case "error":
			return tr.Finish(failure.InBand(failure.Kind("", e.Code), e.Message))
		}
		if err := tr.Err(); err != nil {
			return failure.ConsumerGone(err).Outcome()
		}
	}
}

// request is the body of POST /responses.
type request struct {
	Model           string          `json:"model"`
	Input           []any           `json:"input"`
	Instructions    string          `json:"instructions,omitempty"`
	Stream          bool            `json:"stream"`
	Store           bool            `json:"store"`
	Include         []string        `json:"include,omitempty"`
	MaxOutputTokens int64           `json:"max_output_tokens,omitempty"`
	Reasoning       *reasoningParam `json:"reasoning,omitempty"`
	Temperature     *float32        `json:"temperature,omitempty"`
	// The tools are not a field: buildBody appends their JSON, kept by
	// encodedTools, after the rest (see translate.ToolEncodings.Body).
}

type reasoningParam struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

type tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type message struct {
	Role    string `json:"role"`
	Content []part `json:"content"`
}

type part struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
}

type functionCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type functionOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// buildBody writes req to buf as the JSON of a Responses request.
func buildBody(buf *bytes.Buffer, req *stream.Request, ids *translate.IDs) error {
	r := request{
		Model: req.Model, Instructions: req.System, Stream: true, Store: false,
		MaxOutputTokens: req.MaxTokens, Temperature: req.Temperature,
	}
	if req.Spec.Reasoning {
		// Nothing is stored: the reasoning travels with the conversation.
		r.Include = []string{"reasoning.encrypted_content"}
		if wire := translate.Thinking(req); wire != "" && wire != catalog.WireOff && wire != catalog.WireOn {
			if _, err := strconv.Atoi(wire); err != nil {
				r.Reasoning = &reasoningParam{Effort: wire, Summary: "auto"}
			}
		}
	}
	for _, turn := range translate.Turns(req.Messages) {
		if turn.Role == penguinv1.Role_ROLE_ASSISTANT {
			r.Input = append(r.Input, assistant(turn.Messages, ids)...)
			continue
		}
		items, err := user(turn.Messages, ids)
		if err != nil {
			return err
		}
		r.Input = append(r.Input, items...)
	}
	return encodedTools.Body(buf, r, "tools", req.Tools)
}

// encodedTools is the JSON of the tools sent: a function whose parameters
// are its schema, or an empty object schema when it declares none.
var encodedTools = translate.NewToolEncodings(func(t *penguinv1.ToolDefinition) ([]byte, error) {
	params := json.RawMessage(t.GetParameters())
	if p := strings.TrimSpace(t.GetParameters()); p == "" || p == "null" {
		params = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return json.Marshal(tool{Type: "function", Name: t.GetName(), Description: t.GetDescription(), Parameters: params})
})

// assistant translates an assistant turn into output items: reasoning
// items as they came (only those this API issued), text as an assistant
// message, tool calls as function_call items.
func assistant(msgs []*penguinv1.OmniMessage, ids *translate.IDs) []any {
	var out []any
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, message{Role: "assistant", Content: []part{{Type: "output_text", Text: text.String()}}})
			text.Reset()
		}
	}
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Thinking:
			if raw := reasoningItem(p.Thinking.GetFidelity()); raw != nil {
				flush()
				out = append(out, raw)
			}
		case *penguinv1.OmniMessage_Text:
			text.WriteString(p.Text.GetText())
		case *penguinv1.OmniMessage_ToolCall:
			flush()
			args := p.ToolCall.GetArguments()
			if args == "" {
				args = "{}"
			}
			out = append(out, functionCall{Type: "function_call", CallID: ids.Outbound(p.ToolCall.GetToolCallId()), Name: p.ToolCall.GetName(), Arguments: args})
		}
	}
	flush()
	return out
}

// reasoningItem returns the kept reasoning item of a fidelity, or nil.
func reasoningItem(fidelity []byte) json.RawMessage {
	if len(fidelity) == 0 {
		return nil
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(fidelity, &f) != nil {
		return nil
	}
	return f[fidelityKey]
}

// user translates a user turn: tool outputs as function_call_output items
// (their images in a user message after them), then a user message with
// the text and images.
func user(msgs []*penguinv1.OmniMessage, ids *translate.IDs) ([]any, error) {
	var out []any
	var parts []part
	for _, m := range msgs {
		tco := m.GetToolCallOutput()
		if tco == nil {
			continue
		}
		output := tco.GetOutput()
		if output == "" {
			output = "(no output)"
		}
		id := ids.Outbound(tco.GetToolCallId())
		out = append(out, functionOutput{Type: "function_call_output", CallID: id, Output: output})
		if len(tco.GetImages()) > 0 {
			parts = append(parts, part{Type: "input_text", Text: fmt.Sprintf("Images returned by tool call %s:", id)})
			for _, img := range tco.GetImages() {
				parts = append(parts, part{Type: "input_image", ImageURL: img})
			}
		}
	}
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			parts = append(parts, part{Type: "input_text", Text: p.Text.GetText()})
		case *penguinv1.OmniMessage_ImageUrl, *penguinv1.OmniMessage_InlineData:
			if url, ok := translate.ImageOf(m); ok {
				parts = append(parts, part{Type: "input_image", ImageURL: url})
				continue
			}
			text, err := translate.InlineText(m.GetInlineData())
			if err != nil {
				return nil, err
			}
			parts = append(parts, part{Type: "input_text", Text: text})
		}
	}
	if len(parts) > 0 {
		out = append(out, message{Role: "user", Content: parts})
	}
	return out, nil
}
