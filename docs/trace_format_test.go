package docs_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/transcript"
)

var update = flag.Bool("update", false, "rewrite the examples of trace-format.md from the trace encoder")

// traceDoc is the document whose examples these tests own.
const traceDoc = "trace-format.md"

// TestTraceFormatExamples checks that every example of trace-format.md is,
// byte for byte, what transcript.Marshal writes for the messages built here, and
// that each line reads back as its message. With -update it rewrites the
// examples instead, so a change to the encoder shows in the document.
func TestTraceFormatExamples(t *testing.T) {
	doc, err := os.ReadFile(traceDoc)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := exampleBlocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	all := examples()
	used := map[string]bool{}
	var rewritten bytes.Buffer
	last := 0
	for _, b := range blocks {
		msgs, ok := all[b.name]
		if !ok {
			t.Errorf("%s names example %q, which the test does not build", traceDoc, b.name)
			continue
		}
		used[b.name] = true
		want := render(t, msgs)
		if *update {
			rewritten.Write(doc[last:b.start])
			rewritten.WriteString(want)
			last = b.end
			continue
		}
		if got := string(doc[b.start:b.end]); got != want {
			t.Errorf("example %q of %s is not what the encoder writes (go test ./docs -update rewrites it):\n got:\n%s\nwant:\n%s", b.name, traceDoc, got, want)
		}
		for i, line := range strings.Split(strings.TrimSuffix(want, "\n"), "\n") {
			back, err := transcript.Unmarshal([]byte(line))
			if err != nil {
				t.Errorf("example %q line %d does not read back: %v", b.name, i+1, err)
			} else if !proto.Equal(back, msgs[i]) {
				t.Errorf("example %q line %d reads back as\n%v\nnot\n%v", b.name, i+1, back, msgs[i])
			}
		}
	}
	for name := range all {
		if !used[name] {
			t.Errorf("example %q is built but %s does not show it", name, traceDoc)
		}
	}
	if *update {
		rewritten.Write(doc[last:])
		if err := os.WriteFile(traceDoc, rewritten.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTraceFormatShowsEveryPayload checks that the examples, taken
// together, show every payload the contract defines, so a new payload
// cannot be added without the document showing its line.
func TestTraceFormatShowsEveryPayload(t *testing.T) {
	shown := map[protoreflect.Name]bool{}
	for _, msgs := range examples() {
		for _, m := range msgs {
			if f := m.ProtoReflect().WhichOneof(payloadOneof()); f != nil {
				shown[f.Name()] = true
			}
		}
	}
	fields := payloadOneof().Fields()
	for i := range fields.Len() {
		if name := fields.Get(i).Name(); !shown[name] {
			t.Errorf("no example of %s shows a %s line", traceDoc, name)
		}
	}
}

// A block is one example of the document: the bytes between the opening
// and the closing fence of the code block that follows an example marker.
type block struct {
	name       string
	start, end int
}

var (
	marker = regexp.MustCompile(`(?m)^<!-- example: ([a-z0-9-]+) -->\n` + "```jsonl\n")
	fence  = regexp.MustCompile("(?m)^```jsonl\n")
)

// exampleBlocks finds the example blocks of doc, and refuses a jsonl
// block without a marker, which nothing would check.
func exampleBlocks(doc []byte) ([]block, error) {
	var out []block
	for _, loc := range marker.FindAllSubmatchIndex(doc, -1) {
		start := loc[1]
		n := bytes.Index(doc[start:], []byte("```\n"))
		if n < 0 {
			return nil, fmt.Errorf("example %q has no closing fence", doc[loc[2]:loc[3]])
		}
		out = append(out, block{name: string(doc[loc[2]:loc[3]]), start: start, end: start + n})
	}
	if n, m := len(fence.FindAllIndex(doc, -1)), len(out); n != m {
		return nil, fmt.Errorf("%d jsonl blocks, %d of them marked as examples: mark every one (<!-- example: NAME -->)", n, m)
	}
	return out, nil
}

// render writes msgs as trace lines.
func render(t *testing.T, msgs []*penguinv1.OmniMessage) string {
	t.Helper()
	var b strings.Builder
	if err := transcript.WriteJSONL(&b, msgs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func payloadOneof() protoreflect.OneofDescriptor {
	return (&penguinv1.OmniMessage{}).ProtoReflect().Descriptor().Oneofs().ByName("payload")
}

// payload wraps p, one of the contract's payload messages, in an
// OmniMessage, for the payloads package omni has no constructor of.
func payload(p proto.Message) *penguinv1.OmniMessage {
	m := &penguinv1.OmniMessage{}
	fields := payloadOneof().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Message().FullName() == p.ProtoReflect().Descriptor().FullName() {
			m.ProtoReflect().Set(f, protoreflect.ValueOfMessage(p.ProtoReflect()))
			return m
		}
	}
	panic(fmt.Sprintf("%T is not an OmniMessage payload", p))
}

// timeline stamps messages in order, each a given time after the one
// before, as a session would have produced them.
type timeline struct {
	at   time.Time
	msgs []*penguinv1.OmniMessage
}

func startAt(ts string) *timeline {
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		panic(err)
	}
	return &timeline{at: at}
}

// add appends m, after d.
func (l *timeline) add(d time.Duration, m *penguinv1.OmniMessage) *timeline {
	l.at = l.at.Add(d)
	m.Timestamp = timestamppb.New(l.at)
	l.msgs = append(l.msgs, m)
	return l
}

const (
	ms        = time.Millisecond
	sessionID = "session-2026-07-18-03-10-22-3f8a1c2d"
	childID   = "session-2026-07-18-03-14-05-a1b2c3d4"
	provider  = "anthropic"
	modelID   = "claude-sonnet-4-5"
)

// usage is the token_usage event the engine records after a request: the
// session's running totals, the request's own counts, and the model.
func usage(session, request *penguinv1.TokenCounts) *penguinv1.OmniMessage {
	m := omni.TokenUsage(session, request)
	m.GetTokenUsage().Provider, m.GetTokenUsage().ModelId = provider, modelID
	return m
}

func cost(usd float64) *float64 { return &usd }

func meta(id, source string) *penguinv1.OmniMessage {
	return payload(&penguinv1.SessionMeta{
		SessionId: id, Provider: provider, ModelId: modelID, ModelContextWindow: 200000,
		SystemPrompt: "You are Penguin, a coding agent. …", AgentState: "/home/u/.local/share/penguin/agents/default",
		Workspace: "/home/u/work", Source: source,
	})
}

var execCommand = &penguinv1.ToolDefinition{
	Name:        "exec_command",
	Description: "Run a shell command in the workspace …",
	Parameters:  `{"type":"object","properties":{"description":{"type":"string"},"cmd":{"type":"string"}},"required":["description","cmd"]}`,
}

const (
	completed = penguinv1.StopReason_STOP_REASON_COMPLETED
	aborted   = penguinv1.StopReason_STOP_REASON_ABORTED
	start     = penguinv1.StreamEventType_STREAM_EVENT_TYPE_START
	delta     = penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA
	stop      = penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
)

// examples are the messages of each example of the document, by name.
func examples() map[string][]*penguinv1.OmniMessage {
	return map[string][]*penguinv1.OmniMessage{
		"envelope":       startAt("2026-07-18T03:10:22.531Z").add(0, omni.UserText("Create hello.txt")).msgs,
		"first-task":     firstTask(),
		"retry":          retry(),
		"abort":          abortExample(),
		"live-stream":    liveStream(),
		"compaction":     compaction(),
		"subagent":       subagent(),
		"subagent-child": subagentChild(),
		"more":           more(),
	}
}

// firstTask is the log of a new session's first task: the session_meta
// written when the session was created, the prompt, the tool list, and two
// requests, the first calling a tool.
func firstTask() []*penguinv1.OmniMessage {
	first := &penguinv1.TokenCounts{CacheWrite: 1800, Output: 61, Total: 1861, CostUsd: cost(0.007665)}
	second := &penguinv1.TokenCounts{CacheRead: 1800, Output: 12, Total: 1893, CostUsd: cost(0.000881)}
	return startAt("2026-07-18T03:10:22.531Z").
		add(0, meta(sessionID, "")).
		add(4*ms, omni.UserText("Create hello.txt")).
		add(1*ms, omni.ToolListReady([]*penguinv1.ToolDefinition{execCommand})).
		add(2*ms, omni.RequestBegin()).
		add(1403*ms, omni.Thinking("The user wants a file named hello.txt.", []byte(`{"signature":"EqQBCkYIBxgCKkB…"}`))).
		add(12*ms, omni.AssistantText("I'll create it.")).
		add(48*ms, omni.ToolCall("toolu_01", "exec_command", `{"description":"Create hello.txt","cmd":"printf hi > hello.txt"}`)).
		add(1*ms, omni.ApprovalDecision("toolu_01", penguinv1.Decision_DECISION_ALLOW)).
		add(3*ms, usage(first, first)).
		add(0, omni.RequestEnd(completed, "", 0, 0)).
		add(96*ms, omni.ToolCallOutput("toolu_01", "[no output]", penguinv1.StopReason_STOP_REASON_UNSPECIFIED)).
		add(1*ms, omni.RequestBegin()).
		add(1187*ms, omni.AssistantText("Created hello.txt.")).
		add(2*ms, usage(omni.AddTokenCounts(first, second), second)).
		add(0, omni.RequestEnd(completed, "", 0, 0)).
		msgs
}

// retry is a request the provider refused for a while, retried on the
// ladder after the wait its Retry-After asked for.
func retry() []*penguinv1.OmniMessage {
	return startAt("2026-07-18T03:12:40.100Z").
		add(0, omni.UserText("Now add a test")).
		add(2*ms, omni.RequestBegin()).
		add(310*ms, omni.RequestEnd(penguinv1.StopReason_STOP_REASON_FAILED, "provider answered 429 Too Many Requests: rate limit reached", 1, 2000)).
		add(2001*ms, omni.RequestBegin()).
		add(2210*ms, omni.AssistantText("Added test.sh.")).
		add(2*ms, usage(
			&penguinv1.TokenCounts{CacheRead: 1800, CacheWrite: 140, Output: 90, Total: 2030, CostUsd: cost(0.002415)},
			&penguinv1.TokenCounts{CacheRead: 1800, CacheWrite: 140, Output: 90, Total: 2030, CostUsd: cost(0.002415)})).
		add(0, omni.RequestEnd(completed, "", 2, 0)).
		msgs
}

// abortExample is a task aborted while its command ran: the open output
// is closed with the interrupted marker, then the abort is recorded.
func abortExample() []*penguinv1.OmniMessage {
	return startAt("2026-07-18T03:13:02.000Z").
		add(0, omni.ToolCall("toolu_07", "exec_command", `{"description":"Run the tests","cmd":"sh test.sh"}`)).
		add(1*ms, omni.ApprovalDecision("toolu_07", penguinv1.Decision_DECISION_ALLOW)).
		add(3*ms, usage(
			&penguinv1.TokenCounts{CacheRead: 3600, CacheWrite: 200, Output: 130, Total: 4060, CostUsd: cost(0.0036)},
			&penguinv1.TokenCounts{CacheRead: 1800, CacheWrite: 60, Output: 40, Total: 2030, CostUsd: cost(0.001365)})).
		add(0, omni.RequestEnd(completed, "", 0, 0)).
		add(9120*ms, omni.ToolCallOutput("toolu_07", "running 12 tests\n[interrupted: tool aborted by user]", aborted)).
		add(1*ms, omni.Abort("Ctrl-C in chat")).
		msgs
}

// liveStream is what Run and Attach (and the gateway's SSE stream) send
// for one answer and one tool call, partials included, with a message
// forwarded from a subagent in between.
func liveStream() []*penguinv1.OmniMessage {
	args := `{"description":"List the files","cmd":"ls"}`
	return startAt("2026-07-18T03:10:23.946Z").
		add(0, omni.PartialText(start, "")).
		add(1*ms, omni.PartialText(delta, "Let me ")).
		add(9*ms, omni.PartialText(delta, "look.")).
		add(2*ms, omni.PartialText(stop, "")).
		add(0, omni.AssistantText("Let me look.")).
		add(40*ms, omni.PartialToolCall(start, "toolu_02", "exec_command", "")).
		add(3*ms, omni.PartialToolCall(delta, "toolu_02", "", `{"description":"List the files",`)).
		add(4*ms, omni.PartialToolCall(delta, "toolu_02", "", `"cmd":"ls"}`)).
		add(1*ms, omni.PartialToolCall(stop, "toolu_02", "", "")).
		add(0, omni.ToolCall("toolu_02", "exec_command", args)).
		add(1*ms, omni.ApprovalDecision("toolu_02", penguinv1.Decision_DECISION_ALLOW)).
		add(2*ms, omni.WithOrigin(omni.PartialThinking(delta, "The tests only cover"), childID)).
		add(18*ms, omni.PartialToolCallOutput(start, "toolu_02", "")).
		add(15*ms, omni.PartialToolCallOutput(delta, "toolu_02", "hello.txt\ntest.sh\n")).
		add(1*ms, omni.PartialToolCallOutput(stop, "toolu_02", "")).
		add(0, omni.ToolCallOutput("toolu_02", "hello.txt\ntest.sh\n", penguinv1.StopReason_STOP_REASON_UNSPECIFIED)).
		msgs
}

// compaction is the end of a context compacted because it grew past its
// threshold, and the start of the fresh context that the summary opens.
func compaction() []*penguinv1.OmniMessage {
	total := &penguinv1.TokenCounts{CacheRead: 310000, CacheWrite: 52000, Output: 9100, Total: 371100, CostUsd: cost(0.4215)}
	req := &penguinv1.TokenCounts{CacheRead: 160000, CacheWrite: 600, Output: 700, Total: 161300, CostUsd: cost(0.06135)}
	summary := "[summary]\nThe user asked for hello.txt and a test; both exist and pass.\n[/summary]"
	return startAt("2026-07-18T04:02:11.000Z").
		add(0, payload(&penguinv1.CompactionBegin{Reason: penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT,
			Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE, Context: 160600, Turns: 41})).
		add(9310*ms, omni.AssistantText(summary)).
		add(2*ms, usage(omni.AddTokenCounts(total, req), req)).
		add(1*ms, payload(&penguinv1.CompactionEnd{Reason: penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT,
			Mode: penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE, Status: completed})).
		add(1*ms, meta(sessionID, "")).
		add(1*ms, omni.ToolListReady([]*penguinv1.ToolDefinition{execCommand})).
		add(1*ms, omni.SenderText(penguinv1.Sender_SENDER_HARNESS, "[context_summary]\nThe earlier part of this session was compacted. "+
			"This is its summary, written to carry the work on:\n\nThe user asked for hello.txt and a test; both exist and pass.\n[/context_summary]")).
		msgs
}

// subagent is a parent's log around run_subagent: the call, the pointer
// to the child session, and the child's answer as the call's output.
func subagent() []*penguinv1.OmniMessage {
	return startAt("2026-07-18T03:14:05.120Z").
		add(0, omni.ToolCall("toolu_09", "run_subagent", `{"prompt":"Review test.sh and report problems"}`)).
		add(1*ms, omni.ApprovalDecision("toolu_09", penguinv1.Decision_DECISION_ALLOW)).
		add(30*ms, omni.SubagentPointer(childID)).
		add(48210*ms, omni.ToolCallOutput("toolu_09", "test.sh checks one case only; negative numbers are not tested.", penguinv1.StopReason_STOP_REASON_UNSPECIFIED)).
		msgs
}

// subagentChild is the head of the child session's own log: its
// session_meta says where it came from, and its prompt who wrote it.
func subagentChild() []*penguinv1.OmniMessage {
	return startAt("2026-07-18T03:14:05.139Z").
		add(0, meta(childID, "subagent")).
		add(10*ms, omni.SenderText(penguinv1.Sender_SENDER_PARENT_AGENT, "Review test.sh and report problems")).
		add(1*ms, omni.ToolListReady([]*penguinv1.ToolDefinition{execCommand})).
		add(2*ms, omni.RequestBegin()).
		msgs
}

// more shows the payloads the other examples do not: images, inline data,
// inline thinking, a denied call, usage a provider did not report, and
// MCP connects.
func more() []*penguinv1.OmniMessage {
	assistant := penguinv1.Role_ROLE_ASSISTANT
	return startAt("2026-07-18T05:00:00.000Z").
		add(0, omni.ImageURL("data:image/png;base64,iVBORw0KGgo…")).
		add(1*ms, payload(&penguinv1.InlineData{Role: penguinv1.Role_ROLE_USER, Data: "aGVsbG8K", MimeType: "text/plain"})).
		add(800*ms, payload(&penguinv1.InlineThinking{Role: assistant, Data: "ZW5jcnlwdGVk…", MimeType: "application/octet-stream"})).
		add(300*ms, omni.ToolCall("call_3", "exec_command", `{"description":"Delete everything","cmd":"rm -rf /"}`)).
		add(1*ms, omni.ApprovalDecision("call_3", penguinv1.Decision_DECISION_FORBIDDEN)).
		add(0, omni.ToolCallOutput("call_3", "Tool call denied by policy.", aborted)).
		add(2*ms, omni.TokenUsage(&penguinv1.TokenCounts{Output: 300, Total: 5000, Unreported: true}, &penguinv1.TokenCounts{Unreported: true})).
		add(10*ms, payload(&penguinv1.McpConnectBegin{Servers: []string{"docs"}})).
		add(350*ms, payload(&penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED,
			Results: []*penguinv1.McpServerConnectResult{{Server: "docs", Transport: "stdio",
				Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, DurationMs: 350, Tools: 3}}})).
		add(536*ms, payload(&penguinv1.GoalStarted{Objective: "Make every test pass.", Budget: 500000, GoalFile: "scratchpad/GOAL.yaml"})).
		add(1*ms, payload(&penguinv1.GoalRound{Round: 1, Budget: 500000})).
		add(9*time.Minute+39309*ms, payload(&penguinv1.GoalFinished{Outcome: penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, Rounds: 3, Tokens: 41230,
			Message: "the model claimed the objective complete"})).
		add(110*ms, payload(&penguinv1.WorkspaceChange{Kind: penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_TURN,
			Before: "5f0e8b2c4a7d9e1f3b6c8a0d2e4f6a8b1c3d5e7f9a0b2c4d6e8f0a1b3c5d7e9f", After: "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
			Files: []*penguinv1.FileChange{
				{Path: "add.sh", Kind: penguinv1.FileChangeKind_FILE_CHANGE_KIND_MODIFIED, AddedLines: 1, RemovedLines: 1},
				{Path: "CHANGELOG.md", Kind: penguinv1.FileChangeKind_FILE_CHANGE_KIND_ADDED, AddedLines: 3},
			}})).
		msgs
}
