// Package cli is the terminal face of Penguin: it renders a session's run
// events for people (thinking dimmed, text, tool calls with their arguments,
// tool output, retries with their countdown, token usage) or as JSON lines
// for programs, and drives tasks, approvals and chats over an
// EngineServiceClient, so the same code serves an embedded engine and a
// remote one.
package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"google.golang.org/protobuf/encoding/protojson"
)

// ANSI styles, used only when the output is a terminal.
const (
	styleDim   = "\x1b[2m"
	styleBold  = "\x1b[1m"
	styleRed   = "\x1b[31m"
	styleGreen = "\x1b[32m"
	styleCyan  = "\x1b[36m"
	styleReset = "\x1b[0m"
)

// EncodeFunc renders one OmniMessage as a single JSON line for --json.
type EncodeFunc func(*penguinv1.OmniMessage) ([]byte, error)

// Renderer writes run events to a terminal or a pipe. It is not safe for
// concurrent use: one goroutine feeds it the events of one stream.
type Renderer struct {
	out io.Writer
	// color enables ANSI styles.
	color bool
	// jsonLines prints every event as one JSON line instead of prose.
	jsonLines bool
	encode    EncodeFunc
	// collapse shortens long tool outputs to their head and tail, for chat.
	collapse bool

	// open is the kind of streamed segment being printed, so a newline is
	// written when another begins.
	open      string
	outLines  map[string]int
	usage     *penguinv1.TokenUsage
	streamed  map[string]bool
	lastState *penguinv1.RunStateChange
}

// RendererOptions configure a Renderer.
type RendererOptions struct {
	Color    bool
	JSON     bool
	Encode   EncodeFunc
	Collapse bool
}

// NewRenderer returns a Renderer writing to out.
func NewRenderer(out io.Writer, opts RendererOptions) *Renderer {
	if opts.Encode == nil {
		mo := protojson.MarshalOptions{UseProtoNames: true}
		opts.Encode = func(m *penguinv1.OmniMessage) ([]byte, error) { return mo.Marshal(m) }
	}
	return &Renderer{
		out: out, color: opts.Color, jsonLines: opts.JSON, encode: opts.Encode, collapse: opts.Collapse,
		outLines: map[string]int{}, streamed: map[string]bool{},
	}
}

func (r *Renderer) style(s, text string) string {
	if !r.color || text == "" {
		return text
	}
	return s + text + styleReset
}

// closeSegment ends the line of a streamed segment before other output.
func (r *Renderer) closeSegment() {
	if r.open != "" {
		fmt.Fprintln(r.out)
		r.open = ""
	}
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

// Usage returns the last token usage seen, or nil.
func (r *Renderer) Usage() *penguinv1.TokenUsage { return r.usage }

// LastState returns the last run state change seen, or nil.
func (r *Renderer) LastState() *penguinv1.RunStateChange { return r.lastState }

// Event renders one run event.
func (r *Renderer) Event(ev *penguinv1.RunEvent) {
	if r.jsonLines {
		r.eventJSON(ev)
		return
	}
	switch e := ev.GetEvent().(type) {
	case *penguinv1.RunEvent_Message:
		r.message(e.Message)
	case *penguinv1.RunEvent_ApprovalRequest:
		r.closeSegment()
		call := e.ApprovalRequest.GetToolCall()
		fmt.Fprintf(r.out, "%s%s %s %s\n", prefix(e.ApprovalRequest.GetOrigin()), r.style(styleBold, "? approval needed:"), call.GetName(), call.GetArguments())
	case *penguinv1.RunEvent_State:
		r.lastState = e.State
		r.state(e.State)
	}
}

func (r *Renderer) eventJSON(ev *penguinv1.RunEvent) {
	var line []byte
	var err error
	if m := ev.GetMessage(); m != nil {
		line, err = r.encode(m)
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
	case penguinv1.SessionState_SESSION_STATE_RETRY_WAIT:
		// The countdown itself is printed from request_end, which carries
		// the failure; this state only confirms the wait.
	case penguinv1.SessionState_SESSION_STATE_COMPACTING:
		r.closeSegment()
		fmt.Fprintln(r.out, r.style(styleDim, "… compacting the context"))
	case penguinv1.SessionState_SESSION_STATE_IDLE:
		r.closeSegment()
		if s.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED && s.GetStatus() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
			msg := s.GetMessage()
			if msg == "" {
				msg = "the task did not complete"
			}
			fmt.Fprintf(r.out, "%s %s\n", r.style(styleRed, "✗ "+enumword.Word(s.GetStatus())+":"), msg)
		}
		if u := r.usage; u != nil {
			fmt.Fprintln(r.out, r.style(styleDim, FormatUsage(u)))
		}
	}
}

// FormatUsage renders a token_usage event as one line.
func FormatUsage(u *penguinv1.TokenUsage) string {
	s := u.GetSession()
	return fmt.Sprintf("tokens: %d total (%d output, %d cache read, %d cache write) this session",
		s.GetTotal(), s.GetOutput(), s.GetCacheRead(), s.GetCacheWrite())
}

func (r *Renderer) message(m *penguinv1.OmniMessage) {
	p := prefix(m.GetOrigin())
	switch x := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialThinking:
		r.partial("thinking"+p, p, x.PartialThinking.GetEventType(), x.PartialThinking.GetThinking(), styleDim)
	case *penguinv1.OmniMessage_PartialText:
		r.partial("text"+p, p, x.PartialText.GetEventType(), x.PartialText.GetText(), "")
	case *penguinv1.OmniMessage_Thinking:
		r.complete("thinking"+p, p, x.Thinking.GetThinking(), styleDim)
	case *penguinv1.OmniMessage_Text:
		if x.Text.GetRole() == penguinv1.Role_ROLE_USER {
			r.closeSegment()
			if x.Text.GetSender() == penguinv1.Sender_SENDER_HARNESS {
				fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleDim, "» "+firstLine(x.Text.GetText())))
			}
			return
		}
		r.complete("text"+p, p, x.Text.GetText(), "")
	case *penguinv1.OmniMessage_PartialToolCall:
		// Arguments are shown once, complete, with the call.
	case *penguinv1.OmniMessage_ToolCall:
		r.closeSegment()
		fmt.Fprintf(r.out, "%s%s %s\n", p, r.style(styleCyan, "⏺ "+x.ToolCall.GetName()), x.ToolCall.GetArguments())
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		r.toolDelta(p, x.PartialToolCallOutput)
	case *penguinv1.OmniMessage_ToolCallOutput:
		r.toolOutput(p, x.ToolCallOutput)
	case *penguinv1.OmniMessage_ApprovalDecision:
		r.closeSegment()
		switch x.ApprovalDecision.GetDecision() {
		case penguinv1.Decision_DECISION_DENY:
			fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleRed, "  ✗ denied"))
		case penguinv1.Decision_DECISION_FORBIDDEN:
			fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleRed, "  ⛔ forbidden by the command policy"))
		}
	case *penguinv1.OmniMessage_RequestEnd:
		r.requestEnd(p, x.RequestEnd)
	case *penguinv1.OmniMessage_TokenUsage:
		if p == "" {
			r.usage = x.TokenUsage
		}
	case *penguinv1.OmniMessage_Abort:
		r.closeSegment()
		fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleRed, "⏹ aborted"))
	case *penguinv1.OmniMessage_CompactionEnd:
		r.closeSegment()
		fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleDim, "… compaction "+enumword.Word(x.CompactionEnd.GetStatus())))
	case *penguinv1.OmniMessage_Subagent:
		r.closeSegment()
		fmt.Fprintf(r.out, "%s\n", r.style(styleDim, "↳ subagent "+x.Subagent.GetSessionId()))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// partial streams a thinking or text fragment on the current line.
func (r *Renderer) partial(key, p string, phase penguinv1.StreamEventType, text, style string) {
	switch phase {
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
		r.closeSegment()
		r.open = key
		r.streamed[key] = true
		fmt.Fprint(r.out, p)
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
		if r.open != key {
			r.closeSegment()
			r.open = key
			fmt.Fprint(r.out, p)
		}
		fmt.Fprint(r.out, r.style(style, text))
	}
}

// complete prints a complete thinking or text message unless its partials
// already did.
func (r *Renderer) complete(key, p, text, style string) {
	if r.streamed[key] {
		delete(r.streamed, key)
		if r.open == key {
			r.closeSegment()
		}
		return
	}
	r.closeSegment()
	if text != "" {
		fmt.Fprintf(r.out, "%s%s\n", p, r.style(style, text))
	}
}

// collapseHead is how many lines of a tool output a collapsed view shows
// live; the tail of the same length follows the elision marker.
const collapseHead = 4

func (r *Renderer) toolDelta(p string, d *penguinv1.PartialToolCallOutput) {
	id := d.GetToolCallId()
	switch d.GetEventType() {
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
		r.closeSegment()
		r.streamed["out"+id] = true
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
		for _, line := range strings.SplitAfter(d.GetOutput(), "\n") {
			if line == "" {
				continue
			}
			n := r.outLines[id]
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			} else {
				r.outLines[id] = n + 1
			}
			if r.collapse && n >= collapseHead {
				continue
			}
			fmt.Fprint(r.out, p+r.style(styleDim, "  │ "+line))
		}
	}
}

func (r *Renderer) toolOutput(p string, o *penguinv1.ToolCallOutput) {
	r.closeSegment()
	id := o.GetToolCallId()
	lines := strings.Split(strings.TrimRight(o.GetOutput(), "\n"), "\n")
	switch {
	case !r.streamed["out"+id]:
		// Nothing was streamed (a denial, a forbidden call, a fast tool):
		// show the output now.
		shown := lines
		if r.collapse && len(lines) > 2*collapseHead+1 {
			shown = append(append(append([]string{}, lines[:collapseHead]...), fmt.Sprintf("… (+%d lines)", len(lines)-2*collapseHead)), lines[len(lines)-collapseHead:]...)
		}
		for _, l := range shown {
			fmt.Fprintln(r.out, p+r.style(styleDim, "  │ "+l))
		}
	case r.collapse && len(lines) > 2*collapseHead+1:
		fmt.Fprintln(r.out, p+r.style(styleDim, fmt.Sprintf("  │ … (+%d lines, /verbose for full output)", len(lines)-2*collapseHead)))
		for _, l := range lines[len(lines)-collapseHead:] {
			fmt.Fprintln(r.out, p+r.style(styleDim, "  │ "+l))
		}
	}
	delete(r.streamed, "out"+id)
	delete(r.outLines, id)
	if s := o.GetStopReason(); s != penguinv1.StopReason_STOP_REASON_UNSPECIFIED && s != penguinv1.StopReason_STOP_REASON_COMPLETED {
		fmt.Fprintln(r.out, p+r.style(styleRed, "  └ "+enumword.Word(s)))
	}
	if n := len(o.GetImages()); n > 0 {
		fmt.Fprintln(r.out, p+r.style(styleDim, fmt.Sprintf("  └ %d image(s)", n)))
	}
}

// requestEnd reports a failed model request and, when the engine will
// retry, the wait before it does. A completed request is silent unless it
// carries a note (such as that the output stopped at the token limit),
// which is printed dim on one line so a cut answer does not pass for a
// finished one.
func (r *Renderer) requestEnd(p string, e *penguinv1.RequestEnd) {
	if e.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
		if note := e.GetErrorMessage(); note != "" {
			r.closeSegment()
			fmt.Fprintln(r.out, p+r.style(styleDim, "note: "+strings.Join(strings.Fields(note), " ")))
		}
		return
	}
	r.closeSegment()
	what := enumword.Word(e.GetStatus())
	if e.GetErrorMessage() != "" {
		what += ": " + e.GetErrorMessage()
	}
	if e.GetRetryInMs() > 0 {
		wait := time.Duration(e.GetRetryInMs()) * time.Millisecond
		fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleRed, fmt.Sprintf("⟳ request failed (%s); retrying in %s (attempt %d)", what, wait.Round(100*time.Millisecond), e.GetAttempt()+1)))
		return
	}
	fmt.Fprintf(r.out, "%s%s\n", p, r.style(styleRed, "✗ request failed ("+what+")"))
}

// Green returns text styled as a success when color is on.
func (r *Renderer) Green(text string) string { return r.style(styleGreen, text) }
