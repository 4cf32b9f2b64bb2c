package storetest

import (
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Messages returns one message of every payload kind a session log may
// hold (session_meta, the seven complete model messages and the eleven
// events), filled with content that a lossy encoding would damage: fidelity
// JSON with insignificant whitespace and escapes, tool-call arguments that
// are not canonical JSON, non-ASCII text, nanosecond timestamps. Every call
// returns fresh messages the caller may modify.
func Messages() []*penguinv1.OmniMessage {
	base := time.Date(2026, 7, 18, 3, 10, 22, 531_000_123, time.UTC)
	ts := func(i int) *timestamppb.Timestamp {
		return timestamppb.New(base.Add(time.Duration(i) * time.Millisecond))
	}
	msgs := []*penguinv1.OmniMessage{
		{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{
			SessionId: "session-2026-07-18-11-10-22-3f8a1c2d", Provider: "deepseek", ModelId: "deepseek-v4-pro",
			ModelContextWindow: 1_000_000, SystemPrompt: "You are Penguin.\nWorkspace: /home/u/work",
			AgentState: "/home/u/.penguin/data/default_project/agents/default_agent/agent_state", Workspace: "/home/u/work",
		}}},
		{Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: &penguinv1.ToolListReady{Tools: []*penguinv1.ToolDefinition{
			{Name: "exec_command", Description: "Run a shell command.", Parameters: `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`},
			{Name: "noop", Description: "Does nothing."},
		}}}},
		{Payload: &penguinv1.OmniMessage_McpConnectBegin{McpConnectBegin: &penguinv1.McpConnectBegin{Servers: []string{"github", "files"}}}},
		{Payload: &penguinv1.OmniMessage_McpConnectEnd{McpConnectEnd: &penguinv1.McpConnectEnd{
			Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
			Results: []*penguinv1.McpServerConnectResult{
				{Server: "github", Transport: "http", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, DurationMs: 412, Tools: 12},
				{Server: "files", Transport: "stdio", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED, DurationMs: 3, Error: "spawn files-mcp: no such file"},
			},
		}}},
		{Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}},
		{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: "Create hello.txt — ünïcödé, \"quotes\", <tags> & tabs\t"}}},
		{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Sender: penguinv1.Sender_SENDER_HARNESS,
			Text: "[user_steering]\nuse printf\n[/user_steering]"}}},
		{Payload: &penguinv1.OmniMessage_ImageUrl{ImageUrl: &penguinv1.ImageUrl{Role: penguinv1.Role_ROLE_USER, ImageUrl: "data:image/png;base64,iVBORw0KGgo="}}},
		{Payload: &penguinv1.OmniMessage_InlineData{InlineData: &penguinv1.InlineData{Role: penguinv1.Role_ROLE_USER, Data: "JVBERi0xLjQK", MimeType: "application/pdf"}}},
		{Payload: &penguinv1.OmniMessage_Thinking{Thinking: &penguinv1.Thinking{Role: penguinv1.Role_ROLE_ASSISTANT,
			Thinking: "The user wants a file.", Fidelity: []byte(`{ "signature" : "EqQBCkYIBxgCKkB\u00e9+/=",  "n": 1.50 }`)}}},
		{Payload: &penguinv1.OmniMessage_Thinking{Thinking: &penguinv1.Thinking{Role: penguinv1.Role_ROLE_ASSISTANT,
			Fidelity: []byte(`{"id":"rs_0d3","encrypted_content":"gAAAA..."}`)}}},
		{Payload: &penguinv1.OmniMessage_InlineThinking{InlineThinking: &penguinv1.InlineThinking{Role: penguinv1.Role_ROLE_ASSISTANT,
			Data: "AAEC", MimeType: "application/octet-stream", Fidelity: []byte(`{"k":[1,2,3]}`)}}},
		{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_ASSISTANT, Text: "I'll create it.",
			Fidelity: []byte(`{"phase":"commentary"}`)}}},
		{Payload: &penguinv1.OmniMessage_ToolCall{ToolCall: &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: "exec_command",
			Arguments: `{"cmd": "printf hi > hello.txt",  "b":1.0e2 ,"a":"\u0041"}`, ToolCallId: "call_0"}}},
		{Payload: &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: &penguinv1.ApprovalDecision{
			Decision: penguinv1.Decision_DECISION_ALLOW, ToolCallId: "call_0"}}},
		{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{Role: penguinv1.Role_ROLE_USER,
			Output: "[no output]", ToolCallId: "call_0"}}},
		{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{Role: penguinv1.Role_ROLE_USER,
			Output: "exit status 1", ToolCallId: "call_1", Images: []string{"data:image/png;base64,AAAA", "data:image/jpeg;base64,BBBB"},
			StopReason: penguinv1.StopReason_STOP_REASON_FAILED}}},
		{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}},
		{Payload: &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{
			Session: &penguinv1.TokenCounts{CacheRead: 100, CacheWrite: 20, Output: 30, Total: 1500},
			Request: &penguinv1.TokenCounts{CacheRead: 10, CacheWrite: 2, Output: 3, Total: 150},
		}}},
		{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT,
			ErrorMessage: "stream idle for 120s", Attempt: 2, RetryInMs: 4000}}},
		{Payload: &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{
			Reason: penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT, Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE, Context: 180000, Turns: 42}}},
		{Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
			Reason: penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT, Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE,
			Status: penguinv1.StopReason_STOP_REASON_FAILED, ErrorMessage: "no summary found", Attempt: 3}}},
		{Payload: &penguinv1.OmniMessage_Subagent{Subagent: &penguinv1.Subagent{SessionId: "session-2026-07-18-11-12-00-a1b2c3d4"}}},
		{Payload: &penguinv1.OmniMessage_Abort{Abort: &penguinv1.Abort{Reason: "user pressed Esc"}}},
		{Payload: &penguinv1.OmniMessage_Abort{Abort: &penguinv1.Abort{}}},
	}
	for i, m := range msgs {
		m.Timestamp = ts(i)
	}
	return msgs
}

// bigDataURL returns a data URL of about n bytes.
func bigDataURL(n int) string {
	const prefix = "data:image/png;base64,"
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	x := uint32(2463534242)
	for b.Len() < n {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(alphabet[x%64])
	}
	return b.String()
}
