// Package openai is the llm service's adapter for OpenAI Chat Completions
// streaming, through github.com/sashabaranov/go-openai: OpenAI itself and
// every compatible server (DeepSeek, vLLM, Ollama, llama.cpp's server,
// OpenRouter, …). It streams text, reasoning (the reasoning_content and
// reasoning delta fields) as thinking, tool calls (parallel, with deltas
// interleaved by index) and usage, and classifies every failure into an
// outcome. Thinking goes back to the provider in the field it came from;
// a completion cut at the output token limit (finish_reason "length") says
// so in its outcome.
//
// go-openai does the request building, the HTTP and the SSE framing; the
// adapter reads each chunk raw (RecvRaw) and decodes it itself, because
// go-openai's delta type has no "reasoning" field and would drop the
// reasoning of vLLM and OpenRouter; for the same reason the request body
// passes through a hook ([bodyHook]) that adds the "reasoning" field to the
// assistant messages that need it. go-openai never retries, so the engine
// alone decides about reconnecting.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
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
// name, the vocabulary OpenAI and DeepSeek share; a model that takes fewer
// lists its own levels in the providers configuration.
var DefaultThinking = stream.ThinkingLevels{
	penguinv1.ThinkingLevel_THINKING_LEVEL_NONE:   "none",
	penguinv1.ThinkingLevel_THINKING_LEVEL_LOW:    "low",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "medium",
	penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH:   "high",
	penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH:  "xhigh",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MAX:    "max",
}

// The fidelity key naming the field a thinking block came from, and the two
// fields it names: the delta fields the adapter reads thinking from, which
// are also the message fields it sends thinking back in.
const (
	reasoningFieldKey     = "reasoning_field"
	fieldReasoningContent = "reasoning_content"
	fieldReasoning        = "reasoning"
)

// Fidelity payloads naming the delta field the reasoning came from, so it
// can go back in the same field.
var (
	fidelityReasoningContent = translate.Fidelity(reasoningFieldKey, fieldReasoningContent)
	fidelityReasoning        = translate.Fidelity(reasoningFieldKey, fieldReasoning)
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
	client           *goopenai.Client
	idle             time.Duration
	completionTokens bool
	keyless          bool
	now              func() time.Time
}

// New returns the adapter for cfg.
func New(cfg Config) (*Adapter, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	param := cfg.MaxTokensParam
	switch param {
	case "":
		param = MaxTokensParam
		if strings.HasPrefix(strings.TrimRight(base, "/"), DefaultBaseURL) {
			param = MaxCompletionTokensParam
		}
	case MaxTokensParam, MaxCompletionTokensParam:
	default:
		return nil, fmt.Errorf("openai: max_tokens_param %q: want %s or %s", param, MaxTokensParam, MaxCompletionTokensParam)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := goopenai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(base, "/")
	oc.HTTPClient = bodyHook{next: &httpwatch.Doer{Client: hc, Headers: cfg.Headers}}
	// Keep-alive comments are not chunks; the idle timeout, not a count,
	// decides when a quiet stream is dead.
	oc.EmptyMessagesLimit = 1 << 30
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Adapter{
		client:           goopenai.NewClientWithConfig(oc),
		idle:             cfg.IdleTimeout,
		completionTokens: param == MaxCompletionTokensParam,
		keyless:          cfg.APIKey == "",
		now:              now,
	}, nil
}

// Stream sends req and relays the answer.
func (a *Adapter) Stream(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	ids := translate.NewIDs(req.Messages)
	tr := translate.New(emit, ids)
	effort, fe := translate.Thinking(req, DefaultThinking)
	if fe != nil {
		return tr.Finish(fe)
	}
	creq, reasoning, err := buildRequest(req, ids, effort, a.completionTokens)
	if err != nil {
		fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, "%v", err)
		fe.Permanent = true
		return tr.Finish(fe)
	}

	ctx, wd := httpwatch.NewWatchdog(ctx, a.idle)
	defer wd.Stop()
	ex := httpwatch.NewExchange(wd.Touch)
	ctx = httpwatch.With(ctx, ex)
	ctx = withReasoningFields(ctx, reasoning)

	s, err := a.client.CreateChatCompletionStream(ctx, creq)
	if err != nil {
		return withRequestID(tr.Finish(a.classify(ctx, ex, err)), ex)
	}
	defer s.Close()
	return withRequestID(a.read(ctx, s, tr, ex), ex)
}

// read relays the chunks of an open stream until it ends.
func (a *Adapter) read(ctx context.Context, s *goopenai.ChatCompletionStream, tr *translate.Translator, ex *httpwatch.Exchange) *penguinv1.LLMOutcome {
	var finish string // the finish_reason, once the provider sent one
	synthetic := 0    // tool calls from servers that send no index
	for {
		raw, err := s.RecvRaw()
		if err != nil {
			if errors.Is(err, io.EOF) && ctx.Err() == nil {
				ex.Complete()
				switch finish {
				case "":
					return tr.Finish(failure.Malformed(nil, "the stream ended before the provider sent a finish_reason"))
				case finishLength:
					return tr.FinishCut(lengthCut)
				}
				return tr.Finish(nil)
			}
			return tr.Finish(a.classify(ctx, ex, err))
		}
		var c chunk
		if err := json.Unmarshal(raw, &c); err != nil {
			return tr.Finish(failure.Malformed(err, "the provider sent a chunk that is not valid JSON: %v", err))
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
			if d.Content != "" {
				tr.TextDelta(d.Content, nil)
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

// classify turns an error from go-openai into a failure, with the headers
// the exchange recorded.
func (a *Adapter) classify(ctx context.Context, ex *httpwatch.Exchange, err error) *failure.Error {
	if fe := failure.Cancelled(ctx); fe != nil {
		return fe
	}
	status, header := ex.Response()
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		return failure.Keyless(failure.HTTP(apiErr.HTTPStatusCode, header, strings.TrimSpace(apiErr.Message+" "+apiErrKind(apiErr)), a.now()), a.keyless)
	case errors.As(err, &apiErr):
		fe := failure.InBand(apiErrKind(apiErr), apiErr.Message)
		fe.RequestID = failure.RequestID(header)
		return fe
	case errors.As(err, &reqErr):
		return failure.Keyless(failure.HTTP(reqErr.HTTPStatusCode, header, strings.TrimSpace(string(reqErr.Body)), a.now()), a.keyless)
	case !ex.Sent():
		// go-openai refused the request itself (its model and reasoning
		// checks): it fails the same way every time.
		code := penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST
		if errors.Is(err, goopenai.ErrReasoningEffortUnsupported) {
			code = penguinv1.FailureCode_FAILURE_CODE_UNSUPPORTED
		}
		return &failure.Error{Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: code, Permanent: true,
			Message: "the request was refused before it was sent: " + err.Error(), Err: err}
	case errors.Is(err, goopenai.ErrTooManyEmptyStreamMessages):
		return failure.Malformed(err, "the provider sent a stream of empty messages")
	}
	return failure.TransportAfter(ctx, err, status, header)
}

func withRequestID(o *penguinv1.LLMOutcome, ex *httpwatch.Exchange) *penguinv1.LLMOutcome {
	if o.GetProviderRequestId() == "" {
		if _, h := ex.Response(); h != nil {
			o.ProviderRequestId = failure.RequestID(h)
		}
	}
	return o
}

func apiErrKind(e *goopenai.APIError) string {
	kind := e.Type
	if e.Code != nil {
		kind = strings.TrimSpace(kind + " " + fmt.Sprint(e.Code))
	}
	return kind
}

// chunk is one Chat Completions stream chunk, with the fields the adapter
// reads: the compatible servers' reasoning fields and cache counters
// included.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string          `json:"content"`
			ReasoningContent string          `json:"reasoning_content"`
			Reasoning        flexText        `json:"reasoning"`
			ToolCalls        []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage      `json:"usage"`
	Error *chunkError `json:"error"`
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
		return json.Unmarshal(b, &f.s)
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
}

func (u *usage) counts() *penguinv1.TokenCounts {
	c := &penguinv1.TokenCounts{Output: u.CompletionTokens, CacheRead: u.PromptCacheHit}
	if d := u.PromptTokensDetails; d != nil {
		if d.CachedTokens > 0 {
			c.CacheRead = d.CachedTokens
		}
		c.CacheWrite = d.CacheWriteTokens
	}
	// prompt_tokens already includes the cached tokens.
	c.Total = u.PromptTokens + u.CompletionTokens
	if c.Total == 0 {
		c.Total = u.TotalTokens
	}
	return c
}

type chunkError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *chunkError) kind() string {
	code := strings.Trim(string(e.Code), `"`)
	if code == "null" {
		code = ""
	}
	return strings.TrimSpace(e.Type + " " + code)
}
