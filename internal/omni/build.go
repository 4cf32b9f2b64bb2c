// Package omni holds the small vocabulary every service speaks over the
// penguin.v1 contract: constructors for the common OmniMessages, guards that
// classify them, token arithmetic, and a validator of the streaming
// discipline. It sits on the generated types only, so the llm, environment
// and engine services, their tests and the CLI all build messages and check
// streams the same way.
package omni

import (
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// now returns the time stamped on new messages. Constructors use the wall
// clock; tests that need stable timestamps overwrite the field afterwards.
func now() *timestamppb.Timestamp { return timestamppb.New(time.Now()) }

// UserText returns a user-role text from the human user.
func UserText(text string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_Text{
		Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: text},
	}}
}

// SenderText returns a user-role text produced by someone other than the
// human user, such as the harness (carry-over, steering) or a parent agent.
func SenderText(sender penguinv1.Sender, text string) *penguinv1.OmniMessage {
	m := UserText(text)
	m.GetText().Sender = sender
	return m
}

// AssistantText returns a complete assistant text.
func AssistantText(text string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_Text{
		Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_ASSISTANT, Text: text},
	}}
}

// Thinking returns a complete thinking block with its opaque fidelity.
func Thinking(thinking string, fidelity []byte) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_Thinking{
		Thinking: &penguinv1.Thinking{Role: penguinv1.Role_ROLE_ASSISTANT, Thinking: thinking, Fidelity: fidelity},
	}}
}

// ImageURL returns a user image given by a web or data URL.
func ImageURL(url string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_ImageUrl{
		ImageUrl: &penguinv1.ImageUrl{Role: penguinv1.Role_ROLE_USER, ImageUrl: url},
	}}
}

// ToolCall returns a complete tool call. The arguments are kept exactly as
// the model wrote them.
func ToolCall(id, name, arguments string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_ToolCall{
		ToolCall: &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: name, Arguments: arguments, ToolCallId: id},
	}}
}

// ToolCallOutput returns a complete tool output. A stop reason of
// unspecified or completed both mean the tool finished normally.
func ToolCallOutput(id, output string, stop penguinv1.StopReason, images ...string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_ToolCallOutput{
		ToolCallOutput: &penguinv1.ToolCallOutput{Role: penguinv1.Role_ROLE_USER, Output: output, Images: images, ToolCallId: id, StopReason: stop},
	}}
}

// PartialText returns one fragment of an assistant text segment.
func PartialText(phase penguinv1.StreamEventType, text string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_PartialText{
		PartialText: &penguinv1.PartialText{Role: penguinv1.Role_ROLE_ASSISTANT, EventType: phase, Text: text},
	}}
}

// PartialThinking returns one fragment of a thinking segment.
func PartialThinking(phase penguinv1.StreamEventType, thinking string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_PartialThinking{
		PartialThinking: &penguinv1.PartialThinking{Role: penguinv1.Role_ROLE_ASSISTANT, EventType: phase, Thinking: thinking},
	}}
}

// PartialToolCall returns one fragment of a tool call's arguments.
func PartialToolCall(phase penguinv1.StreamEventType, id, name, arguments string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_PartialToolCall{
		PartialToolCall: &penguinv1.PartialToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, EventType: phase, Name: name, Arguments: arguments, ToolCallId: id},
	}}
}

// PartialToolCallOutput returns one fragment of a tool's output.
func PartialToolCallOutput(phase penguinv1.StreamEventType, id, output string, images ...string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_PartialToolCallOutput{
		PartialToolCallOutput: &penguinv1.PartialToolCallOutput{Role: penguinv1.Role_ROLE_USER, EventType: phase, Output: output, Images: images, ToolCallId: id},
	}}
}

// RequestBegin returns the event that opens a model request.
func RequestBegin() *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}}
}

// RequestEnd returns the event that closes a model request. attempt is zero
// on a clean first try and retryInMs zero when no retry follows.
func RequestEnd(status penguinv1.StopReason, errorMessage string, attempt int32, retryInMs int64) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{
		Status: status, ErrorMessage: errorMessage, Attempt: attempt, RetryInMs: retryInMs,
	}}}
}

// TokenUsage returns a usage event with the session's running totals and
// this request's counts.
func TokenUsage(session, request *penguinv1.TokenCounts) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{
		Session: session, Request: request,
	}}}
}

// ApprovalDecision returns the audit record of a decision on a tool call.
func ApprovalDecision(toolCallID string, decision penguinv1.Decision) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: &penguinv1.ApprovalDecision{
		Decision: decision, ToolCallId: toolCallID,
	}}}
}

// Abort returns the event recording a user interrupt.
func Abort(reason string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_Abort{Abort: &penguinv1.Abort{Reason: reason}}}
}

// SubagentPointer returns the parent log's pointer to a child session.
func SubagentPointer(childSessionID string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_Subagent{Subagent: &penguinv1.Subagent{SessionId: childSessionID}}}
}

// ToolListReady returns the event carrying the tool list sent to the model.
func ToolListReady(tools []*penguinv1.ToolDefinition) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: &penguinv1.ToolListReady{Tools: tools}}}
}

// McpConnectBegin returns the event that opens the connection of a
// session's MCP servers, named in the order they are configured.
func McpConnectBegin(servers []string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_McpConnectBegin{McpConnectBegin: &penguinv1.McpConnectBegin{Servers: servers}}}
}

// McpConnectEnd returns the event that closes it, with the overall status
// and one result per server.
func McpConnectEnd(end *penguinv1.McpConnectEnd) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: now(), Payload: &penguinv1.OmniMessage_McpConnectEnd{McpConnectEnd: end}}
}

// WithOrigin returns a copy of m forwarded one hop up from the child session
// childSessionID: the child's id is prepended to the origin chain, so the
// chain reads outer to inner. m itself is not modified, because the child's
// own log and subscribers still hold it.
func WithOrigin(m *penguinv1.OmniMessage, childSessionID string) *penguinv1.OmniMessage {
	c := proto.Clone(m).(*penguinv1.OmniMessage)
	c.Origin = append([]string{childSessionID}, m.GetOrigin()...)
	return c
}

// AddTokenCounts returns the sum of two token counts; nil counts as zero.
// The cost is summed where either side has one (a side without a price adds
// nothing), and a side whose usage was not reported marks the sum, so a
// session's totals say when they are a lower bound.
func AddTokenCounts(a, b *penguinv1.TokenCounts) *penguinv1.TokenCounts {
	sum := &penguinv1.TokenCounts{
		CacheRead:  a.GetCacheRead() + b.GetCacheRead(),
		CacheWrite: a.GetCacheWrite() + b.GetCacheWrite(),
		Output:     a.GetOutput() + b.GetOutput(),
		Total:      a.GetTotal() + b.GetTotal(),
		Reasoning:  a.GetReasoning() + b.GetReasoning(),
		Unreported: a.GetUnreported() || b.GetUnreported(),
	}
	if (a != nil && a.CostUsd != nil) || (b != nil && b.CostUsd != nil) {
		cost := a.GetCostUsd() + b.GetCostUsd()
		sum.CostUsd = &cost
	}
	return sum
}
