package omni

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// ErrDiscipline is wrapped by every violation of the streaming discipline
// that the validator reports, so callers can tell a broken stream from other
// failures with errors.Is.
var ErrDiscipline = errors.New("streaming discipline violated")

// segmentKind names the four kinds of streamed segment.
type segmentKind int

const (
	segText segmentKind = iota
	segThinking
	segToolCall
	segToolCallOutput
)

func (k segmentKind) String() string {
	return [...]string{"partial_text", "partial_thinking", "partial_tool_call", "partial_tool_call_output"}[k]
}

// segmentKey identifies one open segment: text and thinking have one segment
// at a time per origin, while tool calls and tool outputs are told apart by
// their call id so parallel calls may interleave their deltas.
type segmentKey struct {
	origin string
	kind   segmentKind
	id     string
}

// segment accumulates the deltas of one open segment.
type segment struct {
	name    string
	content strings.Builder
	images  []string
}

// Checker validates one stream incrementally: every segment is start, then
// deltas, then stop, and the frame right after a stop (for the same origin)
// is the complete message, whose content equals the joined deltas. Complete
// messages may also arrive without partials. Messages forwarded from a
// subagent are checked separately per origin, so they may interleave with
// the session's own. A Checker is not safe for concurrent use.
type Checker struct {
	open map[segmentKey]*segment
	// pending holds, per origin, a stopped segment whose complete message
	// must be the next frame of that origin.
	pending map[string]*pendingComplete
	frames  int
}

type pendingComplete struct {
	key segmentKey
	seg *segment
}

// NewChecker returns a Checker for a new stream.
func NewChecker() *Checker {
	return &Checker{open: map[segmentKey]*segment{}, pending: map[string]*pendingComplete{}}
}

func violation(frame int, format string, args ...any) error {
	return fmt.Errorf("%w: frame %d: %s", ErrDiscipline, frame, fmt.Sprintf(format, args...))
}

// partialView is the common shape of the four partial payloads.
type partialView struct {
	key     segmentKey
	phase   penguinv1.StreamEventType
	name    string
	content string
	images  []string
}

func viewPartial(m *penguinv1.OmniMessage) (partialView, bool) {
	origin := strings.Join(m.GetOrigin(), "/")
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialText:
		return partialView{key: segmentKey{origin, segText, ""}, phase: p.PartialText.GetEventType(), content: p.PartialText.GetText()}, true
	case *penguinv1.OmniMessage_PartialThinking:
		return partialView{key: segmentKey{origin, segThinking, ""}, phase: p.PartialThinking.GetEventType(), content: p.PartialThinking.GetThinking()}, true
	case *penguinv1.OmniMessage_PartialToolCall:
		t := p.PartialToolCall
		return partialView{key: segmentKey{origin, segToolCall, t.GetToolCallId()}, phase: t.GetEventType(), name: t.GetName(), content: t.GetArguments()}, true
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		t := p.PartialToolCallOutput
		return partialView{key: segmentKey{origin, segToolCallOutput, t.GetToolCallId()}, phase: t.GetEventType(), content: t.GetOutput(), images: t.GetImages()}, true
	}
	return partialView{}, false
}

// completeView is the comparable content of a complete message that has a
// streamed counterpart.
type completeView struct {
	key     segmentKey
	name    string
	content string
	images  []string
}

func viewComplete(m *penguinv1.OmniMessage) (completeView, bool) {
	origin := strings.Join(m.GetOrigin(), "/")
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		return completeView{key: segmentKey{origin, segText, ""}, content: p.Text.GetText()}, true
	case *penguinv1.OmniMessage_Thinking:
		return completeView{key: segmentKey{origin, segThinking, ""}, content: p.Thinking.GetThinking()}, true
	case *penguinv1.OmniMessage_ToolCall:
		t := p.ToolCall
		return completeView{key: segmentKey{origin, segToolCall, t.GetToolCallId()}, name: t.GetName(), content: t.GetArguments()}, true
	case *penguinv1.OmniMessage_ToolCallOutput:
		t := p.ToolCallOutput
		return completeView{key: segmentKey{origin, segToolCallOutput, t.GetToolCallId()}, content: t.GetOutput(), images: t.GetImages()}, true
	}
	return completeView{}, false
}

// Check validates the next message of the stream.
func (c *Checker) Check(m *penguinv1.OmniMessage) error {
	c.frames++
	n := c.frames
	if m == nil || m.GetPayload() == nil {
		return violation(n, "message has no payload")
	}
	origin := strings.Join(m.GetOrigin(), "/")
	if pv, ok := viewPartial(m); ok {
		if p := c.pending[origin]; p != nil {
			return violation(n, "%s arrived where the complete message of the stopped %s was due", pv.key.kind, p.key.kind)
		}
		return c.checkPartial(n, pv)
	}
	cv, streamed := viewComplete(m)
	if p := c.pending[origin]; p != nil {
		if !streamed || cv.key != p.key {
			return violation(n, "a %T arrived where the complete message of the stopped %s %q was due", m.GetPayload(), p.key.kind, p.key.id)
		}
		delete(c.pending, origin)
		return compareComplete(n, p.seg, cv)
	}
	if streamed {
		if _, open := c.open[cv.key]; open {
			return violation(n, "complete message arrived before its %s segment stopped", cv.key.kind)
		}
	}
	return nil
}

func (c *Checker) checkPartial(n int, pv partialView) error {
	seg, open := c.open[pv.key]
	switch pv.phase {
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
		if open {
			return violation(n, "%s start while the segment %q is already open", pv.key.kind, pv.key.id)
		}
		if pv.content != "" {
			return violation(n, "%s start carries content", pv.key.kind)
		}
		c.open[pv.key] = &segment{name: pv.name}
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
		if !open {
			return violation(n, "%s delta without a start (missing start, or delta after stop)", pv.key.kind)
		}
		if seg.name != "" && pv.name != "" && pv.name != seg.name {
			return violation(n, "%s delta names %q but the segment started as %q", pv.key.kind, pv.name, seg.name)
		}
		if seg.name == "" {
			seg.name = pv.name
		}
		seg.content.WriteString(pv.content)
		seg.images = append(seg.images, pv.images...)
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP:
		if !open {
			return violation(n, "%s stop without a start", pv.key.kind)
		}
		if pv.content != "" {
			return violation(n, "%s stop carries content", pv.key.kind)
		}
		delete(c.open, pv.key)
		c.pending[pv.key.origin] = &pendingComplete{key: pv.key, seg: seg}
	default:
		return violation(n, "%s has no event_type", pv.key.kind)
	}
	return nil
}

func compareComplete(n int, seg *segment, cv completeView) error {
	if got := seg.content.String(); got != cv.content {
		return violation(n, "complete %s differs from its joined deltas: deltas %q, complete %q",
			strings.TrimPrefix(cv.key.kind.String(), "partial_"), clip(got), clip(cv.content))
	}
	if seg.name != "" && cv.name != seg.name {
		return violation(n, "complete tool_call is named %q but its deltas named %q", cv.name, seg.name)
	}
	if !slices.Equal(seg.images, cv.images) && !(len(seg.images) == 0 && len(cv.images) == 0) {
		return violation(n, "complete tool_call_output images differ from its deltas' images")
	}
	return nil
}

func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// Finish reports an error when the stream ended with a segment still open
// or a stopped segment whose complete message never came.
func (c *Checker) Finish() error {
	for k := range c.open {
		return violation(c.frames, "stream ended with the %s segment %q still open", k.kind, k.id)
	}
	for _, p := range c.pending {
		return violation(c.frames, "stream ended before the complete message of the stopped %s %q", p.key.kind, p.key.id)
	}
	return nil
}

// ValidateLLMStream checks a whole StreamGenerate stream: every message
// frame keeps the streaming discipline, no segment is left open, and exactly
// one outcome arrives, as the last frame.
func ValidateLLMStream(frames []*penguinv1.StreamGenerateResponse) error {
	c := NewChecker()
	outcomes := 0
	for i, f := range frames {
		switch fr := f.GetFrame().(type) {
		case *penguinv1.StreamGenerateResponse_Message:
			if outcomes > 0 {
				return violation(i+1, "message after the outcome: the outcome must be the last frame")
			}
			if err := c.Check(fr.Message); err != nil {
				return err
			}
		case *penguinv1.StreamGenerateResponse_Outcome:
			outcomes++
			if outcomes > 1 {
				return violation(i+1, "a second outcome: exactly one is allowed")
			}
			if fr.Outcome.GetStatus() == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
				return violation(i+1, "outcome has no status")
			}
			if err := c.Finish(); err != nil {
				return err
			}
		default:
			return violation(i+1, "frame has neither a message nor an outcome")
		}
	}
	if outcomes == 0 {
		return violation(len(frames), "stream ended without an outcome")
	}
	return nil
}

// ValidateToolStream checks a whole ExecuteTool stream for the call
// toolCallID: the discipline holds, every partial and output of the
// session's own (no origin) belongs to that call, and exactly one complete
// tool_call_output ends the stream. Messages forwarded from a subagent (with
// an origin) pass through unchecked against the call id.
func ValidateToolStream(toolCallID string, msgs []*penguinv1.OmniMessage) error {
	c := NewChecker()
	outputs := 0
	for i, m := range msgs {
		if err := c.Check(m); err != nil {
			return err
		}
		if len(m.GetOrigin()) > 0 {
			continue
		}
		if outputs > 0 {
			if _, again := m.GetPayload().(*penguinv1.OmniMessage_ToolCallOutput); again {
				return violation(i+1, "a second tool_call_output: exactly one is allowed")
			}
			return violation(i+1, "frame after the tool_call_output: it must be the last frame")
		}
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_PartialToolCallOutput:
			if id := p.PartialToolCallOutput.GetToolCallId(); id != toolCallID {
				return violation(i+1, "partial output for call %q in the stream of call %q", id, toolCallID)
			}
		case *penguinv1.OmniMessage_ToolCallOutput:
			if id := p.ToolCallOutput.GetToolCallId(); id != toolCallID {
				return violation(i+1, "output for call %q in the stream of call %q", id, toolCallID)
			}
			outputs++
		default:
			return violation(i+1, "a tool stream carries only partial_tool_call_output and tool_call_output, got %T", m.GetPayload())
		}
	}
	if outputs == 0 {
		return violation(len(msgs), "stream ended without a tool_call_output")
	}
	return c.Finish()
}
