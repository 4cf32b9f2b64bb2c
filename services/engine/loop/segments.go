package loop

import (
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
)

// segments follows the streamed segments of everything an attempt emits,
// so that when a stream is cut (a failed request, an abort) the engine can
// close what was left open: a stop and a complete message equal to the
// deltas, marked with the stop reason. Whoever watches the run then never
// sees a segment that does not end, whatever happened upstream.
type segments struct {
	open  map[segKey]*seg
	order []segKey
}

type segKey struct {
	origin string
	kind   string
	id     string
}

type seg struct {
	key     segKey
	origin  []string
	name    string
	content strings.Builder
	images  []string
	stopped bool
}

// observe updates the state with one emitted message.
func (s *segments) observe(m *penguinv1.OmniMessage) {
	if s.open == nil {
		s.open = map[segKey]*seg{}
	}
	origin := strings.Join(m.GetOrigin(), "/")
	var (
		key     segKey
		phase   penguinv1.StreamEventType
		name    string
		content string
		images  []string
	)
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialText:
		key, phase, content = segKey{origin, "text", ""}, p.PartialText.GetEventType(), p.PartialText.GetText()
	case *penguinv1.OmniMessage_PartialThinking:
		key, phase, content = segKey{origin, "thinking", ""}, p.PartialThinking.GetEventType(), p.PartialThinking.GetThinking()
	case *penguinv1.OmniMessage_PartialToolCall:
		pt := p.PartialToolCall
		key, phase, name, content = segKey{origin, "tool_call", pt.GetToolCallId()}, pt.GetEventType(), pt.GetName(), pt.GetArguments()
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		po := p.PartialToolCallOutput
		key, phase, content, images = segKey{origin, "tool_call_output", po.GetToolCallId()}, po.GetEventType(), po.GetOutput(), po.GetImages()
	case *penguinv1.OmniMessage_Text:
		s.drop(segKey{origin, "text", ""})
		return
	case *penguinv1.OmniMessage_Thinking:
		s.drop(segKey{origin, "thinking", ""})
		return
	case *penguinv1.OmniMessage_ToolCall:
		s.drop(segKey{origin, "tool_call", p.ToolCall.GetToolCallId()})
		return
	case *penguinv1.OmniMessage_ToolCallOutput:
		s.drop(segKey{origin, "tool_call_output", p.ToolCallOutput.GetToolCallId()})
		return
	default:
		return
	}
	switch phase {
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
		s.drop(key)
		s.open[key] = &seg{key: key, origin: m.GetOrigin(), name: name}
		s.order = append(s.order, key)
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
		if g := s.open[key]; g != nil {
			g.content.WriteString(content)
			g.images = append(g.images, images...)
			if g.name == "" {
				g.name = name
			}
		}
	case penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP:
		if g := s.open[key]; g != nil {
			g.stopped = true
		}
	}
}

func (s *segments) drop(k segKey) {
	if _, ok := s.open[k]; !ok {
		return
	}
	delete(s.open, k)
	for i, o := range s.order {
		if o == k {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// closing returns the messages that close the open segments accepted by
// keep, marked with status; a tool output closed by an abort gets the
// interrupted marker as a last delta. The segments are forgotten.
func (s *segments) closing(status penguinv1.StopReason, keep func(segKey) bool) []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, k := range append([]segKey(nil), s.order...) {
		g := s.open[k]
		if g == nil || !keep(k) {
			continue
		}
		s.drop(k)
		out = append(out, g.close(status)...)
	}
	return out
}

func (g *seg) close(status penguinv1.StopReason) []*penguinv1.OmniMessage {
	stop := penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
	delta := penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA
	var out []*penguinv1.OmniMessage
	add := func(m *penguinv1.OmniMessage) {
		m.Origin = g.origin
		out = append(out, m)
	}
	content := g.content.String()
	switch g.key.kind {
	case "text":
		if !g.stopped {
			m := omni.PartialText(stop, "")
			m.GetPartialText().StopReason = status
			add(m)
		}
		c := omni.AssistantText(content)
		c.GetText().StopReason = status
		add(c)
	case "thinking":
		if !g.stopped {
			m := omni.PartialThinking(stop, "")
			m.GetPartialThinking().StopReason = status
			add(m)
		}
		c := omni.Thinking(content, nil)
		c.GetThinking().StopReason = status
		add(c)
	case "tool_call":
		if !g.stopped {
			m := omni.PartialToolCall(stop, g.key.id, g.name, "")
			m.GetPartialToolCall().StopReason = status
			add(m)
		}
		c := omni.ToolCall(g.key.id, g.name, content)
		c.GetToolCall().StopReason = status
		add(c)
	case "tool_call_output":
		if !g.stopped {
			if status == penguinv1.StopReason_STOP_REASON_ABORTED && g.origin == nil {
				marker := "\n" + Interrupted
				add(omni.PartialToolCallOutput(delta, g.key.id, marker))
				content += marker
			}
			m := omni.PartialToolCallOutput(stop, g.key.id, "")
			m.GetPartialToolCallOutput().StopReason = status
			add(m)
		}
		add(omni.ToolCallOutput(g.key.id, content, status, g.images...))
	}
	return out
}
