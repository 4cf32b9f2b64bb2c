package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// emptyObjectSchema is sent for a tool that declares no parameters, since
// Chat Completions wants a schema object.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest translates req into a Chat Completions request, and
// returns with it the thinking that goes back in the "reasoning" field,
// which go-openai's message type cannot carry (see [reasoningFields]).
func buildRequest(req *stream.Request, ids *translate.IDs, effort string, completionTokens bool) (goopenai.ChatCompletionRequest, reasoningFields, error) {
	msgs, reasoning, err := messages(req, ids)
	if err != nil {
		return goopenai.ChatCompletionRequest{}, nil, err
	}
	cr := goopenai.ChatCompletionRequest{
		Model:           req.Model,
		Messages:        msgs,
		StreamOptions:   &goopenai.StreamOptions{IncludeUsage: true},
		ReasoningEffort: effort,
	}
	if req.MaxTokens > 0 {
		if completionTokens {
			cr.MaxCompletionTokens = int(req.MaxTokens)
		} else {
			cr.MaxTokens = int(req.MaxTokens)
		}
	}
	for _, t := range req.Tools {
		params := json.RawMessage(t.GetParameters())
		if strings.TrimSpace(t.GetParameters()) == "" {
			params = emptyObjectSchema
		}
		cr.Tools = append(cr.Tools, goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
			Name: t.GetName(), Description: t.GetDescription(), Parameters: params,
		}})
	}
	return cr, reasoning, nil
}

// messages translates the conversation: the system prompt, then one
// message per assistant turn, and per user turn its tool results (as "tool"
// messages, which must follow the assistant's calls directly) and then one
// user message with its text and images. It also returns the "reasoning"
// field of each assistant message that has one, by its index in the list.
func messages(req *stream.Request, ids *translate.IDs) ([]goopenai.ChatCompletionMessage, reasoningFields, error) {
	var out []goopenai.ChatCompletionMessage
	var fields reasoningFields
	if req.System != "" {
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: req.System})
	}
	for _, turn := range translate.Turns(req.Messages) {
		if turn.Role == penguinv1.Role_ROLE_ASSISTANT {
			if m, reasoning, ok := assistant(turn.Messages, ids); ok {
				if reasoning != "" {
					if fields == nil {
						fields = reasoningFields{}
					}
					fields[len(out)] = reasoning
				}
				out = append(out, m)
			}
			continue
		}
		ms, err := user(turn.Messages, ids)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ms...)
	}
	return out, fields, nil
}

// assistant translates one assistant turn, and returns its thinking for
// the "reasoning" field apart, since go-openai's message has no such field.
//
// Thinking goes back in the field it arrived in, as its fidelity records:
// reasoning_content for DeepSeek, which requires it back in tool-call turns,
// and reasoning for OpenRouter and vLLM, which take it back so a reasoning
// model keeps its train of thought across turns. Thinking without that
// record came from another provider (Anthropic's signed blocks, say) and is
// not sent at all: an OpenAI-compatible server would take it for its own
// model's reasoning, and its signature means nothing there. A turn with
// neither text nor tool calls is dropped, since Chat Completions refuses an
// empty assistant message.
func assistant(msgs []*penguinv1.OmniMessage, ids *translate.IDs) (goopenai.ChatCompletionMessage, string, bool) {
	m := goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant}
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
			m.ToolCalls = append(m.ToolCalls, goopenai.ToolCall{
				ID:       ids.Outbound(p.ToolCall.GetToolCallId()),
				Type:     goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: p.ToolCall.GetName(), Arguments: args},
			})
		}
	}
	m.Content = text.String()
	m.ReasoningContent = reasoningContent.String()
	return m, reasoning.String(), m.Content != "" || len(m.ToolCalls) > 0
}

// user translates one user turn. Chat Completions tool messages carry text
// only, so a tool result's images follow in the user message, each set
// introduced by a line naming its call.
func user(msgs []*penguinv1.OmniMessage, ids *translate.IDs) ([]goopenai.ChatCompletionMessage, error) {
	var out []goopenai.ChatCompletionMessage
	var parts []goopenai.ChatMessagePart
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
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleTool, ToolCallID: id, Content: content})
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
	case len(parts) == 1 && parts[0].Type == goopenai.ChatMessagePartTypeText:
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: parts[0].Text})
	case len(parts) > 0:
		out = append(out, goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, MultiContent: parts})
	}
	return out, nil
}

func textPart(s string) goopenai.ChatMessagePart {
	return goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeText, Text: s}
}

func imagePart(url string) goopenai.ChatMessagePart {
	return goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeImageURL, ImageURL: &goopenai.ChatMessageImageURL{URL: url}}
}
