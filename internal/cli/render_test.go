package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/omni"
)

// render feeds messages to a new renderer and returns what it printed.
func render(opts cli.RendererOptions, ms ...*penguinv1.OmniMessage) string {
	var out bytes.Buffer
	r := cli.NewRenderer(&out, opts)
	for i, m := range ms {
		r.Event(msgEvent(int64(i+1), m))
	}
	return out.String()
}

// streamedOutput is a tool call whose output streams in one delta.
func streamedOutput(id, name, args, body string) []*penguinv1.OmniMessage {
	return []*penguinv1.OmniMessage{
		omni.ToolCall(id, name, args),
		omni.PartialToolCallOutput(start, id, ""), omni.PartialToolCallOutput(delta, id, body), omni.PartialToolCallOutput(stop, id, ""),
		omni.ToolCallOutput(id, body, penguinv1.StopReason_STOP_REASON_COMPLETED),
	}
}

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// TestRendererShowsShortOutputsWhole checks outputs of 5 to 9 lines, which
// collapsed views used to cut at their first 4 lines with no marker.
func TestRendererShowsShortOutputsWhole(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 9; n++ {
		got := render(cli.RendererOptions{Collapse: true}, streamedOutput("c", "exec_command", `{"cmd":"seq"}`, numbered(n))...)
		for i := 1; i <= n; i++ {
			if strings.Count(got, fmt.Sprintf("│ line %d\n", i)) != 1 {
				t.Errorf("%d lines: line %d is not shown once:\n%s", n, i, got)
			}
		}
		if strings.Contains(got, "(+") {
			t.Errorf("%d lines: an elision marker:\n%s", n, got)
		}
	}
	got := render(cli.RendererOptions{Collapse: true}, streamedOutput("c", "exec_command", `{"cmd":"seq"}`, numbered(10))...)
	if !strings.Contains(got, "│ … (+2 lines, /verbose for full output)\n") || strings.Contains(got, "line 5\n") || !strings.Contains(got, "line 10\n") {
		t.Errorf("10 lines are not 4, a marker and 4:\n%s", got)
	}
}

// TestRendererShowsSmallDiffsWhole checks that an edit's diff is complete,
// headers and changed lines, and coloured; a long one is folded with a
// marker.
func TestRendererShowsSmallDiffsWhole(t *testing.T) {
	t.Parallel()
	diff := "Edited hello.txt\n--- a/hello.txt\n+++ b/hello.txt\n@@ -1 +1 @@\n-hello\n+hello, world\n"
	got := render(cli.RendererOptions{Collapse: true, Color: true}, streamedOutput("e", "edit_file", `{"file_path":"hello.txt"}`, diff)...)
	for _, want := range []string{"⏺ edit_file hello.txt", "\x1b[31m-hello\x1b[0m", "\x1b[32m+hello, world\x1b[0m", "\x1b[36m@@ -1 +1 @@\x1b[0m"} {
		if !strings.Contains(got, want) {
			t.Errorf("the edit's output lacks %q:\n%q", want, got)
		}
	}
	long := "--- a/f\n+++ b/f\n@@ -1,60 +1,60 @@\n" + strings.Repeat("+x\n", 60)
	got = render(cli.RendererOptions{Collapse: true}, streamedOutput("e", "edit_file", `{"file_path":"f"}`, long)...)
	if !strings.Contains(got, "… (+23 lines, /verbose for full output)") {
		t.Errorf("a 63-line diff is not folded after 40 lines:\n%s", got)
	}
}

// TestRendererLabelsDeniedCalls: a refused call is "denied", never
// "aborted".
func TestRendererLabelsDeniedCalls(t *testing.T) {
	t.Parallel()
	got := render(cli.RendererOptions{},
		omni.ToolCall("c", "exec_command", `{"cmd":"rm -rf /"}`),
		omni.ApprovalDecision("c", penguinv1.Decision_DECISION_DENY),
		omni.ToolCallOutput("c", "Tool call denied by user.", penguinv1.StopReason_STOP_REASON_ABORTED),
	)
	if !strings.Contains(got, "✗ denied") || strings.Contains(got, "aborted") {
		t.Errorf("a denied call:\n%s", got)
	}
}

// TestRendererSeparatesThinkingWithoutColor: with no colour, thinking is
// labelled and every line of it marked, and the answer is not.
func TestRendererSeparatesThinkingWithoutColor(t *testing.T) {
	t.Parallel()
	got := render(cli.RendererOptions{},
		omni.PartialThinking(start, ""), omni.PartialThinking(delta, "first I look\nthen I "), omni.PartialThinking(delta, "decide"),
		omni.PartialThinking(stop, ""), omni.Thinking("first I look\nthen I decide", nil),
		omni.PartialText(start, ""), omni.PartialText(delta, "The answer."), omni.PartialText(stop, ""), omni.AssistantText("The answer."),
	)
	want := "✻ thinking\n  ┊ first I look\n  ┊ then I decide\nThe answer.\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestRendererRendersMarkdown renders the answer's markdown for a
// terminal, block by block as it streams, never half a code fence: with
// colour as styles, without as a plain layout (code indented, lists
// bulleted, no fences), never padded to the width, and blocks streamed
// one by one apart by a blank line as blocks rendered together are.
func TestRendererRendersMarkdown(t *testing.T) {
	t.Parallel()
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		r := cli.NewRenderer(&out, cli.RendererOptions{Markdown: true, Width: 60, Color: color})
		r.Event(msgEvent(1, omni.PartialText(start, "")))
		r.Event(msgEvent(2, omni.PartialText(delta, "# Plan\n\nSome **bold** words.\n\n```go\nfunc main() {\n")))
		if got := out.String(); !strings.Contains(got, "Plan") || strings.Contains(got, "func main") {
			t.Fatalf("color %v: after two blocks and half a fence:\n%s", color, got)
		}
		if p := r.Pending(); !strings.Contains(p, "func main() {") {
			t.Errorf("color %v: the open fence is not pending: %q", color, p)
		}
		r.Event(msgEvent(3, omni.PartialText(delta, "}\n```\n\n- one\n- two")))
		r.Event(msgEvent(4, omni.PartialText(stop, "")))
		r.Event(msgEvent(5, omni.AssistantText("…")))
		got := out.String()
		wants := []string{"main", "•", "one", "two"}
		if !color {
			wants = append(wants, "  # Plan\n\n  Some **bold** words.\n\n    func main() {\n    }\n\n  • one\n  • two\n")
		}
		for _, want := range wants {
			if !strings.Contains(got, want) {
				t.Errorf("color %v: rendered markdown lacks %q:\n%s", color, want, got)
			}
		}
		if strings.Contains(got, "```") || strings.Contains(got, "- one") || strings.Contains(got, " \n") {
			t.Errorf("color %v: markdown printed raw or padded:\n%q", color, got)
		}
		if color && (strings.Contains(got, "**bold**") || !strings.Contains(got, "\x1b[")) {
			t.Errorf("colour markdown without styles:\n%q", got)
		}
	}
}

// TestRendererSaysAFinalFailureOnceWithItsFix: a failure that will not be
// retried is said once, at the end, with what to do.
func TestRendererSaysAFinalFailureOnceWithItsFix(t *testing.T) {
	t.Parallel()
	const msg = "provider answered 404 Not Found: The model `gpt-4oo` does not exist"
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{})
	r.Event(msgEvent(1, omni.RequestEnd(penguinv1.StopReason_STOP_REASON_FAILED, msg, 1, 0)))
	r.Event(idle(2, penguinv1.StopReason_STOP_REASON_FAILED, msg))
	got := out.String()
	if strings.Count(got, "does not exist") != 1 || !strings.Contains(got, "Check the model id") {
		t.Errorf("a final failure:\n%s", got)
	}
}

// TestRendererCountsDownRetriesInTheStatus: with a status line, a retry is
// no printed line but the activity's countdown.
func TestRendererCountsDownRetriesInTheStatus(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{Countdown: true})
	for i := int32(1); i <= 3; i++ {
		r.Event(msgEvent(int64(i), omni.RequestEnd(penguinv1.StopReason_STOP_REASON_TIMEOUT, "provider answered 503", i, 2000)))
	}
	if out.Len() != 0 {
		t.Errorf("retries printed lines:\n%s", out.String())
	}
	a := r.Activity()
	if a.What != "retrying" || a.Attempt != 4 || !strings.Contains(a.Failure, "503") || a.RetryAt.IsZero() {
		t.Errorf("activity %+v", a)
	}
}

// TestUserLineShowsLabelsNotMarkup: resumed history shows steering and
// summaries as labels.
func TestUserLineShowsLabelsNotMarkup(t *testing.T) {
	t.Parallel()
	got := render(cli.RendererOptions{},
		omni.SenderText(penguinv1.Sender_SENDER_HARNESS, "[context_summary]\nwe did a\nand b\n[/context_summary]"),
		omni.SenderText(penguinv1.Sender_SENDER_HARNESS, "[background_task_done]\nkind: command\nid: p1\n[/background_task_done]\nout"),
	)
	if strings.Contains(got, "[context_summary]") || !strings.Contains(got, "≡ summary of the earlier conversation (2 lines)") ||
		strings.Contains(got, "[background_task_done]") || !strings.Contains(got, "↳ background work finished: kind: command") {
		t.Errorf("harness texts:\n%s", got)
	}
	if l := cli.UserLine("[user_steering]\nalso say banana\n[/user_steering]"); l != "» also say banana" {
		t.Errorf("steering: %q", l)
	}
	if l := cli.UserLine("plain [words] here"); l != "› plain [words] here" {
		t.Errorf("plain: %q", l)
	}
}

// TestApprovalPromptShowsWhatWillHappen: the diff of an edit, the command
// of exec_command, never raw JSON.
func TestApprovalPromptShowsWhatWillHappen(t *testing.T) {
	t.Parallel()
	r := cli.NewRenderer(&bytes.Buffer{}, cli.RendererOptions{})
	ask := func(name, args string) string {
		return strings.Join(r.ApprovalPrompt(&penguinv1.ApprovalRequest{ToolCall: &penguinv1.ToolCall{Name: name, Arguments: args}}), "\n")
	}
	got := ask("edit_file", `{"file_path":"a.go","old_string":"x := 1\ny := 2","new_string":"x := 1\ny := 3"}`)
	for _, want := range []string{"? allow edit_file?", "--- a/a.go", "+++ b/a.go", "-y := 2", "+y := 3", " x := 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("edit prompt lacks %q:\n%s", want, got)
		}
	}
	got = ask("exec_command", `{"description":"List","cmd":"ls -la\npwd","workdir":"sub"}`)
	if !strings.Contains(got, "# List\n  $ ls -la\n  $ pwd\n  (in sub)") || strings.Contains(got, "{") {
		t.Errorf("exec prompt:\n%s", got)
	}
}

// TestUsageLineShowsCostAndContext: after a task, its tokens and cost and
// the session's, and how full the context is.
func TestUsageLineShowsCostAndContext(t *testing.T) {
	t.Parallel()
	cost := func(v float64) *float64 { return &v }
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{})
	r.SetContextWindow(128_000)
	r.Event(msgEvent(1, omni.TokenUsage(&penguinv1.TokenCounts{Total: 2000, Output: 100, CostUsd: cost(0.5)}, &penguinv1.TokenCounts{Total: 2000})))
	r.StartTask()
	r.Event(msgEvent(2, omni.TokenUsage(&penguinv1.TokenCounts{Total: 14_800, Output: 300, CacheRead: 9000, CostUsd: cost(0.5042)}, &penguinv1.TokenCounts{Total: 12_800})))
	r.Event(idle(3, penguinv1.StopReason_STOP_REASON_COMPLETED, ""))
	want := "tokens: 12.8k this task, 14.8k this session (300 output, 9k cache read) · cost: $0.0042 this task, $0.50 this session · context 12.8k of 128k (10%)\n"
	if got := out.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	r = cli.NewRenderer(&out, cli.RendererOptions{})
	r.Event(msgEvent(1, omni.TokenUsage(&penguinv1.TokenCounts{Unreported: true}, &penguinv1.TokenCounts{Unreported: true})))
	if got := r.UsageLine(); got != "tokens: not reported by the provider" {
		t.Errorf("unreported usage: %q", got)
	}
}

// TestActivityFollowsTheTask: the status line's activity through a call
// that needs approval: running, waiting for the approval, running again
// once allowed, then waiting for the model.
func TestActivityFollowsTheTask(t *testing.T) {
	t.Parallel()
	r := cli.NewRenderer(&bytes.Buffer{}, cli.RendererOptions{})
	state := func(s penguinv1.SessionState) *penguinv1.RunEvent {
		return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: s}}}
	}
	var got []string
	for _, ev := range []*penguinv1.RunEvent{
		msgEvent(1, omni.RequestBegin()),
		msgEvent(2, omni.ToolCall("c", "exec_command", `{"cmd":"sleep 2"}`)),
		{Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{ToolCall: &penguinv1.ToolCall{Name: "exec_command", ToolCallId: "c"}}}},
		state(penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL),
		nil, // the person allows the call
		state(penguinv1.SessionState_SESSION_STATE_RUNNING),
		msgEvent(3, omni.ToolCallOutput("c", "done", penguinv1.StopReason_STOP_REASON_COMPLETED)),
		msgEvent(4, omni.RequestBegin()),
	} {
		if ev == nil {
			r.Answered(true)
		} else {
			r.Event(ev)
		}
		got = append(got, r.Activity().What)
	}
	want := []string{"waiting for the model", "running exec_command", "waiting for your approval", "waiting for your approval",
		"running exec_command", "running exec_command", "running exec_command", "waiting for the model"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("activities\n%q\nwant\n%q", got, want)
	}
}

// TestCollapsedOutputIsNeverSilent: while a long command runs, the lines a
// collapsed view holds back are counted live, with the latest of them.
func TestCollapsedOutputIsNeverSilent(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{Collapse: true})
	r.Event(msgEvent(1, omni.ToolCall("c", "exec_command", `{"cmd":"make"}`)))
	r.Event(msgEvent(2, omni.PartialToolCallOutput(start, "c", "")))
	r.Event(msgEvent(3, omni.PartialToolCallOutput(delta, "c", numbered(7)+"line 8 is half")))
	if got := r.Pending(); got != "  │ … (+3 lines so far) line 7\n  │ line 8 is half" {
		t.Errorf("pending %q", got)
	}
	if strings.Contains(out.String(), "line 5") {
		t.Errorf("a held-back line was printed:\n%s", out.String())
	}
}

// TestRendererCleansUntrustedText: escape sequences and control characters
// in what the model and tools send never reach the terminal; the
// renderer's own styles do.
func TestRendererCleansUntrustedText(t *testing.T) {
	t.Parallel()
	const evil = "ok\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;pwned\x07 done\rhidden\b"
	got := render(cli.RendererOptions{Color: true, Markdown: true, Width: 80},
		omni.PartialThinking(start, ""), omni.PartialThinking(delta, "think "+evil+"\n"),
		omni.PartialText(start, ""), omni.PartialText(delta, "say "+evil+"\n\n"),
		omni.ToolCall("c", "exec_command", `{"cmd":"echo \u001b[2J"}`),
		omni.PartialToolCallOutput(start, "c", ""), omni.PartialToolCallOutput(delta, "c", evil+"\n"),
		omni.ToolCallOutput("c", evil+"\n", penguinv1.StopReason_STOP_REASON_COMPLETED),
		omni.RequestEnd(penguinv1.StopReason_STOP_REASON_TIMEOUT, evil, 1, 1000),
	)
	for _, bad := range []string{"\x1b]", "\x1b[2J", "\x07", "\r", "\b"} {
		if strings.Contains(got, bad) {
			t.Errorf("the output carries %q:\n%q", bad, got)
		}
	}
	if !strings.Contains(got, "ok done") || !strings.Contains(got, "\x1b[36m") {
		t.Errorf("the text or the renderer's own styles are gone:\n%q", got)
	}
}

// TestLineApproverWithNobodyToAnswer denies, and ends the question's line
// so the output goes on below it.
func TestLineApproverWithNobodyToAnswer(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := &cli.LineApprover{In: bufio.NewReader(strings.NewReader("")), Out: &out}
	d, err := a.Decide(context.Background(), &penguinv1.ApprovalRequest{}, []string{"? allow exec_command?", "  $ make"})
	if err != nil || d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("Decide = %v, %v", d, err)
	}
	if got := out.String(); got != "? allow exec_command?\n  $ make\nAllow? [Y/n] n (nobody to answer: denied)\n" {
		t.Errorf("output %q", got)
	}
}

// TestRendererKeepsPendingTextAcrossAResize: a terminal resized while an
// answer streams loses none of it.
func TestRendererKeepsPendingTextAcrossAResize(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{Markdown: true, Width: 80})
	r.Event(msgEvent(1, omni.PartialText(start, "")))
	r.Event(msgEvent(2, omni.PartialText(delta, "first half of a paragraph, ")))
	r.SetWidth(40)
	r.Event(msgEvent(3, omni.PartialText(delta, "second half.")))
	r.Event(msgEvent(4, omni.AssistantText("…")))
	if got := strings.Join(strings.Fields(out.String()), " "); !strings.Contains(got, "first half of a paragraph, second half.") {
		t.Errorf("after a resize the answer is %q", got)
	}
}

// TestRendererShowsMCPConnects: the wait for MCP servers is an activity,
// and its end names the servers that connected with their tool counts and
// each one that did not with its error, escape sequences removed.
func TestRendererShowsMCPConnects(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	r := cli.NewRenderer(&out, cli.RendererOptions{})
	r.StartTask()
	r.Event(msgEvent(1, omni.McpConnectBegin([]string{"docs", "files"})))
	if got := r.Activity().What; got != "connecting to MCP servers" {
		t.Errorf("activity while connecting: %q", got)
	}
	r.Event(msgEvent(2, omni.McpConnectEnd(&penguinv1.McpConnectEnd{
		Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
		Results: []*penguinv1.McpServerConnectResult{
			{Server: "docs", Transport: "stdio", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, DurationMs: 30, Tools: 3},
			{Server: "files", Transport: "stdio", Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED, DurationMs: 2, Error: "connecting: exec: \x1b[31mfiles-mcp\x1b[0m: not found"},
		},
	})))
	if got := r.Activity().What; got != "waiting for the model" {
		t.Errorf("activity after connecting: %q", got)
	}
	want := "… connecting to MCP servers: docs, files\n" +
		"… MCP servers connected: docs (3 tools)\n" +
		"  ✗ MCP server files is unavailable: connecting: exec: files-mcp: not found\n"
	if out.String() != want {
		t.Errorf("printed\n%q\nwant\n%q", out.String(), want)
	}
	aborted := render(cli.RendererOptions{}, omni.McpConnectEnd(&penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED}))
	if aborted != "… connecting to MCP servers was aborted\n" {
		t.Errorf("aborted connect printed %q", aborted)
	}
}
