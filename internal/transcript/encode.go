package transcript

import (
	"encoding/json"
	"errors"
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// encodePayload returns the envelope type and the JSON shape of m's
// payload. Its phases follow the trace format's families: the
// session_meta line, complete model messages, partials, and events.
func encodePayload(m *penguinv1.OmniMessage) (string, any, error) {
	e := &encoder{}
	switch p := m.GetPayload().(type) {
	case nil:
		return "", nil, errors.New("message has no payload")
	case *penguinv1.OmniMessage_SessionMeta:
		return e.done(TypeSessionMeta, sessionMeta(p.SessionMeta))
	}
	if v, ok := e.model(m); ok {
		return e.done(TypeModelMsg, v)
	}
	if v, ok := e.partial(m); ok {
		return e.done(TypeModelMsg, v)
	}
	if v, ok := e.event(m); ok {
		return e.done(TypeEventMsg, v)
	}
	return "", nil, fmt.Errorf("payload %T has no trace form", m.GetPayload())
}

// encoder collects the errors of one payload's fields, so that a line
// that cannot be written says everything wrong with it at once.
type encoder struct {
	errs []error
}

// check keeps err and returns s.
func (e *encoder) check(s string, err error) string {
	e.errs = append(e.errs, err)
	return s
}

// fidelity encodes a fidelity blob.
func (e *encoder) fidelity(b []byte) json.RawMessage {
	r, err := fidelity(b)
	e.errs = append(e.errs, err)
	return r
}

// done returns the line's parts, or every error its fields had.
func (e *encoder) done(typ string, v any) (string, any, error) {
	if err := errors.Join(e.errs...); err != nil {
		return "", nil, err
	}
	return typ, v, nil
}

func sessionMeta(s *penguinv1.SessionMeta) sessionMetaJSON {
	return sessionMetaJSON{
		SessionID: s.GetSessionId(), Provider: s.GetProvider(), ModelID: s.GetModelId(),
		ModelContextWindow: contextWindow(s.GetModelContextWindow()), SystemPrompt: s.GetSystemPrompt(),
		AgentState: s.GetAgentState(), Workspace: s.GetWorkspace(), Source: s.GetSource(),
	}
}

// model encodes a complete model message; ok is false for other payloads.
func (e *encoder) model(m *penguinv1.OmniMessage) (v any, ok bool) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		x := p.Text
		return textJSON{
			Type: "text", Role: e.check(roles().required(x.GetRole())), Text: x.GetText(),
			Sender: e.check(senders().name(x.GetSender())), Fidelity: e.fidelity(x.GetFidelity()),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_Thinking:
		x := p.Thinking
		return thinkingJSON{
			Type: "thinking", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)), Thinking: x.GetThinking(),
			Fidelity: e.fidelity(x.GetFidelity()), StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_InlineThinking:
		x := p.InlineThinking
		return dataJSON{
			Type: "inline_thinking", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			Data: x.GetData(), MimeType: x.GetMimeType(), Fidelity: e.fidelity(x.GetFidelity()),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_InlineData:
		x := p.InlineData
		return dataJSON{
			Type: "inline_data", Role: e.check(roles().required(x.GetRole())),
			Data: x.GetData(), MimeType: x.GetMimeType(), Fidelity: e.fidelity(x.GetFidelity()),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_ImageUrl:
		x := p.ImageUrl
		return imageURLJSON{
			Type: "image_url", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)), ImageURL: x.GetImageUrl(),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_ToolCall:
		x := p.ToolCall
		return toolCallJSON{
			Type: "tool_call", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			Name: x.GetName(), Arguments: x.GetArguments(), ToolCallID: x.GetToolCallId(),
			Fidelity: e.fidelity(x.GetFidelity()), StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_ToolCallOutput:
		x := p.ToolCallOutput
		return toolCallOutputJSON{
			Type: "tool_call_output", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)),
			Output: x.GetOutput(), Images: x.GetImages(), ToolCallID: x.GetToolCallId(),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	}
	return nil, false
}

// partial encodes a partial model message; ok is false for other
// payloads.
func (e *encoder) partial(m *penguinv1.OmniMessage) (v any, ok bool) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialText:
		x := p.PartialText
		return partialTextJSON{
			Type: "partial_text", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: e.check(eventTypes().required(x.GetEventType())), Text: x.GetText(),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_PartialThinking:
		x := p.PartialThinking
		return partialThinkingJSON{
			Type: "partial_thinking", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: e.check(eventTypes().required(x.GetEventType())), Thinking: x.GetThinking(),
			StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_PartialToolCall:
		x := p.PartialToolCall
		return partialToolCallJSON{
			Type: "partial_tool_call", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: e.check(eventTypes().required(x.GetEventType())), Name: x.GetName(), Arguments: x.GetArguments(),
			ToolCallID: x.GetToolCallId(), StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		x := p.PartialToolCallOutput
		return partialToolCallOutputJSON{
			Type: "partial_tool_call_output", Role: e.check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)),
			EventType: e.check(eventTypes().required(x.GetEventType())), Output: x.GetOutput(), Images: x.GetImages(),
			ToolCallID: x.GetToolCallId(), StopReason: e.check(stopReason(x.GetStopReason())),
		}, true
	}
	return nil, false
}

// event encodes an event; ok is false for other payloads.
func (e *encoder) event(m *penguinv1.OmniMessage) (v any, ok bool) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_ToolListReady:
		return e.toolList(p.ToolListReady), true
	case *penguinv1.OmniMessage_McpConnectBegin:
		servers := p.McpConnectBegin.GetServers()
		if servers == nil {
			servers = []string{}
		}
		return mcpConnectBeginJSON{Type: "mcp_connect_begin", Servers: servers}, true
	case *penguinv1.OmniMessage_McpConnectEnd:
		return e.mcpConnectEnd(p.McpConnectEnd), true
	case *penguinv1.OmniMessage_RequestBegin:
		return typeOnlyJSON{Type: "request_begin"}, true
	case *penguinv1.OmniMessage_RequestEnd:
		x := p.RequestEnd
		return requestEndJSON{
			Type: "request_end", Status: e.check(stopReasons("request_end status").required(x.GetStatus())),
			ErrorMessage: x.GetErrorMessage(), Attempt: x.GetAttempt(), RetryInMS: x.GetRetryInMs(),
		}, true
	case *penguinv1.OmniMessage_ApprovalDecision:
		x := p.ApprovalDecision
		return approvalDecisionJSON{
			Type: "approval_decision", Decision: e.check(decisions().required(x.GetDecision())), ToolCallID: x.GetToolCallId(),
		}, true
	case *penguinv1.OmniMessage_TokenUsage:
		x := p.TokenUsage
		return tokenUsageJSON{Type: "token_usage", Session: counts(x.GetSession()), Request: counts(x.GetRequest()),
			Provider: x.GetProvider(), ModelID: x.GetModelId()}, true
	case *penguinv1.OmniMessage_CompactionBegin:
		x := p.CompactionBegin
		return compactionBeginJSON{
			Type: "compaction_begin", Reason: e.check(compactionReasons().required(x.GetReason())),
			Mode: e.check(compactionModes().required(x.GetMode())), Context: x.GetContext(), Turns: x.GetTurns(),
		}, true
	case *penguinv1.OmniMessage_CompactionEnd:
		x := p.CompactionEnd
		return compactionEndJSON{
			Type: "compaction_end", Reason: e.check(compactionReasons().required(x.GetReason())),
			Mode: e.check(compactionModes().required(x.GetMode())), Status: e.check(stopReasons("compaction_end status").required(x.GetStatus())),
			ErrorMessage: x.GetErrorMessage(), Attempt: x.GetAttempt(),
		}, true
	case *penguinv1.OmniMessage_Abort:
		a := abortJSON{Type: "abort"}
		if r := p.Abort.GetReason(); r != "" {
			a.Reason = &r
		}
		return a, true
	case *penguinv1.OmniMessage_Subagent:
		return subagentJSON{Type: "subagent", SessionID: p.Subagent.GetSessionId()}, true
	}
	if v, ok := e.goalEvent(m); ok {
		return v, true
	}
	return e.workspaceEvent(m)
}

func (e *encoder) toolList(x *penguinv1.ToolListReady) toolListReadyJSON {
	tools := make([]toolDefinitionJSON, 0, len(x.GetTools()))
	for _, d := range x.GetTools() {
		td := toolDefinitionJSON{Name: d.GetName(), Description: d.GetDescription()}
		if d.GetParameters() != "" {
			raw, err := rawJSON(fmt.Sprintf("parameters of tool %q", d.GetName()), []byte(d.GetParameters()), false)
			e.errs = append(e.errs, err)
			td.Parameters = raw
		}
		tools = append(tools, td)
	}
	return toolListReadyJSON{Type: "tool_list_ready", Tools: tools}
}

func (e *encoder) mcpConnectEnd(x *penguinv1.McpConnectEnd) mcpConnectEndJSON {
	results := make([]mcpServerResultJSON, 0, len(x.GetResults()))
	for _, r := range x.GetResults() {
		res := mcpServerResultJSON{
			Server: r.GetServer(), Transport: r.GetTransport(), Status: e.check(mcpStatuses().required(r.GetStatus())),
			DurationMS: r.GetDurationMs(), Error: r.GetError(),
		}
		// The trace format sets tools on a completed server only.
		if r.GetStatus() == penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED || r.GetTools() != 0 {
			n := r.GetTools()
			res.Tools = &n
		}
		results = append(results, res)
	}
	return mcpConnectEndJSON{Type: "mcp_connect_end", Status: e.check(mcpStatuses().required(x.GetStatus())), Results: results}
}
