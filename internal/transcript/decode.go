package transcript

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// decodePayload fills m's payload from the JSON of a line whose envelope
// type is typ. Its phases: the session_meta line, which has no payload
// type of its own; the payload's type, checked against the envelope; then
// the payload by family (complete model messages, partials, events); and
// last every bad field at once.
func decodePayload(typ string, raw json.RawMessage, m *penguinv1.OmniMessage) error {
	if typ == TypeSessionMeta {
		return decodeSessionMeta(raw, m)
	}
	ptype, err := payloadType(typ, raw)
	if err != nil {
		return err
	}
	d := &decoder{ptype: ptype, raw: raw}
	switch {
	case typ == TypeEventMsg:
		err = d.event(m)
	case strings.HasPrefix(ptype, "partial_"):
		err = d.partial(m)
	default:
		err = d.model(m)
	}
	if err != nil {
		return err
	}
	if err := errors.Join(d.errs...); err != nil {
		return fmt.Errorf("%s payload: %w", ptype, err)
	}
	return nil
}

func decodeSessionMeta(raw json.RawMessage, m *penguinv1.OmniMessage) error {
	var x sessionMetaJSON
	if err := json.Unmarshal(raw, &x); err != nil {
		return fmt.Errorf("session_meta payload: %w", err)
	}
	m.Payload = &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{
		SessionId: x.SessionID, Provider: x.Provider, ModelId: x.ModelID, ModelContextWindow: int64(x.ModelContextWindow),
		SystemPrompt: x.SystemPrompt, AgentState: x.AgentState, Workspace: x.Workspace, Source: x.Source,
	}}
	return nil
}

// payloadType reads the payload's type and checks that it belongs in an
// envelope of type typ.
func payloadType(typ string, raw json.RawMessage) (string, error) {
	var head typeOnlyJSON
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	family, ok := payloadFamily(head.Type)
	switch {
	case head.Type == "":
		return "", errors.New("payload has no type")
	case !ok:
		return "", fmt.Errorf("unknown payload type %q", head.Type)
	case typ != TypeModelMsg && typ != TypeEventMsg:
		return "", fmt.Errorf("unknown message type %q", typ)
	case family != typ:
		return "", fmt.Errorf("payload type %q belongs in a %s, not a %s", head.Type, family, typ)
	}
	return head.Type, nil
}

// decoder reads one payload of type ptype and collects the errors of its
// fields, so that a bad line says everything wrong with it at once.
type decoder struct {
	ptype string
	raw   json.RawMessage
	errs  []error
}

func (d *decoder) check(err error) { d.errs = append(d.errs, err) }

// unmarshal reads the payload into v; its error ends the decoding.
func (d *decoder) unmarshal(v any) error {
	if err := json.Unmarshal(d.raw, v); err != nil {
		return fmt.Errorf("%s payload: %w", d.ptype, err)
	}
	return nil
}

// role reads a role; an empty one is fixed, for payloads whose role
// never varies, and required otherwise.
func (d *decoder) role(s string, fixed penguinv1.Role) penguinv1.Role {
	if s == "" && fixed != penguinv1.Role_ROLE_UNSPECIFIED {
		return fixed
	}
	r, err := roles().requiredValue(s)
	d.check(err)
	return r
}

func (d *decoder) stop(s string) penguinv1.StopReason {
	r, err := stopReasons("stop_reason").value(s)
	d.check(err)
	return r
}

func (d *decoder) phase(s string) penguinv1.StreamEventType {
	r, err := eventTypes().requiredValue(s)
	d.check(err)
	return r
}

// model decodes a complete model message.
func (d *decoder) model(m *penguinv1.OmniMessage) error {
	switch d.ptype {
	case "text":
		var x textJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		sender, err := senders().value(x.Sender)
		d.check(err)
		m.Payload = &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{
			Role: d.role(x.Role, penguinv1.Role_ROLE_UNSPECIFIED), Text: x.Text, Sender: sender,
			Fidelity: jsonBytes(x.Fidelity), StopReason: d.stop(x.StopReason),
		}}
	case "thinking":
		var x thinkingJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_Thinking{Thinking: &penguinv1.Thinking{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Thinking: x.Thinking,
			Fidelity: jsonBytes(x.Fidelity), StopReason: d.stop(x.StopReason),
		}}
	case "inline_thinking":
		var x dataJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_InlineThinking{InlineThinking: &penguinv1.InlineThinking{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Data: x.Data, MimeType: x.MimeType,
			Fidelity: jsonBytes(x.Fidelity), StopReason: d.stop(x.StopReason),
		}}
	case "inline_data":
		var x dataJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_InlineData{InlineData: &penguinv1.InlineData{
			Role: d.role(x.Role, penguinv1.Role_ROLE_UNSPECIFIED), Data: x.Data, MimeType: x.MimeType,
			Fidelity: jsonBytes(x.Fidelity), StopReason: d.stop(x.StopReason),
		}}
	case "image_url":
		var x imageURLJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ImageUrl{ImageUrl: &penguinv1.ImageUrl{
			Role: d.role(x.Role, penguinv1.Role_ROLE_USER), ImageUrl: x.ImageURL, StopReason: d.stop(x.StopReason),
		}}
	case "tool_call":
		var x toolCallJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ToolCall{ToolCall: &penguinv1.ToolCall{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Name: x.Name, Arguments: x.Arguments, ToolCallId: x.ToolCallID,
			Fidelity: jsonBytes(x.Fidelity), StopReason: d.stop(x.StopReason),
		}}
	case "tool_call_output":
		var x toolCallOutputJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
			Role: d.role(x.Role, penguinv1.Role_ROLE_USER), Output: x.Output, Images: x.Images, ToolCallId: x.ToolCallID,
			StopReason: d.stop(x.StopReason),
		}}
	}
	return nil
}

// partial decodes a partial model message.
func (d *decoder) partial(m *penguinv1.OmniMessage) error {
	switch d.ptype {
	case "partial_text":
		var x partialTextJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialText{PartialText: &penguinv1.PartialText{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: d.phase(x.EventType), Text: x.Text, StopReason: d.stop(x.StopReason),
		}}
	case "partial_thinking":
		var x partialThinkingJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialThinking{PartialThinking: &penguinv1.PartialThinking{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: d.phase(x.EventType), Thinking: x.Thinking, StopReason: d.stop(x.StopReason),
		}}
	case "partial_tool_call":
		var x partialToolCallJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialToolCall{PartialToolCall: &penguinv1.PartialToolCall{
			Role: d.role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: d.phase(x.EventType), Name: x.Name, Arguments: x.Arguments,
			ToolCallId: x.ToolCallID, StopReason: d.stop(x.StopReason),
		}}
	case "partial_tool_call_output":
		var x partialToolCallOutputJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialToolCallOutput{PartialToolCallOutput: &penguinv1.PartialToolCallOutput{
			Role: d.role(x.Role, penguinv1.Role_ROLE_USER), EventType: d.phase(x.EventType), Output: x.Output, Images: x.Images,
			ToolCallId: x.ToolCallID, StopReason: d.stop(x.StopReason),
		}}
	}
	return nil
}

// event decodes an event.
func (d *decoder) event(m *penguinv1.OmniMessage) error {
	switch d.ptype {
	case "tool_list_ready":
		var x toolListReadyJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		tools := make([]*penguinv1.ToolDefinition, 0, len(x.Tools))
		for _, t := range x.Tools {
			tools = append(tools, &penguinv1.ToolDefinition{Name: t.Name, Description: t.Description, Parameters: string(jsonBytes(t.Parameters))})
		}
		m.Payload = &penguinv1.OmniMessage_ToolListReady{ToolListReady: &penguinv1.ToolListReady{Tools: tools}}
	case "mcp_connect_begin":
		var x mcpConnectBeginJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_McpConnectBegin{McpConnectBegin: &penguinv1.McpConnectBegin{Servers: nonEmpty(x.Servers)}}
	case "mcp_connect_end":
		return d.mcpConnectEnd(m)
	case "request_begin":
		m.Payload = &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}
	case "request_end":
		var x requestEndJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		status, err := stopReasons("request_end status").requiredValue(x.Status)
		d.check(err)
		m.Payload = &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{
			Status: status, ErrorMessage: x.ErrorMessage, Attempt: x.Attempt, RetryInMs: x.RetryInMS,
		}}
	case "approval_decision":
		var x approvalDecisionJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		dec, err := decisions().requiredValue(x.Decision)
		d.check(err)
		m.Payload = &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: &penguinv1.ApprovalDecision{Decision: dec, ToolCallId: x.ToolCallID}}
	case "token_usage":
		var x tokenUsageJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{Session: uncounts(x.Session), Request: uncounts(x.Request),
			Provider: x.Provider, ModelId: x.ModelID}}
	case "compaction_begin", "compaction_end":
		return d.compaction(m)
	case "abort":
		var x abortJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		a := &penguinv1.Abort{}
		if x.Reason != nil {
			a.Reason = *x.Reason
		}
		m.Payload = &penguinv1.OmniMessage_Abort{Abort: a}
	case "subagent":
		var x subagentJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_Subagent{Subagent: &penguinv1.Subagent{SessionId: x.SessionID}}
	case "goal_started", "goal_round", "goal_finished":
		return d.goalEvent(d.ptype, m)
	case "workspace_change":
		return d.workspaceEvent(m)
	}
	return nil
}

func (d *decoder) mcpConnectEnd(m *penguinv1.OmniMessage) error {
	var x mcpConnectEndJSON
	if err := d.unmarshal(&x); err != nil {
		return err
	}
	status, err := mcpStatuses().requiredValue(x.Status)
	d.check(err)
	var results []*penguinv1.McpServerConnectResult
	for _, r := range x.Results {
		st, err := mcpStatuses().requiredValue(r.Status)
		d.check(err)
		res := &penguinv1.McpServerConnectResult{Server: r.Server, Transport: r.Transport, Status: st, DurationMs: r.DurationMS, Error: r.Error}
		if r.Tools != nil {
			res.Tools = *r.Tools
		}
		results = append(results, res)
	}
	m.Payload = &penguinv1.OmniMessage_McpConnectEnd{McpConnectEnd: &penguinv1.McpConnectEnd{Status: status, Results: results}}
	return nil
}

// compaction decodes compaction_begin and compaction_end, which share
// their reason and mode.
func (d *decoder) compaction(m *penguinv1.OmniMessage) error {
	if d.ptype == "compaction_begin" {
		var x compactionBeginJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		reason, mode := d.reasonAndMode(x.Reason, x.Mode)
		m.Payload = &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{
			Reason: reason, Mode: mode, Context: x.Context, Turns: x.Turns,
		}}
		return nil
	}
	var x compactionEndJSON
	if err := d.unmarshal(&x); err != nil {
		return err
	}
	reason, mode := d.reasonAndMode(x.Reason, x.Mode)
	status, err := stopReasons("compaction_end status").requiredValue(x.Status)
	d.check(err)
	m.Payload = &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
		Reason: reason, Mode: mode, Status: status, ErrorMessage: x.ErrorMessage, Attempt: x.Attempt,
	}}
	return nil
}

func (d *decoder) reasonAndMode(r, m string) (penguinv1.CompactionReason, penguinv1.CompactionMode) {
	reason, err := compactionReasons().requiredValue(r)
	d.check(err)
	mode, err := compactionModes().requiredValue(m)
	d.check(err)
	return reason, mode
}
