package transcript

import (
	"encoding/json"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The JSON shapes of the payloads, field for field as docs/trace-format.md
// lists them; struct field order is the key order of a line. Optional
// fields carry omitempty; fields the format always writes do not.

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

func counts(c *penguinv1.TokenCounts) tokenCountsJSON {
	return tokenCountsJSON{CacheRead: c.GetCacheRead(), CacheWrite: c.GetCacheWrite(), Output: c.GetOutput(), Total: c.GetTotal(),
		Reasoning: c.GetReasoning(), CostUSD: c.CostUsd, Unreported: c.GetUnreported()}
}

func uncounts(c tokenCountsJSON) *penguinv1.TokenCounts {
	return &penguinv1.TokenCounts{CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Output: c.Output, Total: c.Total,
		Reasoning: c.Reasoning, CostUsd: c.CostUSD, Unreported: c.Unreported}
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
		"approval_decision", "token_usage", "compaction_begin", "compaction_end", "abort", "subagent",
		"goal_started", "goal_round", "goal_finished", "workspace_change":
		return TypeEventMsg, true
	}
	return "", false
}
