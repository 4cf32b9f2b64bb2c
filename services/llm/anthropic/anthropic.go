// Package anthropic is the llm service's adapter for Anthropic Messages
// streaming, through the official SDK (github.com/anthropics/anthropic-sdk-go/v2):
// text, tool_use with input_json_delta, thinking with its signature kept as
// fidelity and sent back verbatim, redacted thinking, and usage with cache
// reads and writes. A message that max_tokens or a refusal ended early says
// so in its outcome, and a tool_use that such an end cut off is never taken
// for a whole call.
//
// The SDK is built with WithoutEnvironmentDefaults, so it reads no
// ANTHROPIC_* variable or profile file behind the providers configuration's
// back, and with WithMaxRetries(0), so the engine alone decides about
// reconnecting.
package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.opentelemetry.io/otel/trace"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// DefaultBaseURL is Anthropic's API (the SDK appends /v1/messages).
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the output cap sent when neither the caller nor the
// model list gives one: Messages requires max_tokens on every request.
const DefaultMaxTokens = 8192

// minBudget is the smallest thinking budget Anthropic takes.
const minBudget = 1024

// DefaultThinking maps the levels to thinking budgets in tokens: the wire
// values of levels a providers file lists without one. A model that
// prefers adaptive thinking lists effort names instead ("low", "medium",
// "high", "xhigh", "max"), which the adapter sends as adaptive thinking
// with that output effort.
var DefaultThinking = stream.ThinkingLevels{
	penguinv1.ThinkingLevel_THINKING_LEVEL_NONE:   "",
	penguinv1.ThinkingLevel_THINKING_LEVEL_LOW:    "2048",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM: "8192",
	penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH:   "16384",
	penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH:  "32768",
	penguinv1.ThinkingLevel_THINKING_LEVEL_MAX:    "63999",
}

// The stop reasons that end a message before the model was done with it
// (the output token limit, a full context window, a refusal), and how the
// outcome words each. A refusal (the API's streaming
// classifiers stopping the model) is not an error: what came before it is
// the model's answer, so the outcome stays completed and says it refused.
var (
	maxTokensCut     = translate.OutputLimit("stop_reason max_tokens")
	contextWindowCut = translate.Cut{
		Note:  "the model stopped at the context window limit (stop_reason model_context_window_exceeded)",
		Cause: "at the context window limit (stop_reason model_context_window_exceeded)",
	}
	refusalCut = translate.Cut{
		Note:  "the model refused to continue (stop_reason refusal)",
		Cause: "by the model's refusal (stop_reason refusal)",
	}
)

// Config configures one Anthropic route.
type Config struct {
	// BaseURL is the API base without /v1 (DefaultBaseURL when empty).
	BaseURL string
	// APIKey is sent as x-api-key; empty sends none.
	APIKey string
	// Headers are added to every request.
	Headers http.Header
	// HTTPClient sends the requests; nil means a new http.Client.
	HTTPClient *http.Client
	// IdleTimeout ends a stream that sends nothing for this long; zero or
	// less turns it off.
	IdleTimeout time.Duration
	// TracerProvider receives the SDK's own HTTP spans (metadata only,
	// never content); nil turns the SDK's tracing off.
	TracerProvider trace.TracerProvider
	// Now is the clock for Retry-After dates; nil means time.Now.
	Now func() time.Time
}

// Adapter streams Anthropic Messages for one route. It is safe for
// concurrent use.
type Adapter struct {
	client  sdk.Client
	idle    time.Duration
	keyless bool
	now     func() time.Time
}

// New returns the adapter for cfg.
func New(cfg Config) *Adapter {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	headers := cfg.Headers.Clone()
	if headers == nil {
		headers = http.Header{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(strings.TrimRight(base, "/") + "/"),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		// The SDK sends the key as a bearer token; Anthropic's documented
		// header, and the one gateways and compatible servers check, is
		// x-api-key, so both go out.
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
		if headers.Get("X-Api-Key") == "" {
			headers.Set("X-Api-Key", cfg.APIKey)
		}
	}
	opts = append(opts, option.WithHTTPClient(&httpwatch.Doer{Client: hc, Headers: headers}))
	if cfg.TracerProvider != nil {
		opts = append(opts, option.WithTracerProvider(cfg.TracerProvider),
			option.WithOpenTelemetryTracesContentMode(option.OpenTelemetryContentModeMetadataOnly))
	} else {
		opts = append(opts, option.WithoutOpenTelemetry())
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Adapter{client: sdk.NewClient(opts...), idle: cfg.IdleTimeout, keyless: cfg.APIKey == "", now: now}
}

// Stream sends req and relays the answer.
func (a *Adapter) Stream(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	ids := translate.NewIDs(req.Messages)
	tr := translate.New(emit, ids)
	params, fe := buildParams(req, ids, translate.Thinking(req))
	if fe != nil {
		return tr.Finish(fe)
	}

	ctx, wd := httpwatch.NewWatchdog(ctx, a.idle)
	defer wd.Stop()
	ex := httpwatch.NewExchange(wd.Touch)
	ctx = httpwatch.With(ctx, ex)

	s := a.client.Messages.NewStreaming(ctx, params)
	defer s.Close()
	r := reader{tr: tr, blocks: map[int64]string{}}
	for s.Next() {
		r.event(s.Current())
		if err := tr.Err(); err != nil {
			return failure.ConsumerGone(err).Outcome()
		}
	}
	var out *penguinv1.LLMOutcome
	switch err := s.Err(); {
	case err != nil:
		out = tr.Finish(a.classify(ctx, ex, err))
	case ctx.Err() != nil:
		out = tr.Finish(failure.Cancelled(ctx))
	case !r.stopped:
		out = tr.Finish(failure.Malformed(nil, "the stream ended before the provider sent message_stop"))
	default:
		out = r.finish()
	}
	if out.GetProviderRequestId() == "" {
		if _, h := ex.Response(); h != nil {
			out.ProviderRequestId = failure.RequestID(h)
		}
	}
	return out
}

// reader turns Messages stream events into translator calls.
//
// Anthropic closes every content block with content_block_stop, the one
// that max_tokens cut off included, and says why the message ended only
// afterwards, in message_delta. So a tool_use block's stop does not close
// its call at once: the call is held open until the next block starts (the
// model went on, so the call is whole) or message_delta names a stop
// reason that cuts nothing; after a cut the translator's FinishCut tells a
// whole call from a cut one.
type reader struct {
	tr                                   *translate.Translator
	blocks                               map[int64]string // open content blocks by index: their type
	signature                            map[int64]string
	held                                 []int64 // stopped tool_use blocks whose calls are still open
	input, output, cacheRead, cacheWrite int64
	stop                                 sdk.StopReason // message_delta's stop_reason
	stopped                              bool
}

func (r *reader) event(ev sdk.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		r.input, r.output = u.InputTokens, u.OutputTokens
		r.cacheRead, r.cacheWrite = u.CacheReadInputTokens, u.CacheCreationInputTokens
		r.reportUsage()
	case "content_block_start":
		r.closeHeld()
		cb := ev.ContentBlock
		r.blocks[ev.Index] = cb.Type
		switch cb.Type {
		case "text":
			r.tr.TextDelta(cb.Text, nil)
		case "thinking":
			r.tr.ThinkingDelta(cb.Thinking, nil)
			if cb.Signature != "" {
				r.sign(ev.Index, cb.Signature)
			}
		case "redacted_thinking":
			r.tr.RedactedThinking(translate.Fidelity("redacted", cb.Data))
		case "tool_use":
			r.tr.ToolCallDelta(int(ev.Index), cb.ID, cb.Name, "")
		}
	case "content_block_delta":
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			r.tr.TextDelta(d.Text, nil)
		case "thinking_delta":
			r.tr.ThinkingDelta(d.Thinking, nil)
		case "signature_delta":
			r.sign(ev.Index, d.Signature)
		case "input_json_delta":
			r.tr.ToolCallDelta(int(ev.Index), "", "", d.PartialJSON)
		}
	case "content_block_stop":
		switch r.blocks[ev.Index] {
		case "text":
			r.tr.CloseText(nil)
		case "thinking":
			var fid []byte
			if sig, ok := r.signature[ev.Index]; ok {
				fid = translate.Fidelity("signature", sig)
			}
			r.tr.CloseThinking(fid)
		case "tool_use":
			r.held = append(r.held, ev.Index)
		}
		delete(r.blocks, ev.Index)
	case "message_delta":
		r.stop = ev.Delta.StopReason
		if _, cut := r.cut(); !cut {
			r.closeHeld()
		}
		u := ev.Usage
		r.output = u.OutputTokens
		// Newer API versions repeat the input counts here; older ones send
		// zeros, which must not erase message_start's.
		if u.InputTokens > 0 {
			r.input = u.InputTokens
		}
		if u.CacheReadInputTokens > 0 {
			r.cacheRead = u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens > 0 {
			r.cacheWrite = u.CacheCreationInputTokens
		}
		r.reportUsage()
	case "message_stop":
		r.stopped = true
	}
}

// cut returns how the stop reason ended the message early, and whether it
// did.
func (r *reader) cut() (translate.Cut, bool) {
	switch r.stop {
	case sdk.StopReasonMaxTokens:
		return maxTokensCut, true
	case sdk.StopReasonModelContextWindowExceeded:
		return contextWindowCut, true
	case sdk.StopReasonRefusal:
		return refusalCut, true
	}
	return translate.Cut{}, false
}

// closeHeld closes the calls of the stopped tool_use blocks, now known to
// be whole.
func (r *reader) closeHeld() {
	for _, i := range r.held {
		r.tr.CloseToolCall(int(i))
	}
	r.held = r.held[:0]
}

// finish ends a stream that the provider ended with message_stop. Calls
// still held are whole unless a cut says otherwise; Finish closes them as
// it closes any open segment.
func (r *reader) finish() *penguinv1.LLMOutcome {
	if c, ok := r.cut(); ok {
		return r.tr.FinishCut(c)
	}
	return r.tr.Finish(nil)
}

// sign records a thinking block's signature; it closes the block at
// content_block_stop, kept verbatim as {"signature": …}.
func (r *reader) sign(index int64, sig string) {
	if r.signature == nil {
		r.signature = map[int64]string{}
	}
	r.signature[index] += sig
}

func (r *reader) reportUsage() {
	r.tr.Usage(&penguinv1.TokenCounts{
		CacheRead:  r.cacheRead,
		CacheWrite: r.cacheWrite,
		Output:     r.output,
		Total:      r.input + r.cacheRead + r.cacheWrite + r.output,
	})
}

// classify turns an SDK error into a failure.
func (a *Adapter) classify(ctx context.Context, ex *httpwatch.Exchange, err error) *failure.Error {
	if fe := failure.Cancelled(ctx); fe != nil {
		return fe
	}
	status, header := ex.Response()
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		// The body's message and type, or a short excerpt of a page that
		// is not the API's JSON (a proxy's HTML error page).
		detail := failure.Detail([]byte(apiErr.RawJSON()))
		if detail == "" {
			detail = strings.TrimSpace(apiErr.Message + " " + string(apiErr.Type()))
		}
		if apiErr.StatusCode >= 400 {
			fe := failure.Keyless(failure.HTTP(apiErr.StatusCode, header, detail, a.now()), a.keyless)
			if fe.RequestID == "" {
				fe.RequestID = apiErr.RequestID
			}
			return fe
		}
		// An error event inside a stream that began with 200.
		fe := failure.InBand(string(apiErr.Type()), apiErr.Message)
		fe.RequestID = failure.RequestID(header)
		return fe
	}
	if !ex.Sent() {
		return &failure.Error{Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST,
			Permanent: true, Message: "the request was refused before it was sent: " + err.Error(), Err: err}
	}
	if strings.HasPrefix(err.Error(), "received error while streaming") {
		return failure.Malformed(err, "the provider sent an error event that is not valid JSON: %v", err)
	}
	return failure.TransportAfter(ctx, err, status, header)
}

// budget parses a numeric thinking wire value.
func budget(wire string) (int64, bool) {
	n, err := strconv.ParseInt(wire, 10, 64)
	return n, err == nil
}
