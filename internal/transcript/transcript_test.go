package transcript_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/transcript"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// at returns a timestamp of whole milliseconds, which the trace keeps
// exactly.
func at(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return timestamppb.New(t)
}

func msg(ts string, p any) *penguinv1.OmniMessage {
	m := &penguinv1.OmniMessage{Timestamp: at(ts)}
	switch x := p.(type) {
	case *penguinv1.SessionMeta:
		m.Payload = &penguinv1.OmniMessage_SessionMeta{SessionMeta: x}
	case *penguinv1.Text:
		m.Payload = &penguinv1.OmniMessage_Text{Text: x}
	case *penguinv1.Thinking:
		m.Payload = &penguinv1.OmniMessage_Thinking{Thinking: x}
	case *penguinv1.InlineThinking:
		m.Payload = &penguinv1.OmniMessage_InlineThinking{InlineThinking: x}
	case *penguinv1.InlineData:
		m.Payload = &penguinv1.OmniMessage_InlineData{InlineData: x}
	case *penguinv1.ImageUrl:
		m.Payload = &penguinv1.OmniMessage_ImageUrl{ImageUrl: x}
	case *penguinv1.ToolCall:
		m.Payload = &penguinv1.OmniMessage_ToolCall{ToolCall: x}
	case *penguinv1.ToolCallOutput:
		m.Payload = &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: x}
	case *penguinv1.PartialText:
		m.Payload = &penguinv1.OmniMessage_PartialText{PartialText: x}
	case *penguinv1.PartialThinking:
		m.Payload = &penguinv1.OmniMessage_PartialThinking{PartialThinking: x}
	case *penguinv1.PartialToolCall:
		m.Payload = &penguinv1.OmniMessage_PartialToolCall{PartialToolCall: x}
	case *penguinv1.PartialToolCallOutput:
		m.Payload = &penguinv1.OmniMessage_PartialToolCallOutput{PartialToolCallOutput: x}
	case *penguinv1.ToolListReady:
		m.Payload = &penguinv1.OmniMessage_ToolListReady{ToolListReady: x}
	case *penguinv1.McpConnectBegin:
		m.Payload = &penguinv1.OmniMessage_McpConnectBegin{McpConnectBegin: x}
	case *penguinv1.McpConnectEnd:
		m.Payload = &penguinv1.OmniMessage_McpConnectEnd{McpConnectEnd: x}
	case *penguinv1.RequestBegin:
		m.Payload = &penguinv1.OmniMessage_RequestBegin{RequestBegin: x}
	case *penguinv1.RequestEnd:
		m.Payload = &penguinv1.OmniMessage_RequestEnd{RequestEnd: x}
	case *penguinv1.ApprovalDecision:
		m.Payload = &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: x}
	case *penguinv1.TokenUsage:
		m.Payload = &penguinv1.OmniMessage_TokenUsage{TokenUsage: x}
	case *penguinv1.CompactionBegin:
		m.Payload = &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: x}
	case *penguinv1.CompactionEnd:
		m.Payload = &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: x}
	case *penguinv1.Abort:
		m.Payload = &penguinv1.OmniMessage_Abort{Abort: x}
	case *penguinv1.GoalStarted:
		m.Payload = &penguinv1.OmniMessage_GoalStarted{GoalStarted: x}
	case *penguinv1.GoalRound:
		m.Payload = &penguinv1.OmniMessage_GoalRound{GoalRound: x}
	case *penguinv1.GoalFinished:
		m.Payload = &penguinv1.OmniMessage_GoalFinished{GoalFinished: x}
	case *penguinv1.WorkspaceChange:
		m.Payload = &penguinv1.OmniMessage_WorkspaceChange{WorkspaceChange: x}
	case *penguinv1.Subagent:
		m.Payload = &penguinv1.OmniMessage_Subagent{Subagent: x}
	default:
		panic("unknown payload")
	}
	return m
}

const (
	user      = penguinv1.Role_ROLE_USER
	assistant = penguinv1.Role_ROLE_ASSISTANT
)

// referenceMessages are the messages of testdata/reference.jsonl, whose
// lines are trace lines as PenguinHarness documents them, with their
// elided parts ("…" timestamps, counts) filled in: a file written by that
// harness must read back, and be written again, byte for byte.
func referenceMessages() []*penguinv1.OmniMessage {
	return []*penguinv1.OmniMessage{
		msg("2026-07-18T03:10:22.531Z", &penguinv1.SessionMeta{
			SessionId: "session-2026-07-18-11-10-22-3f8a1c2d", Provider: "deepseek", ModelId: "deepseek-v4-pro",
			ModelContextWindow: 1000000, SystemPrompt: "…",
			AgentState: "/home/u/.penguin/data/default_project/agents/default_agent/agent_state", Workspace: "/home/u/work",
		}),
		msg("2026-07-18T03:10:22.540Z", &penguinv1.RequestBegin{}),
		msg("2026-07-18T03:10:22.541Z", &penguinv1.Text{Role: user, Text: "Create hello.txt"}),
		msg("2026-07-18T03:10:24.002Z", &penguinv1.ToolCall{Role: assistant, Name: "exec_command",
			Arguments: `{"cmd":"printf hi > hello.txt"}`, ToolCallId: "call_0"}),
		msg("2026-07-18T03:10:24.010Z", &penguinv1.ApprovalDecision{Decision: penguinv1.Decision_DECISION_ALLOW, ToolCallId: "call_0"}),
		msg("2026-07-18T03:10:24.120Z", &penguinv1.ToolCallOutput{Role: user, Output: "[no output]", ToolCallId: "call_0"}),
		msg("2026-07-18T03:10:24.121Z", &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}),
		msg("2026-07-18T03:10:24.122Z", &penguinv1.TokenUsage{
			Session: &penguinv1.TokenCounts{Output: 42, Total: 1234},
			Request: &penguinv1.TokenCounts{Output: 42, Total: 1234},
		}),
		func() *penguinv1.OmniMessage {
			m := msg("2026-07-18T03:11:00.000Z", &penguinv1.Text{Role: assistant, Text: "…"})
			m.Origin = []string{"session-2026-07-18-11-11-00-a1b2c3d4"}
			return m
		}(),
		msg("2026-07-18T03:11:01.000Z", &penguinv1.Thinking{Role: assistant, Thinking: "…", Fidelity: []byte(`{"signature":"EqQBCkYIBxgCKkB…"}`)}),
		msg("2026-07-18T03:11:02.000Z", &penguinv1.Thinking{Role: assistant, Fidelity: []byte(`{"id":"rs_0d3…","encrypted_content":"gAAAA…"}`)}),
		msg("2026-07-18T03:11:03.000Z", &penguinv1.Thinking{Role: assistant, Thinking: "…", Fidelity: []byte(`{"reasoning_field":"reasoning_content"}`)}),
		msg("2026-07-18T03:11:04.000Z", &penguinv1.Text{Role: user, Text: "List the files in the current directory"}),
	}
}

func readGolden(t *testing.T) [][]byte {
	t.Helper()
	b, err := os.ReadFile("testdata/reference.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// TestReferenceLines checks the codec against the lines of
// testdata/reference.jsonl, in both directions, byte for byte.
func TestReferenceLines(t *testing.T) {
	lines := readGolden(t)
	msgs := referenceMessages()
	if len(lines) != len(msgs) {
		t.Fatalf("golden file has %d lines, want %d", len(lines), len(msgs))
	}
	for i, line := range lines {
		got, err := transcript.Marshal(msgs[i])
		if err != nil {
			t.Fatalf("line %d: Marshal: %v", i+1, err)
		}
		if !bytes.Equal(got, line) {
			t.Errorf("line %d: Marshal\n got %s\nwant %s", i+1, got, line)
		}
		m, err := transcript.Unmarshal(line)
		if err != nil {
			t.Fatalf("line %d: Unmarshal: %v", i+1, err)
		}
		if !proto.Equal(m, msgs[i]) {
			t.Errorf("line %d: Unmarshal\n got %v\nwant %v", i+1, m, msgs[i])
		}
	}
}

// TestLegacySessionMetaFields checks that fields older traces wrote in
// session_meta and the format no longer has (tools, thinking_level) are
// ignored, and that model_context_window may be a string.
func TestLegacySessionMetaFields(t *testing.T) {
	line := `{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":{"session_id":"s","provider":"p","model_id":"m",` +
		`"model_context_window":"128000","system_prompt":"sp","tools":[{"name":"exec_command"}],"thinking_level":"high",` +
		`"agent_state":"/as","workspace":"/w","source":"subagent"}}`
	m, err := transcript.Unmarshal([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := msg("2026-07-18T03:10:22.531Z", &penguinv1.SessionMeta{SessionId: "s", Provider: "p", ModelId: "m",
		ModelContextWindow: 128000, SystemPrompt: "sp", AgentState: "/as", Workspace: "/w", Source: "subagent"})
	if !proto.Equal(m, want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	out, err := transcript.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if wantLine := `{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":{"session_id":"s","provider":"p","model_id":"m",` +
		`"model_context_window":128000,"system_prompt":"sp","agent_state":"/as","workspace":"/w","source":"subagent"}}`; string(out) != wantLine {
		t.Fatalf("Marshal\n got %s\nwant %s", out, wantLine)
	}
}

// payloadCases pairs one message of every payload kind, with every
// optional field set or left out, with its expected payload JSON as the
// trace format defines it (docs/trace-format.md).
func payloadCases() []struct {
	name    string
	typ     string
	m       *penguinv1.OmniMessage
	payload string
} {
	const ts = "2026-07-18T03:10:22.531Z"
	type c = struct {
		name    string
		typ     string
		m       *penguinv1.OmniMessage
		payload string
	}
	return []c{
		{"session_meta", "session_meta", msg(ts, &penguinv1.SessionMeta{SessionId: "s", Provider: "p", ModelId: "m", SystemPrompt: "sp", AgentState: "/as", Workspace: "/w"}),
			`{"session_id":"s","provider":"p","model_id":"m","model_context_window":0,"system_prompt":"sp","agent_state":"/as","workspace":"/w"}`},
		{"session_meta schedule", "session_meta", msg(ts, &penguinv1.SessionMeta{SessionId: "s", ModelContextWindow: 200000, Source: "schedule"}),
			`{"session_id":"s","provider":"","model_id":"","model_context_window":200000,"system_prompt":"","agent_state":"","workspace":"","source":"schedule"}`},

		{"text user", "model_msg", msg(ts, &penguinv1.Text{Role: user, Text: "hi <b> & \"q\""}),
			`{"type":"text","role":"user","text":"hi <b> & \"q\""}`},
		{"text all fields", "model_msg", msg(ts, &penguinv1.Text{Role: assistant, Text: "", Sender: penguinv1.Sender_SENDER_PARENT_AGENT,
			Fidelity: []byte(`{"phase":"final_answer"}`), StopReason: penguinv1.StopReason_STOP_REASON_ABORTED}),
			`{"type":"text","role":"assistant","text":"","sender":"parent_agent","fidelity":{"phase":"final_answer"},"stop_reason":"aborted"}`},
		{"text harness", "model_msg", msg(ts, &penguinv1.Text{Role: user, Text: "[turn_aborted]", Sender: penguinv1.Sender_SENDER_HARNESS}),
			`{"type":"text","role":"user","text":"[turn_aborted]","sender":"harness"}`},
		{"text server", "model_msg", msg(ts, &penguinv1.Text{Role: user, Text: "x", Sender: penguinv1.Sender_SENDER_SERVER}),
			`{"type":"text","role":"user","text":"x","sender":"server"}`},
		{"text explicit user sender", "model_msg", msg(ts, &penguinv1.Text{Role: user, Text: "x", Sender: penguinv1.Sender_SENDER_USER}),
			`{"type":"text","role":"user","text":"x","sender":"user"}`},
		{"thinking", "model_msg", msg(ts, &penguinv1.Thinking{Role: assistant, Thinking: "hmm", StopReason: penguinv1.StopReason_STOP_REASON_TIMEOUT}),
			`{"type":"thinking","role":"assistant","thinking":"hmm","stop_reason":"timeout"}`},
		{"inline_thinking", "model_msg", msg(ts, &penguinv1.InlineThinking{Role: assistant, Data: "AAEC", MimeType: "application/octet-stream",
			Fidelity: []byte(`{"k":[1,2.50,"\u00e9"]}`), StopReason: penguinv1.StopReason_STOP_REASON_MALFORMED}),
			`{"type":"inline_thinking","role":"assistant","data":"AAEC","mime_type":"application/octet-stream","fidelity":{"k":[1,2.50,"\u00e9"]},"stop_reason":"malformed"}`},
		{"inline_data", "model_msg", msg(ts, &penguinv1.InlineData{Role: user, Data: "JVBERi0=", MimeType: "application/pdf"}),
			`{"type":"inline_data","role":"user","data":"JVBERi0=","mime_type":"application/pdf"}`},
		{"inline_data assistant", "model_msg", msg(ts, &penguinv1.InlineData{Role: assistant, Data: "", MimeType: "audio/wav",
			Fidelity: []byte(`{}`), StopReason: penguinv1.StopReason_STOP_REASON_AUTH}),
			`{"type":"inline_data","role":"assistant","data":"","mime_type":"audio/wav","fidelity":{},"stop_reason":"auth"}`},
		{"image_url", "model_msg", msg(ts, &penguinv1.ImageUrl{Role: user, ImageUrl: "https://example.com/a.png"}),
			`{"type":"image_url","role":"user","image_url":"https://example.com/a.png"}`},
		{"image_url failed", "model_msg", msg(ts, &penguinv1.ImageUrl{Role: user, ImageUrl: "data:image/png;base64,AAAA", StopReason: penguinv1.StopReason_STOP_REASON_FAILED}),
			`{"type":"image_url","role":"user","image_url":"data:image/png;base64,AAAA","stop_reason":"failed"}`},
		{"tool_call raw arguments", "model_msg", msg(ts, &penguinv1.ToolCall{Role: assistant, Name: "write_file",
			Arguments: "{\"path\": \"a.txt\",\n \"b\":1.0e2}", ToolCallId: "call_1", Fidelity: []byte(`{"id":"fc_1"}`),
			StopReason: penguinv1.StopReason_STOP_REASON_MALFORMED}),
			`{"type":"tool_call","role":"assistant","name":"write_file","arguments":"{\"path\": \"a.txt\",\n \"b\":1.0e2}","tool_call_id":"call_1","fidelity":{"id":"fc_1"},"stop_reason":"malformed"}`},
		{"tool_call_output images", "model_msg", msg(ts, &penguinv1.ToolCallOutput{Role: user, Output: "two images", ToolCallId: "call_2",
			Images: []string{"data:image/png;base64,AAAA", "data:image/jpeg;base64,BBBB"}, StopReason: penguinv1.StopReason_STOP_REASON_COMPLETED}),
			`{"type":"tool_call_output","role":"user","output":"two images","images":["data:image/png;base64,AAAA","data:image/jpeg;base64,BBBB"],"tool_call_id":"call_2","stop_reason":"completed"}`},

		{"partial_text", "model_msg", msg(ts, &penguinv1.PartialText{Role: assistant, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, Text: "he"}),
			`{"type":"partial_text","role":"assistant","event_type":"delta","text":"he"}`},
		{"partial_text stop", "model_msg", msg(ts, &penguinv1.PartialText{Role: assistant, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP,
			StopReason: penguinv1.StopReason_STOP_REASON_ABORTED}),
			`{"type":"partial_text","role":"assistant","event_type":"stop","text":"","stop_reason":"aborted"}`},
		{"partial_thinking", "model_msg", msg(ts, &penguinv1.PartialThinking{Role: assistant, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_START}),
			`{"type":"partial_thinking","role":"assistant","event_type":"start","thinking":""}`},
		{"partial_tool_call", "model_msg", msg(ts, &penguinv1.PartialToolCall{Role: assistant, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA,
			Name: "exec_command", Arguments: `{"cm`, ToolCallId: "call_0"}),
			`{"type":"partial_tool_call","role":"assistant","event_type":"delta","name":"exec_command","arguments":"{\"cm","tool_call_id":"call_0"}`},
		{"partial_tool_call_output", "model_msg", msg(ts, &penguinv1.PartialToolCallOutput{Role: user, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA,
			Output: "line\n", Images: []string{"data:image/png;base64,AAAA"}, ToolCallId: "call_0"}),
			`{"type":"partial_tool_call_output","role":"user","event_type":"delta","output":"line\n","images":["data:image/png;base64,AAAA"],"tool_call_id":"call_0"}`},

		{"tool_list_ready", "event_msg", msg(ts, &penguinv1.ToolListReady{Tools: []*penguinv1.ToolDefinition{
			{Name: "exec_command", Description: "Run a command.", Parameters: `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`},
			{Name: "noop", Description: "Nothing."},
		}}),
			`{"type":"tool_list_ready","tools":[{"name":"exec_command","description":"Run a command.","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}},{"name":"noop","description":"Nothing."}]}`},
		{"tool_list_ready empty", "event_msg", msg(ts, &penguinv1.ToolListReady{}), `{"type":"tool_list_ready","tools":[]}`},
		{"mcp_connect_begin", "event_msg", msg(ts, &penguinv1.McpConnectBegin{Servers: []string{"github", "files"}}),
			`{"type":"mcp_connect_begin","servers":["github","files"]}`},
		{"mcp_connect_end", "event_msg", msg(ts, &penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
			Results: []*penguinv1.McpServerConnectResult{
				{Server: "github", Transport: "http", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, DurationMs: 412, Tools: 12},
				{Server: "empty", Transport: "sse", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, DurationMs: 5},
				{Server: "files", Transport: "stdio", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED, DurationMs: 3, Error: "spawn: no such file"},
			}}),
			`{"type":"mcp_connect_end","status":"failed","results":[` +
				`{"server":"github","transport":"http","status":"completed","duration_ms":412,"tools":12},` +
				`{"server":"empty","transport":"sse","status":"completed","duration_ms":5,"tools":0},` +
				`{"server":"files","transport":"stdio","status":"failed","duration_ms":3,"error":"spawn: no such file"}]}`},
		{"mcp_connect_end aborted", "event_msg", msg(ts, &penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED}),
			`{"type":"mcp_connect_end","status":"aborted","results":[]}`},
		{"request_begin", "event_msg", msg(ts, &penguinv1.RequestBegin{}), `{"type":"request_begin"}`},
		{"request_end retry", "event_msg", msg(ts, &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT,
			ErrorMessage: "stream idle", Attempt: 2, RetryInMs: 4000}),
			`{"type":"request_end","status":"timeout","error_message":"stream idle","attempt":2,"retry_in_ms":4000}`},
		{"request_end completed after retries", "event_msg", msg(ts, &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Attempt: 3}),
			`{"type":"request_end","status":"completed","attempt":3}`},
		{"approval deny", "event_msg", msg(ts, &penguinv1.ApprovalDecision{Decision: penguinv1.Decision_DECISION_DENY, ToolCallId: "call_3"}),
			`{"type":"approval_decision","decision":"deny","tool_call_id":"call_3"}`},
		{"approval forbidden", "event_msg", msg(ts, &penguinv1.ApprovalDecision{Decision: penguinv1.Decision_DECISION_FORBIDDEN, ToolCallId: "call_4"}),
			`{"type":"approval_decision","decision":"forbidden","tool_call_id":"call_4"}`},
		{"token_usage", "event_msg", msg(ts, &penguinv1.TokenUsage{
			Session: &penguinv1.TokenCounts{CacheRead: 1, CacheWrite: 2, Output: 3, Total: 4},
			Request: &penguinv1.TokenCounts{CacheRead: 5, CacheWrite: 6, Output: 7, Total: 8}}),
			`{"type":"token_usage","session":{"cache_read":1,"cache_write":2,"output":3,"total":4},"request":{"cache_read":5,"cache_write":6,"output":7,"total":8}}`},
		{"compaction_begin", "event_msg", msg(ts, &penguinv1.CompactionBegin{Reason: penguinv1.CompactionReason_COMPACTION_REASON_TURNS,
			Mode: penguinv1.CompactionMode_COMPACTION_MODE_DISCARD, Context: 1000, Turns: 50}),
			`{"type":"compaction_begin","reason":"turns","mode":"discard","context":1000,"turns":50}`},
		{"compaction_end", "event_msg", msg(ts, &penguinv1.CompactionEnd{Reason: penguinv1.CompactionReason_COMPACTION_REASON_MANUAL,
			Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE, Status: penguinv1.StopReason_STOP_REASON_COMPLETED}),
			`{"type":"compaction_end","reason":"manual","mode":"summarize","status":"completed"}`},
		{"compaction_end failed", "event_msg", msg(ts, &penguinv1.CompactionEnd{Reason: penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT,
			Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE, Status: penguinv1.StopReason_STOP_REASON_FAILED, ErrorMessage: "no summary", Attempt: 5}),
			`{"type":"compaction_end","reason":"context","mode":"summarize","status":"failed","error_message":"no summary","attempt":5}`},
		{"abort", "event_msg", msg(ts, &penguinv1.Abort{}), `{"type":"abort"}`},
		{"abort reason", "event_msg", msg(ts, &penguinv1.Abort{Reason: "user pressed Esc"}), `{"type":"abort","reason":"user pressed Esc"}`},
		{"subagent", "event_msg", msg(ts, &penguinv1.Subagent{SessionId: "session-child"}), `{"type":"subagent","session_id":"session-child"}`},
		{"goal_started", "event_msg", msg(ts, &penguinv1.GoalStarted{Objective: "pass", Budget: 500, GoalFile: "scratchpad/GOAL.yaml"}),
			`{"type":"goal_started","objective":"pass","budget":500,"goal_file":"scratchpad/GOAL.yaml"}`},
		{"goal_round", "event_msg", msg(ts, &penguinv1.GoalRound{Round: 2, Used: 120, Budget: 500, WrapUp: true}),
			`{"type":"goal_round","round":2,"used":120,"budget":500,"wrap_up":true}`},
		{"goal_finished", "event_msg", msg(ts, &penguinv1.GoalFinished{Outcome: penguinv1.GoalOutcome_GOAL_OUTCOME_BUDGET_LIMITED, Rounds: 3, Tokens: 610, Message: "spent"}),
			`{"type":"goal_finished","outcome":"budget_limited","rounds":3,"tokens":610,"message":"spent"}`},
		{"workspace_change", "event_msg", msg(ts, &penguinv1.WorkspaceChange{Kind: penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO, Before: "b", After: "a",
			Files:        []*penguinv1.FileChange{{Path: "x.bin", Kind: penguinv1.FileChangeKind_FILE_CHANGE_KIND_DELETED, Binary: true}, {Path: "l", Kind: penguinv1.FileChangeKind_FILE_CHANGE_KIND_ADDED, Link: true, AddedLines: 1}},
			TurnSequence: 12, Forced: true}),
			`{"type":"workspace_change","kind":"undo","before":"b","after":"a","files":[{"path":"x.bin","kind":"deleted","binary":true},{"path":"l","kind":"added","added_lines":1,"link":true}],"turn_sequence":12,"forced":true}`},
	}
}

// TestPayloads checks the line of every payload kind field by field, and
// that each decodes back to the same message.
func TestPayloads(t *testing.T) {
	kinds := map[string]bool{}
	for _, tc := range payloadCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := `{"timestamp":"2026-07-18T03:10:22.531Z","type":"` + tc.typ + `","payload":` + tc.payload + `}`
			got, err := transcript.Marshal(tc.m)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != want {
				t.Fatalf("Marshal\n got %s\nwant %s", got, want)
			}
			if !json.Valid(got) || bytes.ContainsAny(got, "\n\r") {
				t.Fatalf("line is not one valid JSON line: %q", got)
			}
			back, err := transcript.Unmarshal(got)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !proto.Equal(back, tc.m) {
				t.Fatalf("round trip\n got %v\nwant %v", back, tc.m)
			}
		})
		kinds[string(tc.m.ProtoReflect().WhichOneof(tc.m.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name())] = true
	}
	// Every payload of the contract is covered.
	fields := (&penguinv1.OmniMessage{}).ProtoReflect().Descriptor().Oneofs().ByName("payload").Fields()
	for i := range fields.Len() {
		if name := string(fields.Get(i).Name()); !kinds[name] {
			t.Errorf("payload %s has no case", name)
		}
	}
}

// TestFixedRolesDefault checks that payloads whose role never varies carry
// it in the line even when the message leaves it unspecified, as every
// model message line of the format has a role.
func TestFixedRolesDefault(t *testing.T) {
	for _, tc := range []struct {
		m    *penguinv1.OmniMessage
		role string
	}{
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.Thinking{Thinking: "t"}), `"role":"assistant"`},
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.ToolCall{Name: "n"}), `"role":"assistant"`},
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.ToolCallOutput{Output: "o"}), `"role":"user"`},
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.ImageUrl{ImageUrl: "u"}), `"role":"user"`},
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.PartialText{EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_START}), `"role":"assistant"`},
		{msg("2026-07-18T03:10:22.531Z", &penguinv1.PartialToolCallOutput{EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_START}), `"role":"user"`},
	} {
		line, err := transcript.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(line, []byte(tc.role)) {
			t.Errorf("%s lacks %s", line, tc.role)
		}
	}
}

// TestFidelityBytes checks that fidelity is carried as the JSON object it
// holds: compact bytes survive exactly (escapes, number spelling, key
// order), and insignificant whitespace is the only thing a line drops.
func TestFidelityBytes(t *testing.T) {
	exact := []byte(`{"z":1,"a":"\u00e9\/<>&","n":1.50e+1,"nested":{"k":[true,null]}}`)
	m := msg("2026-07-18T03:10:22.531Z", &penguinv1.Thinking{Role: assistant, Thinking: "t", Fidelity: exact})
	line, err := transcript.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, append(append([]byte(`"fidelity":`), exact...), ',')) && !bytes.Contains(line, append([]byte(`"fidelity":`), exact...)) {
		t.Fatalf("fidelity not embedded verbatim: %s", line)
	}
	back, err := transcript.Unmarshal(line)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.GetThinking().GetFidelity(); !bytes.Equal(got, exact) {
		t.Fatalf("fidelity after round trip = %s, want %s", got, exact)
	}

	spaced := []byte("{ \"signature\" :\n \"abc\" ,\t\"x\": [1, 2] }")
	m = msg("2026-07-18T03:10:22.531Z", &penguinv1.Text{Role: assistant, Text: "t", Fidelity: spaced})
	line, err = transcript.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(line, "\n\t") {
		t.Fatalf("whitespace in fidelity broke the line: %q", line)
	}
	back, err = transcript.Unmarshal(line)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(back.GetText().GetFidelity()), `{"signature":"abc","x":[1,2]}`; got != want {
		t.Fatalf("compacted fidelity = %s, want %s", got, want)
	}
}

// TestTimestamps checks the format's millisecond UTC timestamps (as
// JavaScript's Date.toISOString writes them) and that any RFC 3339 time is
// read.
func TestTimestamps(t *testing.T) {
	m := msg("2026-07-18T03:10:22Z", &penguinv1.RequestBegin{})
	m.Timestamp = timestamppb.New(time.Date(2026, 7, 18, 11, 10, 22, 531_999_999, time.FixedZone("CST", 8*3600)))
	line, err := transcript.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(line, []byte(`{"timestamp":"2026-07-18T03:10:22.531Z",`)) {
		t.Fatalf("timestamp not in the trace format's shape: %s", line)
	}
	for in, want := range map[string]time.Time{
		"2026-07-18T03:10:22Z":                time.Date(2026, 7, 18, 3, 10, 22, 0, time.UTC),
		"2026-07-18T03:10:22.5Z":              time.Date(2026, 7, 18, 3, 10, 22, 500_000_000, time.UTC),
		"2026-07-18T03:10:22.123456789Z":      time.Date(2026, 7, 18, 3, 10, 22, 123_456_789, time.UTC),
		"2026-07-18T11:10:22.531+08:00":       time.Date(2026, 7, 18, 3, 10, 22, 531_000_000, time.UTC),
		"2026-07-18T03:10:22.000000001-00:00": time.Date(2026, 7, 18, 3, 10, 22, 1, time.UTC),
	} {
		got, err := transcript.Unmarshal([]byte(`{"timestamp":"` + in + `","type":"event_msg","payload":{"type":"request_begin"}}`))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if !got.GetTimestamp().AsTime().Equal(want) {
			t.Errorf("%s read as %v, want %v", in, got.GetTimestamp().AsTime(), want)
		}
	}
}

// TestDecodeLenient checks inputs that other writers of the format
// produce and a strict reading would refuse: unknown fields, null
// optionals, fixed roles left out, and an empty images list.
func TestDecodeLenient(t *testing.T) {
	for line, want := range map[string]*penguinv1.OmniMessage{
		`{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"abort","reason":null}}`:                       msg("2026-07-18T03:10:22.531Z", &penguinv1.Abort{}),
		`{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg","payload":{"type":"request_end","status":"failed","extra":1}}`:   msg("2026-07-18T03:10:22.531Z", &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_FAILED}),
		`{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"thinking","thinking":"t","fidelity":null}}`:   msg("2026-07-18T03:10:22.531Z", &penguinv1.Thinking{Role: assistant, Thinking: "t"}),
		`{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":{"type":"tool_call_output","output":"o","images":[]}}`: msg("2026-07-18T03:10:22.531Z", &penguinv1.ToolCallOutput{Role: user, Output: "o"}),
	} {
		got, err := transcript.Unmarshal([]byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s\n got %v\nwant %v", line, got, want)
		}
	}
}

// TestMarshalErrors checks that messages the trace cannot represent are
// refused with a message that says what is wrong.
func TestMarshalErrors(t *testing.T) {
	ts := "2026-07-18T03:10:22.531Z"
	noTS := msg(ts, &penguinv1.RequestBegin{})
	noTS.Timestamp = nil
	for _, tc := range []struct {
		name string
		m    *penguinv1.OmniMessage
		want string
	}{
		{"nil", nil, "nil message"},
		{"no timestamp", noTS, "no timestamp"},
		{"no payload", &penguinv1.OmniMessage{Timestamp: at(ts)}, "no payload"},
		{"text without role", msg(ts, &penguinv1.Text{Text: "x"}), "role is not set"},
		{"inline_data without role", msg(ts, &penguinv1.InlineData{Data: "x"}), "role is not set"},
		{"fidelity not JSON", msg(ts, &penguinv1.Thinking{Role: assistant, Fidelity: []byte("sig=abc")}), "fidelity is not valid JSON"},
		{"fidelity not an object", msg(ts, &penguinv1.Thinking{Role: assistant, Fidelity: []byte(`["a"]`)}), "fidelity is not a JSON object"},
		{"parameters not JSON", msg(ts, &penguinv1.ToolListReady{Tools: []*penguinv1.ToolDefinition{{Name: "t", Parameters: "{"}}}), `parameters of tool "t" is not valid JSON`},
		{"request_end without status", msg(ts, &penguinv1.RequestEnd{}), "request_end status is not set"},
		{"approval without decision", msg(ts, &penguinv1.ApprovalDecision{ToolCallId: "c"}), "decision is not set"},
		{"partial without phase", msg(ts, &penguinv1.PartialText{Role: assistant}), "event_type is not set"},
		{"compaction without reason", msg(ts, &penguinv1.CompactionBegin{Mode: penguinv1.CompactionMode_COMPACTION_MODE_DISCARD}), "compaction reason is not set"},
		{"compaction_end without status", msg(ts, &penguinv1.CompactionEnd{Reason: 1, Mode: 1}), "compaction_end status is not set"},
		{"mcp result without status", msg(ts, &penguinv1.McpConnectEnd{Status: 1, Results: []*penguinv1.McpServerConnectResult{{Server: "s"}}}), "mcp connect status is not set"},
		{"undefined enum", msg(ts, &penguinv1.Text{Role: user, StopReason: 99}), "stop_reason 99 has no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := transcript.Marshal(tc.m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Marshal = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestUnmarshalErrors checks that lines that are not trace lines are
// refused with a message that says why.
func TestUnmarshalErrors(t *testing.T) {
	const ts = `"timestamp":"2026-07-18T03:10:22.531Z"`
	for _, tc := range []struct{ line, want string }{
		{`not json`, "malformed line"},
		{`{"type":"event_msg","payload":{"type":"request_begin"}}`, "no timestamp"},
		{`{"timestamp":"yesterday","type":"event_msg","payload":{"type":"request_begin"}}`, "bad timestamp"},
		{`{` + ts + `,"type":"event_msg"}`, "no payload"},
		{`{` + ts + `,"type":"event_msg","payload":null}`, "no payload"},
		{`{` + ts + `,"type":"event_msg","payload":{}}`, "payload has no type"},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"telepathy"}}`, `unknown payload type "telepathy"`},
		{`{` + ts + `,"type":"chat_msg","payload":{"type":"text","role":"user","text":"x"}}`, `unknown message type "chat_msg"`},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"text","role":"user","text":"x"}}`, `"text" belongs in a model_msg, not a event_msg`},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"request_begin"}}`, `"request_begin" belongs in a event_msg`},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"text","text":"x"}}`, "role is missing"},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"text","role":"system","text":"x"}}`, `unknown role "system"`},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"text","role":"user","text":"x","stop_reason":"exploded"}}`, `unknown stop_reason "exploded"`},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"text","role":"user","text":"x","sender":"robot"}}`, `unknown sender "robot"`},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"text","role":"user","text":7}}`, "text payload"},
		{`{` + ts + `,"type":"model_msg","payload":{"type":"partial_text","role":"assistant","text":"x"}}`, "event_type is missing"},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"request_end"}}`, "request_end status is missing"},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"approval_decision","decision":"maybe","tool_call_id":"c"}}`, `unknown decision "maybe"`},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"compaction_begin","reason":"boredom","mode":"discard"}}`, `unknown compaction reason "boredom"`},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"compaction_end","reason":"turns","mode":"shred","status":"completed"}}`, `unknown compaction mode "shred"`},
		{`{` + ts + `,"type":"event_msg","payload":{"type":"mcp_connect_end","status":"completed","results":[{"server":"s","status":"meh"}]}}`, `unknown mcp connect status "meh"`},
		{`{` + ts + `,"type":"session_meta","payload":{"session_id":"s","model_context_window":"lots"}}`, "model_context_window"},
	} {
		_, err := transcript.Unmarshal([]byte(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v; want an error containing %q", tc.line, err, tc.want)
		}
	}
}

// TestJSONL checks WriteJSONL and ReadJSONL together: every payload kind
// and a 5 MB data URL round trip through a file of newline-terminated
// lines.
func TestJSONL(t *testing.T) {
	var msgs []*penguinv1.OmniMessage
	for _, tc := range payloadCases() {
		msgs = append(msgs, tc.m)
	}
	big := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 5<<20/11)
	msgs = append(msgs, msg("2026-07-18T03:10:22.531Z", &penguinv1.ImageUrl{Role: user, ImageUrl: big}))
	msgs = append(msgs, referenceMessages()...)

	var buf bytes.Buffer
	if err := transcript.WriteJSONL(&buf, msgs); err != nil {
		t.Fatalf("WriteJSONL: %v", err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(msgs) || !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
		t.Fatalf("file has %d newlines for %d messages", n, len(msgs))
	}
	sc := bufio.NewScanner(bytes.NewReader(buf.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("invalid JSON line: %.200s", sc.Bytes())
		}
	}
	got, err := transcript.ReadJSONL(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("ReadJSONL: %v", err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("read %d messages, want %d", len(got), len(msgs))
	}
	for i := range msgs {
		if !proto.Equal(got[i], msgs[i]) {
			t.Fatalf("message %d differs after the file round trip", i)
		}
	}

	// The example file reads back as its messages.
	golden, err := os.ReadFile("testdata/reference.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	got, err = transcript.ReadJSONL(bytes.NewReader(golden))
	if err != nil {
		t.Fatalf("ReadJSONL(reference.jsonl): %v", err)
	}
	var out bytes.Buffer
	if err := transcript.WriteJSONL(&out, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), golden) {
		t.Fatalf("reference.jsonl does not survive read and write byte for byte:\n%s", out.Bytes())
	}

	bad := msg("2026-07-18T03:10:22.531Z", &penguinv1.RequestEnd{})
	err = transcript.WriteJSONL(&bytes.Buffer{}, []*penguinv1.OmniMessage{msgs[0], bad})
	if err == nil || !strings.Contains(err.Error(), "message 1") {
		t.Fatalf("WriteJSONL with a bad message = %v; want an error naming message 1", err)
	}
}

// TestReadJSONLTornAndDamaged checks the format's tolerance of a torn
// last line, and that a damaged line anywhere else is an error naming it.
func TestReadJSONLTornAndDamaged(t *testing.T) {
	golden, err := os.ReadFile("testdata/reference.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := readGolden(t)

	// A crash cut the last record short: no trailing newline.
	torn := append(bytes.Clone(golden), lines[3][:len(lines[3])/2]...)
	got, err := transcript.ReadJSONL(bytes.NewReader(torn))
	if err != nil {
		t.Fatalf("ReadJSONL with a torn last line: %v", err)
	}
	if len(got) != len(lines) {
		t.Fatalf("read %d messages, want the %d complete ones", len(got), len(lines))
	}

	// A complete last line without a trailing newline is kept.
	got, err = transcript.ReadJSONL(bytes.NewReader(bytes.TrimSuffix(golden, []byte("\n"))))
	if err != nil || len(got) != len(lines) {
		t.Fatalf("ReadJSONL without a final newline = %d messages, %v", len(got), err)
	}

	// Blank lines are skipped.
	got, err = transcript.ReadJSONL(strings.NewReader("\n" + string(lines[1]) + "\n\n" + string(lines[2]) + "\n"))
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadJSONL with blank lines = %d messages, %v", len(got), err)
	}

	// A damaged line in the middle (the torn line of an earlier crash,
	// followed by newer records) is an error naming line 3.
	damaged := string(lines[0]) + "\n" + string(lines[1]) + "\n" + string(lines[2][:20]) + "\n" + string(lines[3]) + "\n"
	_, err = transcript.ReadJSONL(strings.NewReader(damaged))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("ReadJSONL with a damaged middle line = %v; want an error naming line 3", err)
	}
}
