// Package gemini is the llm service's adapter for Google's Gemini API,
// spoken natively (POST models/{model}:streamGenerateContent?alt=sse)
// rather than through its OpenAI-compatible endpoint.
//
// Native, because of thought signatures: Gemini signs its reasoning on
// whichever part follows it (a thought summary, a text, a function call),
// and Gemini 3 refuses a function call replayed without its signature.
// The native API carries them as a field of each part, so the adapter
// keeps each as the fidelity of the message it arrived on and sends it
// back on the same kind of part; the compatible endpoint folds them into
// an extra_content extension of tool calls only, with thoughts inside the
// text. The native API also reports thought tokens apart (they are added
// to the output, which is what they are billed as) and takes a thinking
// level or budget directly.
//
// Requests are shaped for the model: maxOutputTokens, a thinkingConfig
// (a level, a budget, or off) only for a model whose reasoning can be
// controlled, thought summaries asked for whenever it thinks, a
// temperature only when the service passed one on.
package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// DefaultBaseURL is Gemini's API.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// signatureKey names a thought signature in a message's fidelity.
const signatureKey = "thought_signature"

// skipSignature is the placeholder Google documents for a function call
// that Gemini did not issue (another model's, in a conversation moved to
// Gemini 3): without any signature the call would be refused.
const skipSignature = "skip_thought_signature_validator"

var maxTokensCut = translate.OutputLimit("finishReason MAX_TOKENS")

// Config configures one Gemini route.
type Config struct {
	// BaseURL is the API base, ending in /v1beta (DefaultBaseURL when
	// empty).
	BaseURL string
	// APIKey is sent as x-goog-api-key.
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

// Adapter streams Gemini for one route. It is safe for concurrent use.
type Adapter struct {
	base     string
	endpoint *sse.Endpoint
}

// badKey is how Gemini words a key it refuses, with a 400.
var badKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)API[_ ]key not valid|API_KEY_INVALID`) })

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
		header.Set("X-Goog-Api-Key", cfg.APIKey)
	}
	return &Adapter{base: base, endpoint: &sse.Endpoint{
		Doer: &httpwatch.Doer{Client: hc, Headers: cfg.Headers}, Header: header, IdleTimeout: cfg.IdleTimeout,
		Keyless: cfg.APIKey == "", Now: cfg.Now, InBandError: inBandError,
		Classify: func(fe *failure.Error) *failure.Error {
			if fe.HTTPStatus == http.StatusBadRequest && badKey().MatchString(fe.Message) {
				fe.Status, fe.Code = penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH
			}
			return fe
		},
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
	u := a.base + "/models/" + url.PathEscape(req.Model) + ":streamGenerateContent?alt=sse"
	s, fe := a.endpoint.Post(ctx, u, body)
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

func inBandError(body []byte) (kind, message string, ok bool) {
	var e struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return "", "", false
	}
	return e.Error.Status, e.Error.Message, true
}

// chunk is one streamed GenerateContentResponse.
type chunk struct {
	Candidates []struct {
		Content struct {
			Parts []part `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usage `json:"usageMetadata"`
	Error         *struct {
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

type usage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

// counts: Gemini counts thoughts apart from the candidates; they are
// output all the same (and billed so).
func (u *usage) counts() *penguinv1.TokenCounts {
	c := &penguinv1.TokenCounts{
		Output: u.CandidatesTokenCount + u.ThoughtsTokenCount, Reasoning: u.ThoughtsTokenCount,
		CacheRead: u.CachedContentTokenCount, Total: u.TotalTokenCount,
	}
	if c.Total == 0 {
		c.Total = u.PromptTokenCount + c.Output
	}
	return c
}

// read relays the chunks of an open stream until it ends. Gemini has no
// end marker: the last chunk carries the finish reason, and the stream
// closes.
func read(ctx context.Context, s *sse.Reader, tr *translate.Translator, ex *httpwatch.Exchange) *penguinv1.LLMOutcome {
	finish := ""
	calls := 0
	var dec sse.DataDecoder
	for {
		ev, err := s.Next()
		if fe := failure.Cancelled(ctx); fe != nil {
			return tr.Finish(fe)
		}
		if errors.Is(err, io.EOF) {
			ex.Complete()
			return end(tr, finish)
		}
		if err != nil {
			return tr.Finish(failure.Transport(ctx, err))
		}
		var c chunk
		if err := dec.Decode(ev.Data, &c); err != nil {
			return tr.Finish(failure.Malformed(err, "the provider sent a chunk that is not valid JSON: %v", err))
		}
		if c.Error != nil {
			return tr.Finish(failure.InBand(c.Error.Status, c.Error.Message))
		}
		if pf := c.PromptFeedback; pf != nil && pf.BlockReason != "" {
			fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST,
				"the provider blocked the prompt (promptFeedback.blockReason %s)", pf.BlockReason)
			return tr.Finish(fe)
		}
		for i, cand := range c.Candidates {
			if i > 0 {
				break // candidateCount is 1
			}
			for _, p := range cand.Content.Parts {
				var fid []byte
				if p.ThoughtSignature != "" {
					fid = translate.Fidelity(signatureKey, p.ThoughtSignature)
				}
				switch {
				case p.FunctionCall != nil:
					args := string(p.FunctionCall.Args)
					if args == "" || args == "null" {
						args = "{}"
					}
					tr.ToolCallDelta(calls, p.FunctionCall.ID, p.FunctionCall.Name, args)
					tr.ToolCallFidelity(calls, fid)
					tr.CloseToolCall(calls)
					calls++
				case p.Thought:
					tr.ThinkingDelta(p.Text, nil)
					if fid != nil {
						tr.CloseThinking(fid)
					}
				case p.Text != "":
					tr.TextDelta(p.Text, fid)
				case fid != nil:
					// A signature on an empty part: it belongs to the
					// reasoning just before it.
					tr.CloseText(nil)
					tr.CloseThinking(fid)
				}
			}
			if cand.FinishReason != "" {
				finish = cand.FinishReason
			}
		}
		if c.UsageMetadata != nil {
			tr.Usage(c.UsageMetadata.counts())
		}
		if err := tr.Err(); err != nil {
			return failure.ConsumerGone(err).Outcome()
		}
	}
}

// end finishes a stream that closed after finish.
func end(tr *translate.Translator, finish string) *penguinv1.LLMOutcome {
	switch finish {
	case "":
		return tr.Finish(failure.Malformed(nil, "the stream ended before the provider sent a finishReason"))
	case "STOP", "FINISH_REASON_UNSPECIFIED":
		return tr.Finish(nil)
	case "MAX_TOKENS":
		return tr.FinishCut(maxTokensCut)
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL":
		return tr.Finish(failure.Malformed(nil, "the model produced a function call the API could not parse (finishReason %s)", finish))
	}
	// SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, …
	return tr.FinishCut(translate.Cut{
		Note:  "the provider stopped the response (finishReason " + finish + ")",
		Cause: "by the provider (finishReason " + finish + ")",
	})
}

// request is the body of streamGenerateContent.
type request struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`

	// The tools are not a field: buildBody appends their JSON, kept by
	// encodedTools, after the rest (see translate.ToolEncodings.Body).
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             string            `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResponse struct {
	ID       string         `json:"id,omitempty"`
	Name     string         `json:"name"`
	Response map[string]any `json:"response"`
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens int64           `json:"maxOutputTokens,omitempty"`
	Temperature     *float32        `json:"temperature,omitempty"`
	ThinkingConfig  *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// buildBody writes req to buf as the JSON of a streamGenerateContent
// request.
func buildBody(buf *bytes.Buffer, req *stream.Request, ids *translate.IDs) error {
	r := request{GenerationConfig: &generationConfig{MaxOutputTokens: req.MaxTokens, Temperature: req.Temperature}}
	if req.System != "" {
		r.SystemInstruction = &content{Parts: []part{{Text: req.System}}}
	}
	r.GenerationConfig.ThinkingConfig = thinking(translate.Thinking(req))
	names := map[string]string{} // call id → function name, for the responses
	for _, turn := range translate.Turns(req.Messages) {
		if turn.Role == penguinv1.Role_ROLE_ASSISTANT {
			if parts := assistant(turn.Messages, ids, names); len(parts) > 0 {
				r.Contents = append(r.Contents, content{Role: "model", Parts: parts})
			}
			continue
		}
		parts, err := user(turn.Messages, ids, names)
		if err != nil {
			return err
		}
		if len(parts) > 0 {
			r.Contents = append(r.Contents, content{Role: "user", Parts: parts})
		}
	}
	return encodedTools.Body(buf, r, "tools", req.Tools)
}

// encodedTools is the JSON of the tools sent: Gemini's tools are groups,
// of which one holds every function declaration.
var encodedTools = translate.NewNestedToolEncodings(func(t *penguinv1.ToolDefinition) ([]byte, error) {
	fd := functionDeclaration{Name: t.GetName(), Description: t.GetDescription()}
	if p := strings.TrimSpace(t.GetParameters()); p != "" && p != "null" {
		fd.ParametersJSONSchema = json.RawMessage(p)
	}
	return json.Marshal(fd)
}, `[{"functionDeclarations":[`, `]}]`)

// thinking is the thinkingConfig of a wire value: a budget (0 turns
// thinking off), a thinking level, on (thought summaries only) or off.
func thinking(wire string) *thinkingConfig {
	switch wire {
	case "":
		return nil
	case catalog.WireOff:
		zero := int64(0)
		return &thinkingConfig{ThinkingBudget: &zero}
	case catalog.WireOn:
		return &thinkingConfig{IncludeThoughts: true}
	}
	if n, err := strconv.ParseInt(wire, 10, 64); err == nil {
		return &thinkingConfig{ThinkingBudget: &n, IncludeThoughts: n != 0}
	}
	return &thinkingConfig{ThinkingLevel: wire, IncludeThoughts: true}
}

// assistant translates an assistant turn into model parts. Thinking goes
// back only when Gemini signed it; text and calls carry their signatures
// back; a call from another provider gets the documented placeholder.
func assistant(msgs []*penguinv1.OmniMessage, ids *translate.IDs, names map[string]string) []part {
	var out []part
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Thinking:
			if sig, ok := translate.FidelityString(p.Thinking.GetFidelity(), signatureKey); ok {
				out = append(out, part{Text: p.Thinking.GetThinking(), Thought: true, ThoughtSignature: sig})
			}
		case *penguinv1.OmniMessage_Text:
			if t := p.Text.GetText(); t != "" {
				sig, _ := translate.FidelityString(p.Text.GetFidelity(), signatureKey)
				out = append(out, part{Text: t, ThoughtSignature: sig})
			}
		case *penguinv1.OmniMessage_ToolCall:
			tc := p.ToolCall
			id := ids.Outbound(tc.GetToolCallId())
			names[tc.GetToolCallId()] = tc.GetName()
			sig, ok := translate.FidelityString(tc.GetFidelity(), signatureKey)
			if !ok {
				sig = skipSignature
			}
			args := json.RawMessage(strings.TrimSpace(tc.GetArguments()))
			if !json.Valid(args) || len(args) == 0 || args[0] != '{' {
				args = json.RawMessage(`{}`)
			}
			fc := &functionCall{Name: tc.GetName(), Args: args}
			if id != tc.GetName() {
				fc.ID = id
			}
			out = append(out, part{FunctionCall: fc, ThoughtSignature: sig})
		}
	}
	return out
}

// user translates a user turn: function responses first, then text and
// images.
func user(msgs []*penguinv1.OmniMessage, ids *translate.IDs, names map[string]string) ([]part, error) {
	var out []part
	for _, m := range msgs {
		tco := m.GetToolCallOutput()
		if tco == nil {
			continue
		}
		key := "output"
		switch tco.GetStopReason() {
		case penguinv1.StopReason_STOP_REASON_UNSPECIFIED, penguinv1.StopReason_STOP_REASON_COMPLETED:
		default:
			key = "error"
		}
		id := ids.Outbound(tco.GetToolCallId())
		fr := &functionResponse{Name: names[tco.GetToolCallId()], Response: map[string]any{key: tco.GetOutput()}}
		if id != fr.Name {
			fr.ID = id
		}
		out = append(out, part{FunctionResponse: fr})
		for _, img := range tco.GetImages() {
			p, err := imagePart(img)
			if err != nil {
				return nil, fmt.Errorf("tool output %s: %w", tco.GetToolCallId(), err)
			}
			out = append(out, p)
		}
	}
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			if t := p.Text.GetText(); t != "" {
				out = append(out, part{Text: t})
			}
		case *penguinv1.OmniMessage_ImageUrl, *penguinv1.OmniMessage_InlineData:
			if u, ok := translate.ImageOf(m); ok {
				ip, err := imagePart(u)
				if err != nil {
					return nil, err
				}
				out = append(out, ip)
				continue
			}
			text, err := translate.InlineText(m.GetInlineData())
			if err != nil {
				return nil, err
			}
			out = append(out, part{Text: text})
		}
	}
	return out, nil
}

// imagePart sends a data URL inline; Gemini does not fetch other URLs, so
// one is named in the text instead.
func imagePart(u string) (part, error) {
	d, isData, err := translate.ParseDataURL(u)
	switch {
	case err != nil:
		return part{}, err
	case isData:
		return part{InlineData: &blob{MimeType: d.MediaType, Data: d.Data}}, nil
	}
	return part{Text: "[image: " + u + "]"}, nil
}
