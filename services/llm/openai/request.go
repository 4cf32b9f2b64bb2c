package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

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

	// The tools are not a field: body appends their encodings, kept by
	// encodedTools, after the rest (see body).
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

// body translates req into the JSON of a Chat Completions request. The
// request's other fields are encoded into a pooled buffer, and the
// "tools" array is appended from encodedTools: encoding/json compacts a
// json.RawMessage again at every Marshal, which was most of the body's
// CPU (the tool schemas are most of a first request's bytes), and the
// same tools are sent at every request of a session. The one allocation
// left is the body itself, of its final size.
func (a *Adapter) body(req *stream.Request, ids *translate.IDs) ([]byte, error) {
	msgs, err := messages(req, ids)
	if err != nil {
		return nil, err
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
	tools := make([][]byte, 0, len(req.Tools))
	size := 0
	for _, t := range req.Tools {
		enc, err := encodedTools.get(t)
		if err != nil {
			return nil, err
		}
		tools = append(tools, enc)
		size += len(enc) + 1
	}
	scratch := scratchPool.Get().(*bytes.Buffer)
	defer putScratch(scratch)
	scratch.Reset()
	if err := json.NewEncoder(scratch).Encode(cr); err != nil {
		return nil, err
	}
	// Encode ends the object with "}\n".
	head := bytes.TrimSuffix(scratch.Bytes(), []byte("}\n"))
	out := append(make([]byte, 0, len(head)+len(`,"tools":[]}`)+size), head...)
	if len(tools) == 0 {
		return append(out, '}'), nil
	}
	out = append(out, `,"tools":[`...)
	for i, enc := range tools {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return append(out, "]}"...), nil
}

// scratchPool holds the buffers bodies are encoded into before their
// tools are appended.
var scratchPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxScratch is the largest buffer put back in scratchPool: a session's
// long history must not stay pinned by the pool.
const maxScratch = 256 << 10

func putScratch(b *bytes.Buffer) {
	if b.Cap() <= maxScratch {
		scratchPool.Put(b)
	}
}

// encodedTools is the JSON of the tools sent, by definition, within
// maxEncodedToolBytes in all; when full it starts over.
var encodedTools = &toolEncodings{m: map[toolKey][]byte{}}

// maxEncodedToolBytes bounds what encodedTools holds: the tools of many
// agents and MCP servers.
const maxEncodedToolBytes = 1 << 20

// toolKey is a tool definition's fields; a map keyed by it hashes the
// strings without copying them.
type toolKey struct{ name, description, parameters string }

type toolEncodings struct {
	mu    sync.Mutex
	m     map[toolKey][]byte
	bytes int
}

// get returns the JSON of t as an element of the "tools" array: a
// function whose parameters are its schema, or an empty object schema
// when it declares none (Chat Completions wants a schema object). The
// slice returned is shared and must not be changed.
func (e *toolEncodings) get(t *penguinv1.ToolDefinition) ([]byte, error) {
	k := toolKey{t.GetName(), t.GetDescription(), t.GetParameters()}
	e.mu.Lock()
	enc, ok := e.m[k]
	e.mu.Unlock()
	if ok {
		return enc, nil
	}
	params := json.RawMessage(k.parameters)
	if p := strings.TrimSpace(k.parameters); p == "" || p == "null" {
		params = emptyObjectSchema
	}
	enc, err := json.Marshal(tool{Type: "function", Function: function{
		Name: k.name, Description: k.description, Parameters: params,
	}})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(enc) > maxEncodedToolBytes/16 {
		return enc, nil
	}
	if e.bytes+len(enc) > maxEncodedToolBytes {
		clear(e.m)
		e.bytes = 0
	}
	e.m[k] = enc
	e.bytes += len(enc)
	return enc, nil
}

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
