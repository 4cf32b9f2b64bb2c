// Package openai is the llm service's adapter for OpenAI Chat Completions
// streaming: OpenAI itself and every compatible server (DeepSeek, Mistral,
// xAI, Groq, OpenRouter, Qwen, Moonshot, Zhipu, vLLM, Ollama, llama.cpp's
// server, …). It streams text (a string or a list of typed content parts,
// whose thinking parts become thinking), reasoning (the reasoning_content
// and reasoning delta fields) as thinking, tool calls (parallel, with
// deltas interleaved by index) and usage, and classifies every failure
// into an outcome. Thinking goes back to the provider in the field it came
// from; a completion cut at the output token limit (finish_reason
// "length") says so in its outcome.
//
// Each request is shaped for its model: the route's output-token
// parameter (max_tokens or max_completion_tokens), reasoning parameters in
// the route's dialect and only for a model that reasons, a temperature
// only when the service passed one on.
//
// The adapter builds the JSON body and reads the event stream itself
// (package sse) rather than through a client library: go-openai, which it
// used before, refused reasoning models' requests by model-name rules of
// its own, had no field for the compatible servers' reasoning parameters,
// and lost a provider's error event behind a comment line. Nothing is
// retried here: the engine alone decides about reconnecting.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
	segjson "github.com/segmentio/encoding/json"
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// The max_tokens parameter names.
const (
	// MaxTokensParam is the classic max_tokens, which every compatible
	// server takes.
	MaxTokensParam = "max_tokens"
	// MaxCompletionTokensParam is OpenAI's newer name, the only one its
	// reasoning models take.
	MaxCompletionTokensParam = "max_completion_tokens"
)

// DefaultThinking maps every level to the reasoning_effort of the same
// name: the wire value of a level a providers file lists without one.
var DefaultThinking = stream.ThinkingLevels{
	penguinv1.ThinkingLevel_THINKING_LEVEL_NONE:   "none",
	penguinv1.ThinkingLevel_THINKING_LEVEL_LOW:    "low",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "medium",
	penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH:   "high",
	penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH:  "xhigh",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MAX:    "max",
}

// The fidelity key naming the field a thinking block came from, and the
// fields it names: the delta fields the adapter reads thinking from, which
// are also the message fields it sends thinking back in, and "content"
// for thinking parts of the content (Mistral), which are not sent back.
const (
	reasoningFieldKey     = "reasoning_field"
	fieldReasoningContent = "reasoning_content"
	fieldReasoning        = "reasoning"
	fieldContent          = "content"
)

// Fidelity payloads naming the delta field the reasoning came from, so it
// can go back in the same field.
var (
	fidelityReasoningContent = translate.Fidelity(reasoningFieldKey, fieldReasoningContent)
	fidelityReasoning        = translate.Fidelity(reasoningFieldKey, fieldReasoning)
	fidelityContent          = translate.Fidelity(reasoningFieldKey, fieldContent)
)

// finishLength is the finish_reason of a completion that the output token
// limit (max_tokens or max_completion_tokens) cut short.
const finishLength = "length"

// lengthCut is how a completion cut at the output token limit ends. Chat
// Completions never closes a tool call before the stream ends, so every
// call is still open then and [translate.Translator.FinishCut] can tell a
// whole call from one whose arguments stop mid-JSON.
var lengthCut = translate.OutputLimit("finish_reason length")

// Config configures one OpenAI-compatible route.
type Config struct {
	// BaseURL is the API base, ending in /v1 (DefaultBaseURL when empty).
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Headers are added to every request.
	Headers http.Header
	// MaxTokensParam is MaxTokensParam or MaxCompletionTokensParam; empty
	// picks max_completion_tokens for OpenAI's own API and max_tokens for
	// everything else.
	MaxTokensParam string
	// Dialect is how reasoning controls go on the wire
	// (catalog.DialectEffort when empty).
	Dialect string
	// HTTPClient sends the requests; nil means a new http.Client.
	HTTPClient *http.Client
	// IdleTimeout ends a stream that sends nothing for this long; zero or
	// less turns it off.
	IdleTimeout time.Duration
	// Now is the clock for Retry-After dates; nil means time.Now.
	Now func() time.Time
}

// Adapter streams Chat Completions for one route. It is safe for
// concurrent use.
type Adapter struct {
	url              string
	endpoint         *sse.Endpoint
	completionTokens bool
	dialect          string
}

// New returns the adapter for cfg.
func New(cfg Config) (*Adapter, error) {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	param := cfg.MaxTokensParam
	switch param {
	case "":
		param = MaxTokensParam
		if strings.HasPrefix(base, DefaultBaseURL) {
			param = MaxCompletionTokensParam
		}
	case MaxTokensParam, MaxCompletionTokensParam:
	default:
		return nil, fmt.Errorf("openai: max_tokens_param %q: want %s or %s", param, MaxTokensParam, MaxCompletionTokensParam)
	}
	dialect := cfg.Dialect
	switch dialect {
	case "":
		dialect = catalog.DialectEffort
	case catalog.DialectEffort, catalog.DialectDeepSeek, catalog.DialectThinkingType, catalog.DialectQwen, catalog.DialectOpenRouter:
	default:
		return nil, fmt.Errorf("openai: reasoning dialect %q is not one Chat Completions speaks", dialect)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	header := http.Header{}
	if cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	return &Adapter{
		url: base + "/chat/completions",
		endpoint: &sse.Endpoint{
			Doer: &httpwatch.Doer{Client: hc, Headers: cfg.Headers}, Header: header, IdleTimeout: cfg.IdleTimeout,
			Keyless: cfg.APIKey == "", Now: cfg.Now, InBandError: sse.OpenAIError,
		},
		completionTokens: param == MaxCompletionTokensParam,
		dialect:          dialect,
	}, nil
}

// Stream sends req and relays the answer.
func (a *Adapter) Stream(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	ids := translate.NewIDs(req.Messages)
	tr := translate.New(emit, ids)
	body := sse.NewBody()
	if err := a.body(body.Buffer(), req, ids); err != nil {
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
		out = a.read(s.Ctx, s.Events, tr, s.Exchange)
	}
	if out.GetProviderRequestId() == "" {
		out.ProviderRequestId = s.RequestID()
	}
	return out
}

// read relays the chunks of an open stream until it ends.
func (a *Adapter) read(ctx context.Context, s *sse.Reader, tr *translate.Translator, ex *httpwatch.Exchange) *penguinv1.LLMOutcome {
	var finish string // the finish_reason, once the provider sent one
	synthetic := 0    // tool calls from servers that send no index
	var c chunk       // reused by every chunk: see [chunk.reset]
	var dec sse.DataDecoder
	for {
		ev, err := s.Next()
		if fe := failure.Cancelled(ctx); fe != nil {
			// Buffered bytes may still parse after the context ended (a
			// deadline, an idle timeout, the caller gone): it wins.
			return tr.Finish(fe)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return tr.Finish(failure.Transport(ctx, err))
		}
		// Some servers end the stream after the last chunk without
		// [DONE]; the finish_reason tells whether the answer was whole.
		if err != nil || bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			ex.Complete()
			switch finish {
			case "":
				return tr.Finish(failure.Malformed(nil, "the stream ended before the provider sent a finish_reason"))
			case finishLength:
				return tr.FinishCut(lengthCut)
			}
			return tr.Finish(nil)
		}
		c.reset()
		if !c.decode(ev.Data) {
			// Refused: encoding/json decodes it, or says what is
			// wrong with it.
			c.reset()
			if err := dec.Decode(ev.Data, &c); err != nil {
				return tr.Finish(failure.Malformed(err, "the provider sent a chunk that is not valid JSON: %v", err))
			}
		}
		if c.Error != nil {
			return tr.Finish(failure.InBand(c.Error.kind(), c.Error.Message))
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue // n is always 1; other choices are not ours
			}
			d := &ch.Delta
			if d.ReasoningContent != "" {
				tr.ThinkingDelta(d.ReasoningContent, fidelityReasoningContent)
			}
			if r := d.Reasoning.text(); r != "" {
				tr.ThinkingDelta(r, fidelityReasoning)
			}
			for _, p := range d.Content.parts {
				if p.thinking {
					tr.ThinkingDelta(p.text, fidelityContent)
				} else if p.text != "" {
					tr.TextDelta(p.text, nil)
				}
			}
			for i, tc := range d.ToolCalls {
				idx := i
				switch {
				case tc.Index != nil:
					idx = *tc.Index
				case tc.ID != "":
					synthetic++
					idx = 1<<20 + synthetic
				default:
					idx = 1<<20 + synthetic
				}
				tr.ToolCallDelta(idx, tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			tr.Usage(c.Usage.counts())
		}
		if err := tr.Err(); err != nil {
			// The consumer is gone; nobody will read the rest.
			return failure.ConsumerGone(err).Outcome()
		}
	}
}

// chunk is one Chat Completions stream chunk, with the fields the adapter
// reads: the compatible servers' reasoning fields and cache counters
// included.
type chunk struct {
	Choices []choice    `json:"choices"`
	Usage   *usage      `json:"usage"`
	Error   *chunkError `json:"error"`
}

type choice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Content          content         `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        flexText        `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// reset empties c for the next chunk but keeps the arrays of its choices,
// tool calls and content parts, which encoding/json decodes into again
// instead of growing new ones at every chunk. Everything up to their
// capacity is zeroed: encoding/json merges an array element into what is
// already there.
func (c *chunk) reset() {
	choices := c.Choices[:cap(c.Choices)]
	for i := range choices {
		d := &choices[i].Delta
		calls := d.ToolCalls[:cap(d.ToolCalls)]
		clear(calls)
		parts := d.Content.parts[:0]
		choices[i] = choice{}
		choices[i].Delta.ToolCalls = calls[:0]
		choices[i].Delta.Content.parts = parts
	}
	*c = chunk{Choices: choices[:0]}
}

type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// flexText is a field that is a string on the servers the adapter reads
// and may be something else (an object, null) on others, which is ignored
// rather than failing the chunk.
type flexText struct{ s string }

// UnmarshalJSON keeps a string and ignores any other JSON value.
func (f *flexText) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return unquote(b, &f.s)
	}
	return nil
}

func (f flexText) text() string { return f.s }

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptCacheHit      int64 `json:"prompt_cache_hit_tokens"` // DeepSeek
	PromptTokensDetails *struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// counts turns a usage object into token counts. The total is the
// provider's own when it sent one. Reasoning tokens are part of
// completion_tokens for OpenAI, but xAI counts them apart (its total is
// prompt + completion + reasoning): then they are added to the output, so
// output always includes the reasoning, as its price does.
func (u *usage) counts() *penguinv1.TokenCounts {
	c := &penguinv1.TokenCounts{Output: u.CompletionTokens, CacheRead: u.PromptCacheHit}
	if d := u.PromptTokensDetails; d != nil {
		if d.CachedTokens > 0 {
			c.CacheRead = d.CachedTokens
		}
		c.CacheWrite = d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		c.Reasoning = d.ReasoningTokens
	}
	apart := c.Reasoning > 0 && u.TotalTokens == u.PromptTokens+u.CompletionTokens+c.Reasoning
	if apart {
		c.Output += c.Reasoning
	}
	// prompt_tokens already includes the cached tokens.
	c.Total = u.TotalTokens
	if c.Total == 0 {
		c.Total = u.PromptTokens + c.Output
	}
	return c
}

// content is a delta's content: a string, or a list of typed parts
// (Mistral's thinking models send [{"type":"thinking","thinking":[…]},
// {"type":"text","text":…}]). Any other JSON value is ignored.
type content struct{ parts []contentPart }

type contentPart struct {
	text     string
	thinking bool
}

// UnmarshalJSON reads a string or a list of parts.
func (c *content) UnmarshalJSON(b []byte) error {
	c.parts = c.parts[:0]
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := unquote(b, &s); err != nil {
			return err
		}
		c.parts = append(c.parts, contentPart{text: s})
	case len(b) > 0 && b[0] == '[':
		var raw []struct {
			Type     string          `json:"type"`
			Text     string          `json:"text"`
			Thinking json.RawMessage `json:"thinking"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		for _, p := range raw {
			switch p.Type {
			case "thinking", "reasoning":
				c.parts = append(c.parts, contentPart{text: p.Text + partsText(p.Thinking), thinking: true})
			default:
				c.parts = append(c.parts, contentPart{text: p.Text})
			}
		}
	}
	return nil
}

// unquote decodes the JSON string b into s as encoding/json does. A
// string with no escape and valid UTF-8, nearly every delta, is its bytes
// as they are: copying them spares a second validation of b and a decoder
// state at every chunk. Any other string goes to encoding/json, which
// decodes the escapes and replaces invalid UTF-8. b comes from the
// decoding of the whole chunk, which already checked it is valid JSON.
func unquote(b []byte, s *string) error {
	if n := len(b); n >= 2 && b[n-1] == '"' {
		if in := b[1 : n-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			*s = string(in)
			return nil
		}
	}
	return json.Unmarshal(b, s)
}

// decode decodes data into c, which reset has emptied, with segmentio's
// encoding/json, and reports whether it did. That package decodes what
// encoding/json decodes, into the same values (TestChunkDecodeMatchesEncodingJSON
// holds it to that on the providers' chunks and on every one-byte
// mutation of them), in about two thirds of the time: encoding/json
// scanned each chunk twice through reflection and matched every key it
// skipped against the fields, 40% of what a model call cost the llm
// service. It is already in the binary (the MCP SDK decodes with it).
// When it refuses data, the caller resets c and decodes with
// encoding/json, whose result or error stands, so a malformed chunk is
// reported in encoding/json's words.
func (c *chunk) decode(data []byte) bool {
	return segjson.Unmarshal(data, c) == nil
}

// partsText is the text of a thinking part's "thinking": a string or a
// list of text parts.
func partsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &list)
	var b strings.Builder
	for _, p := range list {
		b.WriteString(p.Text)
	}
	return b.String()
}

type chunkError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *chunkError) kind() string { return failure.Kind(e.Type, e.Code) }
