package trace

import (
	"encoding/json"
	"errors"
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The JSON shapes of the payloads, field for field as omni-message.md
// declares them; struct field order is the key order of a line. Optional
// fields carry omitempty; fields the reference always writes do not.

type sessionMetaJSON struct {
	SessionID          string        `json:"session_id"`
	Provider           string        `json:"provider"`
	ModelID            string        `json:"model_id"`
	ModelContextWindow contextWindow `json:"model_context_window"`
	SystemPrompt       string        `json:"system_prompt"`
	AgentState         string        `json:"agent_state"`
	Workspace          string        `json:"workspace"`
	Source             string        `json:"source,omitempty"`
}

type textJSON struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Text       string          `json:"text"`
	Sender     string          `json:"sender,omitempty"`
	Fidelity   json.RawMessage `json:"fidelity,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
}

type thinkingJSON struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Thinking   string          `json:"thinking"`
	Fidelity   json.RawMessage `json:"fidelity,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
}

// dataJSON is inline_thinking and inline_data.
type dataJSON struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Data       string          `json:"data"`
	MimeType   string          `json:"mime_type"`
	Fidelity   json.RawMessage `json:"fidelity,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
}

type toolCallJSON struct {
	Type       string          `json:"type"`
	Role       string          `json:"role"`
	Name       string          `json:"name"`
	Arguments  string          `json:"arguments"`
	ToolCallID string          `json:"tool_call_id"`
	Fidelity   json.RawMessage `json:"fidelity,omitempty"`
	StopReason string          `json:"stop_reason,omitempty"`
}

type toolCallOutputJSON struct {
	Type       string   `json:"type"`
	Role       string   `json:"role"`
	Output     string   `json:"output"`
	Images     []string `json:"images,omitempty"`
	ToolCallID string   `json:"tool_call_id"`
	StopReason string   `json:"stop_reason,omitempty"`
}

type imageURLJSON struct {
	Type       string `json:"type"`
	Role       string `json:"role"`
	ImageURL   string `json:"image_url"`
	StopReason string `json:"stop_reason,omitempty"`
}

type partialTextJSON struct {
	Type       string `json:"type"`
	Role       string `json:"role"`
	EventType  string `json:"event_type"`
	Text       string `json:"text"`
	StopReason string `json:"stop_reason,omitempty"`
}

type partialThinkingJSON struct {
	Type       string `json:"type"`
	Role       string `json:"role"`
	EventType  string `json:"event_type"`
	Thinking   string `json:"thinking"`
	StopReason string `json:"stop_reason,omitempty"`
}

type partialToolCallJSON struct {
	Type       string `json:"type"`
	Role       string `json:"role"`
	EventType  string `json:"event_type"`
	Name       string `json:"name"`
	Arguments  string `json:"arguments"`
	ToolCallID string `json:"tool_call_id"`
	StopReason string `json:"stop_reason,omitempty"`
}

type partialToolCallOutputJSON struct {
	Type       string   `json:"type"`
	Role       string   `json:"role"`
	EventType  string   `json:"event_type"`
	Output     string   `json:"output"`
	Images     []string `json:"images,omitempty"`
	ToolCallID string   `json:"tool_call_id"`
	StopReason string   `json:"stop_reason,omitempty"`
}

type toolDefinitionJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type toolListReadyJSON struct {
	Type  string               `json:"type"`
	Tools []toolDefinitionJSON `json:"tools"`
}

type mcpConnectBeginJSON struct {
	Type    string   `json:"type"`
	Servers []string `json:"servers"`
}

type mcpServerResultJSON struct {
	Server     string `json:"server"`
	Transport  string `json:"transport"`
	Status     string `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	Tools      *int32 `json:"tools,omitempty"`
	Error      string `json:"error,omitempty"`
}

type mcpConnectEndJSON struct {
	Type    string                `json:"type"`
	Status  string                `json:"status"`
	Results []mcpServerResultJSON `json:"results"`
}

type typeOnlyJSON struct {
	Type string `json:"type"`
}

type requestEndJSON struct {
	Type         string `json:"type"`
	Status       string `json:"status"`
	ErrorMessage string `json:"error_message,omitempty"`
	Attempt      int32  `json:"attempt,omitempty"`
	RetryInMS    int64  `json:"retry_in_ms,omitempty"`
}

type approvalDecisionJSON struct {
	Type       string `json:"type"`
	Decision   string `json:"decision"`
	ToolCallID string `json:"tool_call_id"`
}

type tokenCountsJSON struct {
	CacheRead  int64    `json:"cache_read"`
	CacheWrite int64    `json:"cache_write"`
	Output     int64    `json:"output"`
	Total      int64    `json:"total"`
	Reasoning  int64    `json:"reasoning,omitempty"`
	CostUSD    *float64 `json:"cost_usd,omitempty"`
	Unreported bool     `json:"unreported,omitempty"`
}

type tokenUsageJSON struct {
	Type     string          `json:"type"`
	Session  tokenCountsJSON `json:"session"`
	Request  tokenCountsJSON `json:"request"`
	Provider string          `json:"provider,omitempty"`
	ModelID  string          `json:"model_id,omitempty"`
}

type compactionBeginJSON struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Mode    string `json:"mode"`
	Context int64  `json:"context"`
	Turns   int64  `json:"turns"`
}

type compactionEndJSON struct {
	Type         string `json:"type"`
	Reason       string `json:"reason"`
	Mode         string `json:"mode"`
	Status       string `json:"status"`
	ErrorMessage string `json:"error_message,omitempty"`
	Attempt      int32  `json:"attempt,omitempty"`
}

type abortJSON struct {
	Type   string  `json:"type"`
	Reason *string `json:"reason,omitempty"`
}

type subagentJSON struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
}

// fixedRole returns the role of a payload whose role never varies, written
// even when the message leaves it unspecified.
func fixedRole(r penguinv1.Role, fixed penguinv1.Role) (string, error) {
	if r == penguinv1.Role_ROLE_UNSPECIFIED {
		r = fixed
	}
	return roles().name(r)
}

// stopReason encodes an optional stop_reason.
func stopReason(r penguinv1.StopReason) (string, error) { return stopReasons("stop_reason").name(r) }

// encodePayload returns the envelope type and the JSON shape of m's
// payload.
func encodePayload(m *penguinv1.OmniMessage) (string, any, error) {
	var errs []error
	check := func(s string, err error) string {
		errs = append(errs, err)
		return s
	}
	done := func(typ string, v any) (string, any, error) {
		if err := errors.Join(errs...); err != nil {
			return "", nil, err
		}
		return typ, v, nil
	}
	fid := func(b []byte) json.RawMessage {
		r, err := fidelity(b)
		errs = append(errs, err)
		return r
	}

	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_SessionMeta:
		s := p.SessionMeta
		return done(TypeSessionMeta, sessionMetaJSON{
			SessionID: s.GetSessionId(), Provider: s.GetProvider(), ModelID: s.GetModelId(),
			ModelContextWindow: contextWindow(s.GetModelContextWindow()), SystemPrompt: s.GetSystemPrompt(),
			AgentState: s.GetAgentState(), Workspace: s.GetWorkspace(), Source: s.GetSource(),
		})

	case *penguinv1.OmniMessage_Text:
		x := p.Text
		return done(TypeModelMsg, textJSON{
			Type: "text", Role: check(roles().required(x.GetRole())), Text: x.GetText(),
			Sender: check(senders().name(x.GetSender())), Fidelity: fid(x.GetFidelity()),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_Thinking:
		x := p.Thinking
		return done(TypeModelMsg, thinkingJSON{
			Type: "thinking", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)), Thinking: x.GetThinking(),
			Fidelity: fid(x.GetFidelity()), StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_InlineThinking:
		x := p.InlineThinking
		return done(TypeModelMsg, dataJSON{
			Type: "inline_thinking", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			Data: x.GetData(), MimeType: x.GetMimeType(), Fidelity: fid(x.GetFidelity()),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_InlineData:
		x := p.InlineData
		return done(TypeModelMsg, dataJSON{
			Type: "inline_data", Role: check(roles().required(x.GetRole())),
			Data: x.GetData(), MimeType: x.GetMimeType(), Fidelity: fid(x.GetFidelity()),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_ImageUrl:
		x := p.ImageUrl
		return done(TypeModelMsg, imageURLJSON{
			Type: "image_url", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)), ImageURL: x.GetImageUrl(),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_ToolCall:
		x := p.ToolCall
		return done(TypeModelMsg, toolCallJSON{
			Type: "tool_call", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			Name: x.GetName(), Arguments: x.GetArguments(), ToolCallID: x.GetToolCallId(),
			Fidelity: fid(x.GetFidelity()), StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_ToolCallOutput:
		x := p.ToolCallOutput
		return done(TypeModelMsg, toolCallOutputJSON{
			Type: "tool_call_output", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)),
			Output: x.GetOutput(), Images: x.GetImages(), ToolCallID: x.GetToolCallId(),
			StopReason: check(stopReason(x.GetStopReason())),
		})

	case *penguinv1.OmniMessage_PartialText:
		x := p.PartialText
		return done(TypeModelMsg, partialTextJSON{
			Type: "partial_text", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: check(eventTypes().required(x.GetEventType())), Text: x.GetText(),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_PartialThinking:
		x := p.PartialThinking
		return done(TypeModelMsg, partialThinkingJSON{
			Type: "partial_thinking", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: check(eventTypes().required(x.GetEventType())), Thinking: x.GetThinking(),
			StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_PartialToolCall:
		x := p.PartialToolCall
		return done(TypeModelMsg, partialToolCallJSON{
			Type: "partial_tool_call", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_ASSISTANT)),
			EventType: check(eventTypes().required(x.GetEventType())), Name: x.GetName(), Arguments: x.GetArguments(),
			ToolCallID: x.GetToolCallId(), StopReason: check(stopReason(x.GetStopReason())),
		})
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		x := p.PartialToolCallOutput
		return done(TypeModelMsg, partialToolCallOutputJSON{
			Type: "partial_tool_call_output", Role: check(fixedRole(x.GetRole(), penguinv1.Role_ROLE_USER)),
			EventType: check(eventTypes().required(x.GetEventType())), Output: x.GetOutput(), Images: x.GetImages(),
			ToolCallID: x.GetToolCallId(), StopReason: check(stopReason(x.GetStopReason())),
		})

	case *penguinv1.OmniMessage_ToolListReady:
		tools := make([]toolDefinitionJSON, 0, len(p.ToolListReady.GetTools()))
		for _, d := range p.ToolListReady.GetTools() {
			td := toolDefinitionJSON{Name: d.GetName(), Description: d.GetDescription()}
			if d.GetParameters() != "" {
				raw, err := rawJSON(fmt.Sprintf("parameters of tool %q", d.GetName()), []byte(d.GetParameters()), false)
				errs = append(errs, err)
				td.Parameters = raw
			}
			tools = append(tools, td)
		}
		return done(TypeEventMsg, toolListReadyJSON{Type: "tool_list_ready", Tools: tools})
	case *penguinv1.OmniMessage_McpConnectBegin:
		servers := p.McpConnectBegin.GetServers()
		if servers == nil {
			servers = []string{}
		}
		return done(TypeEventMsg, mcpConnectBeginJSON{Type: "mcp_connect_begin", Servers: servers})
	case *penguinv1.OmniMessage_McpConnectEnd:
		x := p.McpConnectEnd
		results := make([]mcpServerResultJSON, 0, len(x.GetResults()))
		for _, r := range x.GetResults() {
			res := mcpServerResultJSON{
				Server: r.GetServer(), Transport: r.GetTransport(), Status: check(mcpStatuses().required(r.GetStatus())),
				DurationMS: r.GetDurationMs(), Error: r.GetError(),
			}
			// The reference sets tools on a completed server only.
			if r.GetStatus() == penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED || r.GetTools() != 0 {
				n := r.GetTools()
				res.Tools = &n
			}
			results = append(results, res)
		}
		return done(TypeEventMsg, mcpConnectEndJSON{Type: "mcp_connect_end", Status: check(mcpStatuses().required(x.GetStatus())), Results: results})
	case *penguinv1.OmniMessage_RequestBegin:
		return done(TypeEventMsg, typeOnlyJSON{Type: "request_begin"})
	case *penguinv1.OmniMessage_RequestEnd:
		x := p.RequestEnd
		return done(TypeEventMsg, requestEndJSON{
			Type: "request_end", Status: check(stopReasons("request_end status").required(x.GetStatus())),
			ErrorMessage: x.GetErrorMessage(), Attempt: x.GetAttempt(), RetryInMS: x.GetRetryInMs(),
		})
	case *penguinv1.OmniMessage_ApprovalDecision:
		x := p.ApprovalDecision
		return done(TypeEventMsg, approvalDecisionJSON{
			Type: "approval_decision", Decision: check(decisions().required(x.GetDecision())), ToolCallID: x.GetToolCallId(),
		})
	case *penguinv1.OmniMessage_TokenUsage:
		x := p.TokenUsage
		return done(TypeEventMsg, tokenUsageJSON{Type: "token_usage", Session: counts(x.GetSession()), Request: counts(x.GetRequest()),
			Provider: x.GetProvider(), ModelID: x.GetModelId()})
	case *penguinv1.OmniMessage_CompactionBegin:
		x := p.CompactionBegin
		return done(TypeEventMsg, compactionBeginJSON{
			Type: "compaction_begin", Reason: check(compactionReasons().required(x.GetReason())),
			Mode: check(compactionModes().required(x.GetMode())), Context: x.GetContext(), Turns: x.GetTurns(),
		})
	case *penguinv1.OmniMessage_CompactionEnd:
		x := p.CompactionEnd
		return done(TypeEventMsg, compactionEndJSON{
			Type: "compaction_end", Reason: check(compactionReasons().required(x.GetReason())),
			Mode: check(compactionModes().required(x.GetMode())), Status: check(stopReasons("compaction_end status").required(x.GetStatus())),
			ErrorMessage: x.GetErrorMessage(), Attempt: x.GetAttempt(),
		})
	case *penguinv1.OmniMessage_Abort:
		a := abortJSON{Type: "abort"}
		if r := p.Abort.GetReason(); r != "" {
			a.Reason = &r
		}
		return done(TypeEventMsg, a)
	case *penguinv1.OmniMessage_Subagent:
		return done(TypeEventMsg, subagentJSON{Type: "subagent", SessionID: p.Subagent.GetSessionId()})
	case nil:
		return "", nil, errors.New("message has no payload")
	default:
		return "", nil, fmt.Errorf("payload %T has no trace form", p)
	}
}

func counts(c *penguinv1.TokenCounts) tokenCountsJSON {
	return tokenCountsJSON{CacheRead: c.GetCacheRead(), CacheWrite: c.GetCacheWrite(), Output: c.GetOutput(), Total: c.GetTotal(),
		Reasoning: c.GetReasoning(), CostUSD: c.CostUsd, Unreported: c.GetUnreported()}
}

func uncounts(c tokenCountsJSON) *penguinv1.TokenCounts {
	return &penguinv1.TokenCounts{CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Output: c.Output, Total: c.Total,
		Reasoning: c.Reasoning, CostUsd: c.CostUSD, Unreported: c.Unreported}
}

// decodePayload fills m's payload from the JSON of a line whose envelope
// type is typ.
func decodePayload(typ string, raw json.RawMessage, m *penguinv1.OmniMessage) error {
	if typ == TypeSessionMeta {
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
	var head typeOnlyJSON
	if err := json.Unmarshal(raw, &head); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	family, ok := payloadFamily(head.Type)
	switch {
	case head.Type == "":
		return errors.New("payload has no type")
	case !ok:
		return fmt.Errorf("unknown payload type %q", head.Type)
	case typ != TypeModelMsg && typ != TypeEventMsg:
		return fmt.Errorf("unknown message type %q", typ)
	case family != typ:
		return fmt.Errorf("payload type %q belongs in a %s, not a %s", head.Type, family, typ)
	}

	var errs []error
	check := func(err error) { errs = append(errs, err) }
	role := func(s string, fixed penguinv1.Role) penguinv1.Role {
		if s == "" && fixed != penguinv1.Role_ROLE_UNSPECIFIED {
			return fixed
		}
		r, err := roles().requiredValue(s)
		check(err)
		return r
	}
	stop := func(s string) penguinv1.StopReason {
		r, err := stopReasons("stop_reason").value(s)
		check(err)
		return r
	}
	phase := func(s string) penguinv1.StreamEventType {
		r, err := eventTypes().requiredValue(s)
		check(err)
		return r
	}
	unmarshal := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s payload: %w", head.Type, err)
		}
		return nil
	}

	switch head.Type {
	case "text":
		var x textJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		sender, err := senders().value(x.Sender)
		check(err)
		m.Payload = &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{
			Role: role(x.Role, penguinv1.Role_ROLE_UNSPECIFIED), Text: x.Text, Sender: sender,
			Fidelity: jsonBytes(x.Fidelity), StopReason: stop(x.StopReason),
		}}
	case "thinking":
		var x thinkingJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_Thinking{Thinking: &penguinv1.Thinking{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Thinking: x.Thinking,
			Fidelity: jsonBytes(x.Fidelity), StopReason: stop(x.StopReason),
		}}
	case "inline_thinking":
		var x dataJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_InlineThinking{InlineThinking: &penguinv1.InlineThinking{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Data: x.Data, MimeType: x.MimeType,
			Fidelity: jsonBytes(x.Fidelity), StopReason: stop(x.StopReason),
		}}
	case "inline_data":
		var x dataJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_InlineData{InlineData: &penguinv1.InlineData{
			Role: role(x.Role, penguinv1.Role_ROLE_UNSPECIFIED), Data: x.Data, MimeType: x.MimeType,
			Fidelity: jsonBytes(x.Fidelity), StopReason: stop(x.StopReason),
		}}
	case "image_url":
		var x imageURLJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ImageUrl{ImageUrl: &penguinv1.ImageUrl{
			Role: role(x.Role, penguinv1.Role_ROLE_USER), ImageUrl: x.ImageURL, StopReason: stop(x.StopReason),
		}}
	case "tool_call":
		var x toolCallJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ToolCall{ToolCall: &penguinv1.ToolCall{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), Name: x.Name, Arguments: x.Arguments, ToolCallId: x.ToolCallID,
			Fidelity: jsonBytes(x.Fidelity), StopReason: stop(x.StopReason),
		}}
	case "tool_call_output":
		var x toolCallOutputJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
			Role: role(x.Role, penguinv1.Role_ROLE_USER), Output: x.Output, Images: x.Images, ToolCallId: x.ToolCallID,
			StopReason: stop(x.StopReason),
		}}
	case "partial_text":
		var x partialTextJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialText{PartialText: &penguinv1.PartialText{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: phase(x.EventType), Text: x.Text, StopReason: stop(x.StopReason),
		}}
	case "partial_thinking":
		var x partialThinkingJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialThinking{PartialThinking: &penguinv1.PartialThinking{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: phase(x.EventType), Thinking: x.Thinking, StopReason: stop(x.StopReason),
		}}
	case "partial_tool_call":
		var x partialToolCallJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialToolCall{PartialToolCall: &penguinv1.PartialToolCall{
			Role: role(x.Role, penguinv1.Role_ROLE_ASSISTANT), EventType: phase(x.EventType), Name: x.Name, Arguments: x.Arguments,
			ToolCallId: x.ToolCallID, StopReason: stop(x.StopReason),
		}}
	case "partial_tool_call_output":
		var x partialToolCallOutputJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_PartialToolCallOutput{PartialToolCallOutput: &penguinv1.PartialToolCallOutput{
			Role: role(x.Role, penguinv1.Role_ROLE_USER), EventType: phase(x.EventType), Output: x.Output, Images: x.Images,
			ToolCallId: x.ToolCallID, StopReason: stop(x.StopReason),
		}}

	case "tool_list_ready":
		var x toolListReadyJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		tools := make([]*penguinv1.ToolDefinition, 0, len(x.Tools))
		for _, d := range x.Tools {
			tools = append(tools, &penguinv1.ToolDefinition{Name: d.Name, Description: d.Description, Parameters: string(jsonBytes(d.Parameters))})
		}
		m.Payload = &penguinv1.OmniMessage_ToolListReady{ToolListReady: &penguinv1.ToolListReady{Tools: tools}}
	case "mcp_connect_begin":
		var x mcpConnectBeginJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_McpConnectBegin{McpConnectBegin: &penguinv1.McpConnectBegin{Servers: nonEmpty(x.Servers)}}
	case "mcp_connect_end":
		var x mcpConnectEndJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		status, err := mcpStatuses().requiredValue(x.Status)
		check(err)
		var results []*penguinv1.McpServerConnectResult
		for _, r := range x.Results {
			st, err := mcpStatuses().requiredValue(r.Status)
			check(err)
			res := &penguinv1.McpServerConnectResult{Server: r.Server, Transport: r.Transport, Status: st, DurationMs: r.DurationMS, Error: r.Error}
			if r.Tools != nil {
				res.Tools = *r.Tools
			}
			results = append(results, res)
		}
		m.Payload = &penguinv1.OmniMessage_McpConnectEnd{McpConnectEnd: &penguinv1.McpConnectEnd{Status: status, Results: results}}
	case "request_begin":
		m.Payload = &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}
	case "request_end":
		var x requestEndJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		status, err := stopReasons("request_end status").requiredValue(x.Status)
		check(err)
		m.Payload = &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{
			Status: status, ErrorMessage: x.ErrorMessage, Attempt: x.Attempt, RetryInMs: x.RetryInMS,
		}}
	case "approval_decision":
		var x approvalDecisionJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		d, err := decisions().requiredValue(x.Decision)
		check(err)
		m.Payload = &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: &penguinv1.ApprovalDecision{Decision: d, ToolCallId: x.ToolCallID}}
	case "token_usage":
		var x tokenUsageJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{Session: uncounts(x.Session), Request: uncounts(x.Request),
			Provider: x.Provider, ModelId: x.ModelID}}
	case "compaction_begin":
		var x compactionBeginJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		reason, err := compactionReasons().requiredValue(x.Reason)
		check(err)
		mode, err := compactionModes().requiredValue(x.Mode)
		check(err)
		m.Payload = &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{
			Reason: reason, Mode: mode, Context: x.Context, Turns: x.Turns,
		}}
	case "compaction_end":
		var x compactionEndJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		reason, err := compactionReasons().requiredValue(x.Reason)
		check(err)
		mode, err := compactionModes().requiredValue(x.Mode)
		check(err)
		status, err := stopReasons("compaction_end status").requiredValue(x.Status)
		check(err)
		m.Payload = &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
			Reason: reason, Mode: mode, Status: status, ErrorMessage: x.ErrorMessage, Attempt: x.Attempt,
		}}
	case "abort":
		var x abortJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		a := &penguinv1.Abort{}
		if x.Reason != nil {
			a.Reason = *x.Reason
		}
		m.Payload = &penguinv1.OmniMessage_Abort{Abort: a}
	case "subagent":
		var x subagentJSON
		if err := unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_Subagent{Subagent: &penguinv1.Subagent{SessionId: x.SessionID}}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s payload: %w", head.Type, err)
	}
	return nil
}

// nonEmpty turns an empty list into nil, the protobuf form of an empty
// repeated field.
func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// payloadFamily returns the envelope type a payload type belongs to.
func payloadFamily(payloadType string) (string, bool) {
	switch payloadType {
	case "text", "thinking", "inline_thinking", "inline_data", "image_url", "tool_call", "tool_call_output",
		"partial_text", "partial_thinking", "partial_tool_call", "partial_tool_call_output":
		return TypeModelMsg, true
	case "tool_list_ready", "mcp_connect_begin", "mcp_connect_end", "request_begin", "request_end",
		"approval_decision", "token_usage", "compaction_begin", "compaction_end", "abort", "subagent":
		return TypeEventMsg, true
	}
	return "", false
}
