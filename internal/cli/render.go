// Package cli is the terminal face of Penguin. Its Renderer turns a
// session's run events into text for people (thinking under a label, the
// answer as rendered markdown, each tool call with what it acts on, tool
// output collapsed with a marker, diffs coloured, retries as one countdown,
// usage with cost and context after each task) or into JSON lines for
// programs; RunTask drives one task for `penguin run`, and Chat is the
// interactive terminal of `penguin chat`. Everything goes through an
// EngineServiceClient, so the same code serves an embedded engine and a
// remote one.
//
// The chat is built on Bubble Tea (line editing, bracketed paste, the live
// area above the prompt) and markdown is laid out by termmd (see there why
// not by a complete terminal renderer); the small pickers of /model and
// /resume are written here because Bubbles' list is made for full-screen
// programs, not a few lines under the conversation.
package cli

import (
	"fmt"
	"github.com/penguin-agent/penguin/internal/termtext"
	"io"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/transcript"
	"google.golang.org/protobuf/encoding/protojson"
)

// ANSI styles, used only when colour is on.
const (
	styleDim    = "\x1b[2m"
	styleItalic = "\x1b[3m"
	styleBold   = "\x1b[1m"
	styleRed    = "\x1b[31m"
	styleGreen  = "\x1b[32m"
	styleYellow = "\x1b[33m"
	styleCyan   = "\x1b[36m"
	styleReset  = "\x1b[0m"
)

// thinkingMark starts every line of thinking, so it stays apart from the
// answer without colour too.
const thinkingMark = "  ┊ "

// outputMark starts every line of tool output.
const outputMark = "  │ "

// RendererOptions configure a Renderer.
type RendererOptions struct {
	// Color enables ANSI styles.
	Color bool
	// JSON prints every event as one JSON line instead of text, messages in
	// the trace format (internal/transcript).
	JSON bool
	// Collapse shortens long tool outputs to their head and tail, for chat.
	Collapse bool
	// Markdown renders the model's text as markdown for a terminal Width
	// columns wide (zero: 80); otherwise it is streamed as it comes.
	Markdown bool
	Width    int
	// Countdown leaves retry waits to the caller's status line (see
	// Activity) instead of printing a line per retry.
	Countdown bool
}

// Renderer writes run events to a terminal or a pipe. It is not safe for
// concurrent use: one goroutine feeds it the events of one stream.
type Renderer struct {
	out  io.Writer
	opts RendererOptions
	md   *markdown

	// open is the streamed segment being printed ("thinking" or "text"
	// plus the subagent prefix), so the next one starts on a new line.
	open string
	// lineOpen is set while a raw text segment has written a partial line.
	lineOpen bool
	// thinkingLine holds thinking not yet ended by a newline.
	thinkingLine strings.Builder
	// streamed marks segments whose partials were printed, so the complete
	// message is not printed again.
	streamed map[string]bool

	tools map[string]*toolState

	usage     *penguinv1.TokenUsage
	taskStart *penguinv1.TokenCounts
	window    int64
	lastState *penguinv1.RunStateChange
	activity  Activity
	// toolActivity is the activity of the last tool call, which runs once
	// its approval is given.
	toolActivity string
	// failure is the last failed request's message, said once when the
	// task ends.
	failure string
	// streamedChars counts the characters the model streamed since the
	// last usage report, for the live token estimate.
	streamedChars int
}

// toolState is what the renderer knows of one tool call.
type toolState struct {
	name    string
	printed int // output lines printed live
	// held counts the lines a collapsed view holds back while the tool
	// runs, and last is the latest of them, shown live so a long command
	// is never silent.
	held    int
	last    string
	partial strings.Builder
	denied  penguinv1.Decision
}

// Activity is what the task is doing now, for a status line.
type Activity struct {
	// What is a few words: "thinking", "writing", "running exec_command",
	// "waiting for your approval", "compacting the context", "retrying".
	What string
	// RetryAt is when the next attempt starts, during a retry wait.
	RetryAt time.Time
	// Attempt is the ordinal of the next attempt.
	Attempt int32
	// Failure is why the last attempt failed.
	Failure string
	// Tokens counts the task's tokens so far: reported ones plus an
	// estimate of what is streaming.
	Tokens int64
}

// NewRenderer returns a Renderer writing to out.
func NewRenderer(out io.Writer, opts RendererOptions) *Renderer {
	r := &Renderer{out: out, opts: opts, streamed: map[string]bool{}, tools: map[string]*toolState{}}
	if opts.Markdown && !opts.JSON {
		r.md = newMarkdown(opts.Color, opts.Width)
	}
	return r
}

// SetContextWindow sets the model's context window, for the usage line.
func (r *Renderer) SetContextWindow(n int64) { r.window = n }

// SetWidth renders markdown for a terminal width columns wide from now
// on; the answer streaming now keeps its pending text.
func (r *Renderer) SetWidth(width int) {
	r.opts.Width = width
	if r.md != nil {
		r.md.setWidth(r.opts.Color, width)
	}
}

// SetCollapse turns collapsing of long tool outputs on or off.
func (r *Renderer) SetCollapse(on bool) { r.opts.Collapse = on }

// Usage returns the last token usage seen, or nil.
func (r *Renderer) Usage() *penguinv1.TokenUsage { return r.usage }

// LastState returns the last run state change seen, or nil.
func (r *Renderer) LastState() *penguinv1.RunStateChange { return r.lastState }

// Activity returns what the task is doing now.
func (r *Renderer) Activity() Activity {
	a := r.activity
	a.Tokens = r.taskTokens() + int64(r.streamedChars/4)
	return a
}

// Pending returns the text that is streaming and not printed yet: the end
// of the answer (a markdown block still open), a thinking line, a tool's
// unfinished output line.
func (r *Renderer) Pending() string {
	var parts []string
	if r.md != nil && r.md.pending() != "" {
		parts = append(parts, strings.TrimRight(r.md.pending(), "\n"))
	}
	if r.thinkingLine.Len() > 0 {
		parts = append(parts, r.style(styleDim+styleItalic, thinkingMark+r.thinkingLine.String()))
	}
	for _, t := range r.tools {
		if t.held > 0 {
			parts = append(parts, r.style(styleDim, fmt.Sprintf("%s… (+%d lines so far) %s", outputMark, t.held, t.last)))
		}
		if t.partial.Len() > 0 {
			parts = append(parts, r.style(styleDim, outputMark+t.partial.String()))
		}
	}
	return strings.Join(parts, "\n")
}

// StartTask marks the start of a task: its usage line counts from here.
func (r *Renderer) StartTask() {
	r.taskStart = r.usage.GetSession()
	r.failure = ""
	r.activity = Activity{What: "waiting for the model"}
}

func (r *Renderer) style(s, text string) string {
	if !r.opts.Color || text == "" {
		return text
	}
	return s + text + styleReset
}

func (r *Renderer) println(text string) { fmt.Fprintln(r.out, text) }

// closeSegment ends a streamed segment before other output.
func (r *Renderer) closeSegment() {
	if r.thinkingLine.Len() > 0 {
		r.println(r.style(styleDim+styleItalic, r.open2prefix()+thinkingMark+r.thinkingLine.String()))
		r.thinkingLine.Reset()
	}
	if r.md != nil {
		if out := r.md.flush(); out != "" {
			r.println(out)
		}
	}
	if r.lineOpen {
		fmt.Fprintln(r.out)
		r.lineOpen = false
	}
	r.open = ""
}

// open2prefix is the subagent prefix of the open segment.
func (r *Renderer) open2prefix() string {
	_, p, _ := strings.Cut(r.open, "|")
	return p
}

// prefix marks messages forwarded from a subagent with the last hop of
// their origin chain.
func prefix(origin []string) string {
	if len(origin) == 0 {
		return ""
	}
	id := origin[len(origin)-1]
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	return "[subagent " + id + "] "
}

// Event renders one run event.
func (r *Renderer) Event(ev *penguinv1.RunEvent) {
	if r.opts.JSON {
		r.eventJSON(ev)
		return
	}
	switch e := ev.GetEvent().(type) {
	case *penguinv1.RunEvent_Message:
		r.message(e.Message)
	case *penguinv1.RunEvent_ApprovalRequest:
		r.closeSegment()
		r.activity.What = "waiting for your approval"
	case *penguinv1.RunEvent_State:
		r.lastState = e.State
		r.state(e.State)
	}
}

// Answered records the answer to the approval asked last: an allowed call
// runs now, a denied one hands back to the model. The engine need not
// stream a state change for it.
func (r *Renderer) Answered(allowed bool) {
	if allowed {
		r.activity.What = r.toolActivity
	} else {
		r.activity.What = "waiting for the model"
	}
}

// ApprovalPrompt returns the lines that ask about req: what the call will
// do, then the question.
func (r *Renderer) ApprovalPrompt(req *penguinv1.ApprovalRequest) []string {
	call := req.GetToolCall()
	lines := []string{r.style(styleBold+styleYellow, prefix(req.GetOrigin())+"? allow "+termtext.Clean(call.GetName())+"?")}
	for _, l := range approvalPreview(call.GetName(), call.GetArguments()) {
		l = termtext.Clean(l)
		if s := diffStyle(l); s != "" && diffTools[call.GetName()] {
			l = r.style(s, l)
		}
		lines = append(lines, "  "+l)
	}
	return lines
}

func (r *Renderer) eventJSON(ev *penguinv1.RunEvent) {
	var line []byte
	var err error
	if m := ev.GetMessage(); m != nil {
		line, err = transcript.Marshal(m)
	} else {
		line, err = protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
	}
	if s := ev.GetState(); s != nil {
		r.lastState = s
	}
	if err != nil {
		fmt.Fprintf(r.out, `{"error":%q}`+"\n", err.Error())
		return
	}
	fmt.Fprintf(r.out, "%s\n", line)
}

func (r *Renderer) state(s *penguinv1.RunStateChange) {
	switch s.GetState() {
	case penguinv1.SessionState_SESSION_STATE_RUNNING:
		switch r.activity.What {
		case "retrying":
			r.activity = Activity{What: "waiting for the model"}
		case "waiting for your approval":
			// The approved call runs now.
			r.activity.What = r.toolActivity
		}
	case penguinv1.SessionState_SESSION_STATE_RETRY_WAIT:
		// The countdown's details came with the failed request's end.
	case penguinv1.SessionState_SESSION_STATE_COMPACTING:
		r.closeSegment()
		r.activity.What = "compacting the context"
		r.println(r.style(styleDim, "… compacting the context"))
	case penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER:
		r.closeSegment()
		r.activity.What = "waiting for another engine replica to take the run over"
		r.println(r.style(styleDim, "… the engine replica stopped; the run goes on on another replica"))
	case penguinv1.SessionState_SESSION_STATE_IDLE:
		r.closeSegment()
		r.activity = Activity{}
		switch st := s.GetStatus(); st {
		case penguinv1.StopReason_STOP_REASON_COMPLETED, penguinv1.StopReason_STOP_REASON_UNSPECIFIED:
		case penguinv1.StopReason_STOP_REASON_ABORTED:
			// The abort event said it.
		default:
			r.failed(st, s.GetMessage())
		}
		if line := r.UsageLine(); line != "" {
			r.println(r.style(styleDim, line))
		}
	}
}

// failed says once why the task failed, and what to do about it.
func (r *Renderer) failed(st penguinv1.StopReason, msg string) {
	if msg == "" {
		msg = r.failure
	}
	if msg == "" {
		msg = "the task did not complete"
	}
	r.println(r.style(styleRed, "✗ "+sentence(enumword.Word(st)+": "+termtext.Clean(msg))))
	if fix := failureFix(st, msg); fix != "" {
		r.println(r.style(styleYellow, "  "+fix))
	}
}

// failureFix is the advice for a failure that another attempt cannot cure.
func failureFix(st penguinv1.StopReason, msg string) string {
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "no model provider is configured"):
		// The message says how to add one.
		return ""
	case st == penguinv1.StopReason_STOP_REASON_AUTH || strings.Contains(lower, "missing credential") || strings.Contains(lower, "api key"):
		return "Check the API key: the variable named by the provider's api_key_env (or the key file) must hold a valid key."
	case strings.Contains(lower, "provider route") && strings.Contains(lower, "not registered"),
		strings.Contains(lower, "unknown provider"):
		return "Pick a configured provider: --provider must name a route of the providers file (or openai / anthropic with their key set)."
	case strings.Contains(lower, "404") || strings.Contains(lower, "model_not_found") || strings.Contains(lower, "does not exist") || strings.Contains(lower, "unknown model"):
		return "Check the model id: the provider does not know it. In chat, /model lists the known models."
	case strings.Contains(lower, "400") || strings.Contains(lower, "invalid_request") || strings.Contains(lower, "unsupported"):
		return "The provider refused the request as invalid, and would refuse it again: check the model and its settings (--thinking) in the message above."
	}
	return ""
}

// sentence capitalises s and ends it with a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return s
}

func (r *Renderer) message(m *penguinv1.OmniMessage) {
	p := prefix(m.GetOrigin())
	switch x := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialThinking:
		r.thinking(p, x.PartialThinking.GetEventType(), x.PartialThinking.GetThinking())
	case *penguinv1.OmniMessage_PartialText:
		r.text(p, x.PartialText.GetEventType(), x.PartialText.GetText())
	case *penguinv1.OmniMessage_Thinking:
		r.complete("thinking|"+p, x.Thinking.GetThinking(), func(t string) {
			r.thinking(p, penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, "")
			r.thinking(p, penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, t)
		})
	case *penguinv1.OmniMessage_Text:
		if x.Text.GetRole() == penguinv1.Role_ROLE_USER {
			r.closeSegment()
			if x.Text.GetSender() == penguinv1.Sender_SENDER_HARNESS {
				if line := UserLine(x.Text.GetText()); line != "" {
					r.println(p + r.style(styleDim, line))
				}
			}
			return
		}
		r.complete("text|"+p, x.Text.GetText(), func(t string) {
			r.text(p, penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, "")
			r.text(p, penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, t)
		})
	case *penguinv1.OmniMessage_PartialToolCall:
		// Arguments are shown once, complete, with the call.
	case *penguinv1.OmniMessage_ToolCall:
		r.closeSegment()
		call := x.ToolCall
		r.tools[call.GetToolCallId()] = &toolState{name: call.GetName()}
		r.toolActivity = "running " + call.GetName()
		r.activity.What = r.toolActivity
		r.println(p + r.style(styleCyan, "⏺ "+termtext.Clean(callTitle(call.GetName(), call.GetArguments()))))
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		r.toolDelta(p, x.PartialToolCallOutput)
	case *penguinv1.OmniMessage_ToolCallOutput:
		r.toolOutput(p, x.ToolCallOutput)
	case *penguinv1.OmniMessage_ApprovalDecision:
		r.closeSegment()
		d := x.ApprovalDecision
		r.tool(d.GetToolCallId()).denied = d.GetDecision()
		switch d.GetDecision() {
		case penguinv1.Decision_DECISION_DENY:
			r.println(p + r.style(styleRed, "  ✗ denied"))
		case penguinv1.Decision_DECISION_FORBIDDEN:
			r.println(p + r.style(styleRed, "  ⛔ forbidden by the command policy"))
		}
	case *penguinv1.OmniMessage_RequestBegin:
		// A new attempt: any retry wait is over.
		if p == "" {
			r.activity = Activity{What: "waiting for the model"}
		}
	case *penguinv1.OmniMessage_RequestEnd:
		r.requestEnd(p, x.RequestEnd)
	case *penguinv1.OmniMessage_TokenUsage:
		if p == "" {
			r.usage = x.TokenUsage
			r.streamedChars = 0
		}
	case *penguinv1.OmniMessage_Abort:
		r.closeSegment()
		msg := "⏹ Aborted."
		if reason := x.Abort.GetReason(); reason != "" {
			msg = "⏹ Aborted: " + sentence(termtext.Clean(reason))
		}
		r.println(p + r.style(styleRed, msg))
	case *penguinv1.OmniMessage_CompactionEnd:
		r.closeSegment()
		r.println(p + r.style(styleDim, "… compaction "+enumword.Word(x.CompactionEnd.GetStatus())))
	case *penguinv1.OmniMessage_McpConnectBegin:
		r.closeSegment()
		if p == "" {
			r.activity.What = "connecting to MCP servers"
		}
		r.println(p + r.style(styleDim, "… connecting to MCP servers: "+termtext.Clean(strings.Join(x.McpConnectBegin.GetServers(), ", "))))
	case *penguinv1.OmniMessage_McpConnectEnd:
		r.closeSegment()
		if p == "" && r.activity.What == "connecting to MCP servers" {
			r.activity.What = "waiting for the model"
		}
		r.mcpConnectEnd(p, x.McpConnectEnd)
	case *penguinv1.OmniMessage_Subagent:
		r.closeSegment()
		r.println(r.style(styleDim, "↳ subagent "+x.Subagent.GetSessionId()))
	case *penguinv1.OmniMessage_GoalRound:
		r.closeSegment()
		r.println(p + r.style(styleBold, GoalRoundLine(x.GoalRound)))
	case *penguinv1.OmniMessage_GoalFinished:
		r.closeSegment()
		g := x.GoalFinished
		color := styleRed
		if g.GetOutcome() == penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE {
			color = styleGreen
		}
		r.println(p + r.style(color, fmt.Sprintf("◎ Goal %s after %d round(s), %d tokens: %s", strings.ReplaceAll(enumword.Word(g.GetOutcome()), "_", " "),
			g.GetRounds(), g.GetTokens(), sentence(termtext.Clean(g.GetMessage())))))
	case *penguinv1.OmniMessage_WorkspaceChange:
		r.closeSegment()
		r.println(p + r.style(styleDim, termtext.Clean(WorkspaceChangeLine(x.WorkspaceChange))))
	}
}

// WorkspaceChangeLine is the one line a workspace change shows as: what
// made it and the files, with where to see or undo it.
func WorkspaceChangeLine(c *penguinv1.WorkspaceChange) string {
	var files []string
	for _, f := range c.GetFiles() {
		files = append(files, changeKind(f.GetKind())+" "+f.GetPath())
	}
	list := strings.Join(files, ", ")
	if len(files) > 6 {
		list = strings.Join(files[:6], ", ") + fmt.Sprintf(", and %d more", len(files)-6)
	}
	switch c.GetKind() {
	case penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO:
		return fmt.Sprintf("↶ undid change #%d: %s", c.GetTurnSequence(), list)
	case penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_REDO:
		return fmt.Sprintf("↷ redid change #%d: %s", c.GetTurnSequence(), list)
	}
	hint := " (/diff shows it, /undo restores the files)"
	if c.GetIncomplete() != "" {
		hint = " (too large to undo)"
	}
	return fmt.Sprintf("✎ %d file(s) changed: %s%s", len(files), list, hint)
}

// GoalRoundLine is the one line a goal round shows as: "Goal · round N",
// with the budget when there is one.
func GoalRoundLine(g *penguinv1.GoalRound) string {
	line := fmt.Sprintf("◎ Goal · round %d", g.GetRound())
	switch {
	case g.GetWrapUp():
		line += fmt.Sprintf(" (wrap-up: %d of %d tokens used)", g.GetUsed(), g.GetBudget())
	case g.GetBudget() > 0:
		line += fmt.Sprintf(" (%d of %d tokens used)", g.GetUsed(), g.GetBudget())
	}
	return line
}

// mcpConnectEnd says which MCP servers connected, with their tool counts,
// and why each of the others did not; the run goes on without those.
func (r *Renderer) mcpConnectEnd(p string, end *penguinv1.McpConnectEnd) {
	if end.GetStatus() == penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED {
		r.println(p + r.style(styleDim, "… connecting to MCP servers was aborted"))
		return
	}
	var connected []string
	for _, res := range end.GetResults() {
		if res.GetStatus() == penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED {
			connected = append(connected, fmt.Sprintf("%s (%d tools)", termtext.Clean(res.GetServer()), res.GetTools()))
		}
	}
	if len(connected) > 0 {
		r.println(p + r.style(styleDim, "… MCP servers connected: "+strings.Join(connected, ", ")))
	}
	for _, res := range end.GetResults() {
		if res.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED {
			r.println(p + r.style(styleRed, "  ✗ MCP server "+termtext.Clean(res.GetServer())+" is unavailable: "+termtext.Clean(res.GetError())))
		}
	}
}

func (r *Renderer) tool(id string) *toolState {
	t := r.tools[id]
	if t == nil {
		t = &toolState{}
		r.tools[id] = t
	}
	return t
}

// segment makes the streamed segment kind (of the subagent prefix p) the
// open one, closing another, and counts text as streamed. ok is false when
// there is nothing to show (a stop, an empty delta); opened reports that
// the segment has just begun.
func (r *Renderer) segment(kind, activity, p string, phase penguinv1.StreamEventType, text string) (ok, opened bool) {
	if phase == penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP || text == "" && phase != penguinv1.StreamEventType_STREAM_EVENT_TYPE_START {
		return false, false
	}
	if key := kind + "|" + p; r.open != key {
		r.closeSegment()
		r.open = key
		r.streamed[key] = true
		opened = true
	}
	if p == "" {
		r.activity.What = activity
	}
	r.streamedChars += len(text)
	return true, opened
}

// thinking streams thinking line by line under its label.
func (r *Renderer) thinking(p string, phase penguinv1.StreamEventType, text string) {
	ok, opened := r.segment("thinking", "thinking", p, phase, text)
	if !ok {
		return
	}
	if opened {
		r.println(p + r.style(styleDim+styleItalic, "✻ thinking"))
	}
	r.thinkingLine.WriteString(termtext.Clean(text))
	s := r.thinkingLine.String()
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return
	}
	for _, l := range strings.Split(s[:i], "\n") {
		r.println(p + r.style(styleDim+styleItalic, thinkingMark+l))
	}
	r.thinkingLine.Reset()
	r.thinkingLine.WriteString(s[i+1:])
}

// text streams the answer: as markdown blocks when rendering markdown,
// else as it comes.
func (r *Renderer) text(p string, phase penguinv1.StreamEventType, text string) {
	if ok, _ := r.segment("text", "writing", p, phase, text); !ok {
		return
	}
	text = termtext.Clean(text)
	if r.md != nil && p == "" {
		if out := r.md.add(text); out != "" {
			r.println(out)
		}
		return
	}
	if !r.lineOpen {
		fmt.Fprint(r.out, p)
		r.lineOpen = true
	}
	fmt.Fprint(r.out, strings.ReplaceAll(text, "\n", "\n"+p))
}

// complete prints a complete thinking or text message unless its partials
// already did.
func (r *Renderer) complete(key, text string, show func(string)) {
	if r.streamed[key] {
		delete(r.streamed, key)
		if r.open == key {
			r.closeSegment()
		}
		return
	}
	if text != "" {
		show(text)
		delete(r.streamed, key)
		r.closeSegment()
	}
}

func (r *Renderer) toolDelta(p string, d *penguinv1.PartialToolCallOutput) {
	t := r.tool(d.GetToolCallId())
	switch d.GetEventType() {
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
		r.closeSegment()
		if p == "" && t.name != "" {
			r.activity.What = "running " + t.name
		}
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
		t.partial.WriteString(termtext.Clean(d.GetOutput()))
		s := t.partial.String()
		i := strings.LastIndexByte(s, '\n')
		if i < 0 {
			return
		}
		limit := liveLimit(diffTools[t.name])
		for _, l := range strings.Split(s[:i], "\n") {
			if r.opts.Collapse && t.printed >= limit {
				t.held, t.last = t.held+1, l
				continue
			}
			r.outputLine(p, t.name, l)
			t.printed++
		}
		t.partial.Reset()
		t.partial.WriteString(s[i+1:])
	}
}

// outputLine prints one line of a tool's output, a diff's lines coloured.
func (r *Renderer) outputLine(p, tool, line string) {
	style := styleDim
	if diffTools[tool] {
		if s := diffStyle(line); s != "" {
			style = s
		}
	}
	r.println(p + r.style(styleDim, outputMark) + r.style(style, line))
}

func (r *Renderer) toolOutput(p string, o *penguinv1.ToolCallOutput) {
	r.closeSegment()
	id := o.GetToolCallId()
	t := r.tool(id)
	delete(r.tools, id)
	lines := strings.Split(strings.TrimRight(termtext.Clean(o.GetOutput()), "\n"), "\n")
	shown, elided, marker := outputView(lines, t.printed, r.opts.Collapse, diffTools[t.name])
	for i, l := range shown {
		if i == marker {
			r.println(p + r.style(styleDim, fmt.Sprintf("%s… (+%d lines, /verbose for full output)", outputMark, elided)))
			continue
		}
		r.outputLine(p, t.name, l)
	}
	if n := len(o.GetImages()); n > 0 {
		r.println(p + r.style(styleDim, fmt.Sprintf("  └ %d image(s)", n)))
	}
	s := o.GetStopReason()
	switch {
	case s == penguinv1.StopReason_STOP_REASON_UNSPECIFIED || s == penguinv1.StopReason_STOP_REASON_COMPLETED:
	case t.denied != penguinv1.Decision_DECISION_UNSPECIFIED && t.denied != penguinv1.Decision_DECISION_ALLOW:
		// A refused call never ran: "✗ denied" already said so.
	default:
		r.println(p + r.style(styleRed, "  └ "+enumword.Word(s)))
	}
}

// requestEnd follows a model request's end. A failure the engine retries
// becomes the countdown of the status line (or one line, without one); a
// final failure is kept to be said once when the task ends. A completed
// request is silent unless it carries a note (such as that the output
// stopped at the token limit), printed dim so a cut answer does not pass
// for a finished one.
func (r *Renderer) requestEnd(p string, e *penguinv1.RequestEnd) {
	if e.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
		if note := e.GetErrorMessage(); note != "" {
			r.closeSegment()
			r.println(p + r.style(styleDim, "note: "+strings.Join(strings.Fields(termtext.Clean(note)), " ")))
		}
		return
	}
	if e.GetStatus() == penguinv1.StopReason_STOP_REASON_ABORTED {
		return
	}
	r.closeSegment()
	what := enumword.Word(e.GetStatus())
	if msg := termtext.Clean(e.GetErrorMessage()); msg != "" {
		what += ": " + msg
	}
	if e.GetRetryInMs() <= 0 {
		if p == "" {
			r.failure = e.GetErrorMessage()
			return
		}
		r.println(p + r.style(styleRed, "✗ request failed ("+what+")"))
		return
	}
	wait := time.Duration(e.GetRetryInMs()) * time.Millisecond
	if p == "" {
		r.activity = Activity{What: "retrying", RetryAt: time.Now().Add(wait), Attempt: e.GetAttempt() + 1, Failure: what}
		if r.opts.Countdown {
			return
		}
	}
	r.println(p + r.style(styleYellow, fmt.Sprintf("⟳ request failed (%s); retrying in %s (attempt %d)", what, wait.Round(100*time.Millisecond), e.GetAttempt()+1)))
}

// taskTokens is the number of tokens the task has used so far.
func (r *Renderer) taskTokens() int64 {
	return r.usage.GetSession().GetTotal() - r.taskStart.GetTotal()
}

// UsageLine sums up the task's usage: its tokens, the session's, the cost
// when the model's prices are known, and how full the context is.
func (r *Renderer) UsageLine() string {
	u := r.usage
	s := u.GetSession()
	if s.GetTotal() == 0 {
		if s.GetUnreported() {
			return "tokens: not reported by the provider"
		}
		// Nothing used yet: no line of zeros.
		return ""
	}
	parts := []string{fmt.Sprintf("tokens: %s this task, %s this session (%s output, %s cache read)",
		count(r.taskTokens()), count(s.GetTotal()), count(s.GetOutput()), count(s.GetCacheRead()))}
	if s.CostUsd != nil {
		parts = append(parts, fmt.Sprintf("cost: %s this task, %s this session", money(s.GetCostUsd()-r.taskStart.GetCostUsd()), money(s.GetCostUsd())))
	}
	if ctx := u.GetRequest().GetTotal(); ctx > 0 {
		if r.window > 0 {
			parts = append(parts, fmt.Sprintf("context %s of %s (%d%%)", count(ctx), count(r.window), ctx*100/r.window))
		} else {
			parts = append(parts, "context "+count(ctx))
		}
	}
	if s.GetUnreported() {
		parts = append(parts, "some requests' usage was not reported")
	}
	return strings.Join(parts, " · ")
}

// money writes a cost in US dollars, with cents for sums and four places
// for the fractions of a cent one turn often costs.
func money(v float64) string {
	if v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// FormatUsage renders a token_usage event as one line.
func FormatUsage(u *penguinv1.TokenUsage) string {
	s := u.GetSession()
	return fmt.Sprintf("tokens: %d total (%d output, %d cache read, %d cache write) this session",
		s.GetTotal(), s.GetOutput(), s.GetCacheRead(), s.GetCacheWrite())
}

// count writes a token count short: 950, 12.3k, 1.2M.
func count(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1000), ".0") + "k"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1_000_000), ".0") + "M"
}
