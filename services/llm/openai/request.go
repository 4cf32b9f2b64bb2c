package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// emptyObjectSchema is sent for a tool that declares no parameters, since
// Chat Completions wants a schema object.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// chatRequest is the body of POST /chat/completions, with the reasoning
// parameters of every dialect the adapter speaks; each is sent only when
// set.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []message      `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	MaxTokens           int64          `json:"max_tokens,omitempty"`
	MaxCompletionTokens int64          `json:"max_completion_tokens,omitempty"`
	Temperature         *float32       `json:"temperature,omitempty"`

	// reasoning_effort: OpenAI, DeepSeek, xAI, Groq, Mistral, ….
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// thinking.type: DeepSeek, Zhipu, Z.AI, Moonshot.
	Thinking *thinkingType `json:"thinking,omitempty"`
	// enable_thinking and thinking_budget: Alibaba DashScope.
	EnableThinking *bool `json:"enable_thinking,omitempty"`
	ThinkingBudget int64 `json:"thinking_budget,omitempty"`
	// reasoning: OpenRouter.
	Reasoning *reasoningObject `json:"reasoning,omitempty"`

	// The tools are not a field: body appends their JSON, kept by
	// encodedTools, after the rest (see translate.ToolEncodings.Body).
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type thinkingType struct {
	Type string `json:"type"`
}

type reasoningObject struct {
	Enabled   *bool  `json:"enabled,omitempty"`
	Effort    string `json:"effort,omitempty"`
	MaxTokens int64  `json:"max_tokens,omitempty"`
}

type message struct {
	Role             string     `json:"role"`
	Content          any        `json:"content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	Reasoning        string     `json:"reasoning,omitempty"`
}

type part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// body writes req to buf as the JSON of a Chat Completions request, its
// tools' JSON kept by encodedTools.
func (a *Adapter) body(buf *bytes.Buffer, req *stream.Request, ids *translate.IDs) error {
	msgs, err := messages(req, ids)
	if err != nil {
		return err
	}
	cr := chatRequest{
		Model:         req.Model,
		Messages:      msgs,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
		Temperature:   req.Temperature,
	}
	if req.MaxTokens > 0 {
		if a.completionTokens {
			cr.MaxCompletionTokens = req.MaxTokens
		} else {
			cr.MaxTokens = req.MaxTokens
		}
	}
	a.reasoning(&cr, translate.Thinking(req), req.Spec.Toggle)
	return encodedTools.Body(buf, cr, "tools", req.Tools)
}

// encodedTools is the JSON of the tools sent: a function whose parameters
// are its schema, or an empty object schema when it declares none (Chat
// Completions wants a schema object).
var encodedTools = translate.NewToolEncodings(func(t *penguinv1.ToolDefinition) ([]byte, error) {
	params := json.RawMessage(t.GetParameters())
	if p := strings.TrimSpace(t.GetParameters()); p == "" || p == "null" {
		params = emptyObjectSchema
	}
	return json.Marshal(tool{Type: "function", Function: function{
		Name: t.GetName(), Description: t.GetDescription(), Parameters: params,
	}})
})

// reasoning sets the reasoning parameters of wire, the level's wire value
// (empty: none at all), in the route's dialect. toggle says whether the
// model's reasoning can be switched (DashScope refuses enable_thinking on
// a model that always thinks).
func (a *Adapter) reasoning(cr *chatRequest, wire string, toggle bool) {
	if wire == "" {
		return
	}
	budget, err := strconv.ParseInt(wire, 10, 64)
	isBudget := err == nil
	switch a.dialect {
	case catalog.DialectDeepSeek:
		switch {
		case wire == catalog.WireOff:
			cr.Thinking = &thinkingType{Type: "disabled"}
		case wire == catalog.WireOn || isBudget:
			cr.Thinking = &thinkingType{Type: "enabled"}
		default:
			cr.Thinking = &thinkingType{Type: "enabled"}
			cr.ReasoningEffort = wire
		}
	case catalog.DialectThinkingType:
		cr.Thinking = &thinkingType{Type: "enabled"}
		if wire == catalog.WireOff {
			cr.Thinking.Type = "disabled"
		}
	case catalog.DialectQwen:
		if toggle {
			on := wire != catalog.WireOff
			cr.EnableThinking = &on
		}
		if isBudget && budget > 0 {
			cr.ThinkingBudget = budget
		}
	case catalog.DialectOpenRouter:
		r := &reasoningObject{}
		switch {
		case wire == catalog.WireOff || wire == catalog.WireOn:
			on := wire == catalog.WireOn
			r.Enabled = &on
		case isBudget:
			r.MaxTokens = budget
		default:
			r.Effort = wire
		}
		cr.Reasoning = r
	default: // catalog.DialectEffort
		if wire != catalog.WireOff && wire != catalog.WireOn && !isBudget {
			cr.ReasoningEffort = wire
		}
	}
}

// messages translates the conversation: the system prompt, then one
// message per assistant turn, and per user turn its tool results (as "tool"
// messages, which must follow the assistant's calls directly) and then one
// user message with its text and images.
func messages(req *stream.Request, ids *translate.IDs) ([]message, error) {
	var out []message
	if req.System != "" {
		out = append(out, message{Role: "system", Content: req.System})
	}
	for _, turn := range translate.Turns(req.Messages) {
		if turn.Role == penguinv1.Role_ROLE_ASSISTANT {
			if m, ok := assistant(turn.Messages, ids); ok {
				out = append(out, m)
			}
			continue
		}
		ms, err := user(turn.Messages, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// assistant translates one assistant turn.
//
// Thinking goes back in the field it arrived in, as its fidelity records:
// reasoning_content for DeepSeek, which requires it back in tool-call turns,
// and reasoning for OpenRouter and vLLM, which take it back so a reasoning
// model keeps its train of thought across turns. Thinking without that
// record came from another provider (Anthropic's signed blocks, say), or
// from content parts, and is not sent at all: an OpenAI-compatible server
// would take it for its own model's reasoning. A turn with neither text
// nor tool calls is dropped, since Chat Completions refuses an empty
// assistant message.
func assistant(msgs []*penguinv1.OmniMessage, ids *translate.IDs) (message, bool) {
	m := message{Role: "assistant"}
	var text, reasoningContent, reasoning strings.Builder
	for _, msg := range msgs {
		switch p := msg.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			text.WriteString(p.Text.GetText())
		case *penguinv1.OmniMessage_Thinking:
			switch f, _ := translate.FidelityString(p.Thinking.GetFidelity(), reasoningFieldKey); f {
			case fieldReasoningContent:
				reasoningContent.WriteString(p.Thinking.GetThinking())
			case fieldReasoning:
				reasoning.WriteString(p.Thinking.GetThinking())
			}
		case *penguinv1.OmniMessage_ToolCall:
			args := p.ToolCall.GetArguments()
			if args == "" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, toolCall{
				ID:       ids.Outbound(p.ToolCall.GetToolCallId()),
				Type:     "function",
				Function: functionCall{Name: p.ToolCall.GetName(), Arguments: args},
			})
		}
	}
	if t := text.String(); t != "" {
		m.Content = t
	}
	m.ReasoningContent = reasoningContent.String()
	m.Reasoning = reasoning.String()
	return m, m.Content != nil || len(m.ToolCalls) > 0
}

// user translates one user turn. Chat Completions tool messages carry text
// only, so a tool result's images follow in the user message, each set
// introduced by a line naming its call.
func user(msgs []*penguinv1.OmniMessage, ids *translate.IDs) ([]message, error) {
	var out []message
	var parts []part
	for _, msg := range msgs {
		tco := msg.GetToolCallOutput()
		if tco == nil {
			continue
		}
		content := tco.GetOutput()
		if content == "" {
			content = "(no output)"
		}
		id := ids.Outbound(tco.GetToolCallId())
		out = append(out, message{Role: "tool", ToolCallID: id, Content: content})
		if len(tco.GetImages()) > 0 {
			parts = append(parts, textPart(fmt.Sprintf("Images returned by tool call %s:", id)))
			for _, img := range tco.GetImages() {
				parts = append(parts, imagePart(img))
			}
		}
	}
	for _, msg := range msgs {
		switch p := msg.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			parts = append(parts, textPart(p.Text.GetText()))
		case *penguinv1.OmniMessage_ImageUrl:
			parts = append(parts, imagePart(p.ImageUrl.GetImageUrl()))
		case *penguinv1.OmniMessage_InlineData:
			if url, ok := translate.ImageOf(msg); ok {
				parts = append(parts, imagePart(url))
				continue
			}
			text, err := translate.InlineText(p.InlineData)
			if err != nil {
				return nil, err
			}
			parts = append(parts, textPart(text))
		}
	}
	switch {
	case len(parts) == 1 && parts[0].Type == "text":
		out = append(out, message{Role: "user", Content: parts[0].Text})
	case len(parts) > 0:
		out = append(out, message{Role: "user", Content: parts})
	}
	return out, nil
}

func textPart(s string) part { return part{Type: "text", Text: s} }

func imagePart(url string) part { return part{Type: "image_url", ImageURL: &imageURL{URL: url}} }
