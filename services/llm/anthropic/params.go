package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/bytecache"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// buildParams translates req into a Messages request. thinking is the
// resolved wire value: empty or catalog.WireOff for none, a budget in
// tokens, catalog.WireOn for adaptive thinking, or an adaptive effort
// name. A temperature goes out only without thinking, which Messages
// refuses to combine with one.
func buildParams(req *stream.Request, ids *translate.IDs, thinking string) (sdk.MessageNewParams, *failure.Error) {
	p := sdk.MessageNewParams{Model: sdk.Model(req.Model)}
	if thinking == catalog.WireOff {
		thinking = ""
	}
	if fe := outputAndThinking(req, thinking, &p); fe != nil {
		return p, fe
	}
	if req.Temperature != nil && thinking == "" {
		// This SDK version has no field for it; the API still takes it.
		p.SetExtraFields(map[string]any{"temperature": *req.Temperature})
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	}
	for i, t := range req.Tools {
		schema, err := keptInputSchema(t.GetParameters())
		if err != nil {
			return p, invalid("tool %q: %v", t.GetName(), err)
		}
		tp := &sdk.ToolParam{Name: t.GetName(), InputSchema: schema}
		if d := t.GetDescription(); d != "" {
			tp.Description = sdk.String(d)
		}
		if i == len(req.Tools)-1 {
			tp.CacheControl = sdk.NewCacheControlEphemeralParam()
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	type message struct {
		assistant bool
		blocks    []sdk.ContentBlockParamUnion
	}
	var msgs []message
	for _, turn := range translate.Turns(req.Messages) {
		assistant := turn.Role == penguinv1.Role_ROLE_ASSISTANT
		var blocks []sdk.ContentBlockParamUnion
		var err error
		if assistant {
			blocks = assistantBlocks(turn.Messages, ids)
		} else if blocks, err = userBlocks(turn.Messages, ids); err != nil {
			return p, invalid("%v", err)
		}
		if len(blocks) == 0 {
			continue
		}
		// A dropped assistant turn (thinking from another provider only)
		// leaves two user turns side by side; Messages wants them as one.
		if n := len(msgs); n > 0 && msgs[n-1].assistant == assistant {
			msgs[n-1].blocks = append(msgs[n-1].blocks, blocks...)
			continue
		}
		msgs = append(msgs, message{assistant: assistant, blocks: blocks})
	}
	if n := len(msgs); n > 0 {
		markCache(msgs[n-1].blocks)
	}
	for _, m := range msgs {
		if m.assistant {
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(m.blocks...))
		} else {
			p.Messages = append(p.Messages, sdk.NewUserMessage(m.blocks...))
		}
	}
	return p, nil
}

// outputAndThinking sets max_tokens and the thinking configuration. Messages
// requires max_tokens, and a thinking budget must fit below it with room
// for the answer, so both are decided together.
func outputAndThinking(req *stream.Request, thinking string, p *sdk.MessageNewParams) *failure.Error {
	maxTokens := req.MaxTokens
	b, isBudget := budget(thinking)
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
		if isBudget {
			maxTokens += b
		}
		if req.OutputRoom > 0 {
			maxTokens = min(maxTokens, req.OutputRoom)
		}
	}
	p.MaxTokens = maxTokens
	least := max(req.Spec.BudgetMin, minBudget)
	switch {
	case thinking == "":
	case isBudget:
		if b >= maxTokens {
			b = maxTokens * 3 / 4
		}
		if b < least {
			if req.OutputRoom > 0 && maxTokens >= req.OutputRoom {
				return failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED,
					"the context window leaves %d output tokens, too few for a thinking budget of at least %d", maxTokens, least)
			}
			return failure.Unsupported("max_tokens %d is too small for thinking: the budget must be at least %d and below max_tokens", maxTokens, least)
		}
		p.Thinking = sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{BudgetTokens: b}}
	case thinking == catalog.WireOn:
		p.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
	default:
		p.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
		p.OutputConfig = sdk.OutputConfigParam{Effort: sdk.OutputConfigEffort(thinking)}
	}
	return nil
}

// assistantBlocks translates an assistant turn. Thinking goes back only
// with the payload Anthropic issued for it (a signature, or a redacted
// block's data), byte for byte; thinking without one came from elsewhere
// and would be refused, so it is left out.
func assistantBlocks(msgs []*penguinv1.OmniMessage, ids *translate.IDs) []sdk.ContentBlockParamUnion {
	var out []sdk.ContentBlockParamUnion
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Thinking:
			f := p.Thinking.GetFidelity()
			if data, ok := translate.FidelityString(f, "redacted"); ok {
				out = append(out, sdk.NewRedactedThinkingBlock(data))
			} else if sig, ok := translate.FidelityString(f, "signature"); ok {
				out = append(out, sdk.NewThinkingBlock(sig, p.Thinking.GetThinking()))
			}
		case *penguinv1.OmniMessage_Text:
			if t := p.Text.GetText(); t != "" {
				out = append(out, sdk.NewTextBlock(t))
			}
		case *penguinv1.OmniMessage_ToolCall:
			out = append(out, sdk.NewToolUseBlock(ids.Outbound(p.ToolCall.GetToolCallId()), toolInput(p.ToolCall.GetArguments()), p.ToolCall.GetName()))
		}
	}
	return out
}

// toolInput returns a call's arguments for tool_use.input: the model's own
// JSON when it is an object, else an empty object (a call cut off mid-way
// has broken arguments, and Messages takes objects only).
func toolInput(args string) any {
	trimmed := strings.TrimSpace(args)
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	return map[string]any{}
}

// userBlocks translates a user turn: tool results first, as Messages
// requires, then text and images.
func userBlocks(msgs []*penguinv1.OmniMessage, ids *translate.IDs) ([]sdk.ContentBlockParamUnion, error) {
	var out []sdk.ContentBlockParamUnion
	for _, m := range msgs {
		tco := m.GetToolCallOutput()
		if tco == nil {
			continue
		}
		tr := &sdk.ToolResultBlockParam{ToolUseID: ids.Outbound(tco.GetToolCallId())}
		if o := tco.GetOutput(); o != "" {
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: o}})
		}
		for _, img := range tco.GetImages() {
			ib, err := imageBlock(img)
			if err != nil {
				return nil, fmt.Errorf("tool output %s: %w", tco.GetToolCallId(), err)
			}
			tr.Content = append(tr.Content, sdk.ToolResultBlockParamContentUnion{OfImage: ib.OfImage})
		}
		switch tco.GetStopReason() {
		case penguinv1.StopReason_STOP_REASON_UNSPECIFIED, penguinv1.StopReason_STOP_REASON_COMPLETED:
		default:
			tr.IsError = sdk.Bool(true)
		}
		out = append(out, sdk.ContentBlockParamUnion{OfToolResult: tr})
	}
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			if t := p.Text.GetText(); t != "" {
				out = append(out, sdk.NewTextBlock(t))
			}
		case *penguinv1.OmniMessage_ImageUrl, *penguinv1.OmniMessage_InlineData:
			if url, ok := translate.ImageOf(m); ok {
				ib, err := imageBlock(url)
				if err != nil {
					return nil, err
				}
				out = append(out, ib)
				continue
			}
			text, err := translate.InlineText(m.GetInlineData())
			if err != nil {
				return nil, err
			}
			out = append(out, sdk.NewTextBlock(text))
		}
	}
	return out, nil
}

func imageBlock(url string) (sdk.ContentBlockParamUnion, error) {
	d, isData, err := translate.ParseDataURL(url)
	switch {
	case err != nil:
		return sdk.ContentBlockParamUnion{}, err
	case isData:
		return sdk.NewImageBlockBase64(d.MediaType, d.Data), nil
	default:
		return sdk.NewImageBlock(sdk.URLImageSourceParam{URL: url}), nil
	}
}

// markCache puts a prompt-cache breakpoint on the last block that can carry
// one, so the next request of the session reads the whole prefix from the
// cache. With the system prompt's and the last tool's, that is three of the
// four breakpoints Messages allows.
func markCache(blocks []sdk.ContentBlockParamUnion) {
	cc := sdk.NewCacheControlEphemeralParam()
	for i := len(blocks) - 1; i >= 0; i-- {
		b := &blocks[i]
		switch {
		case b.OfText != nil:
			b.OfText.CacheControl = cc
		case b.OfImage != nil:
			b.OfImage.CacheControl = cc
		case b.OfToolResult != nil:
			b.OfToolResult.CacheControl = cc
		case b.OfToolUse != nil:
			b.OfToolUse.CacheControl = cc
		default:
			continue // thinking blocks cannot carry a breakpoint
		}
		return
	}
}

// inputSchemas keeps the input_schema of each tool schema text seen,
// 1 MiB of texts at most: a tool's schema, the same at every request of a
// session, is parsed once rather than at every request. What it keeps is
// shared by the requests, which only read it (the SDK encodes it).
var inputSchemas = bytecache.New[string, sdk.ToolInputSchemaParam](1 << 20)

// keptInputSchema is inputSchema, kept in inputSchemas by the schema's
// text.
func keptInputSchema(params string) (sdk.ToolInputSchemaParam, error) {
	if s, ok := inputSchemas.Get(params); ok {
		return s, nil
	}
	s, err := inputSchema(params)
	if err != nil {
		return s, err
	}
	inputSchemas.Put(params, s, len(params))
	return s, nil
}

// inputSchema turns a tool's JSON Schema text into Messages' input_schema.
func inputSchema(params string) (sdk.ToolInputSchemaParam, error) {
	var s sdk.ToolInputSchemaParam
	if strings.TrimSpace(params) == "" {
		s.Properties = map[string]any{}
		return s, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &fields); err != nil {
		return s, fmt.Errorf("parameters are not a JSON object: %w", err)
	}
	for k, v := range fields {
		switch k {
		case "type":
		case "properties":
			s.Properties = v
		case "required":
			if err := json.Unmarshal(v, &s.Required); err != nil {
				return s, fmt.Errorf("parameters.required is not a list of names: %w", err)
			}
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	if s.Properties == nil {
		s.Properties = map[string]any{}
	}
	return s, nil
}

func invalid(format string, args ...any) *failure.Error {
	fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, format, args...)
	fe.Permanent = true
	return fe
}
