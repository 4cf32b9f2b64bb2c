// Package resume rebuilds a session's model context from its event log.
//
// The log is the single source of truth: it records what happened, in the
// order it happened, and nothing model-visible-only (carry-over blocks,
// retry notes). Rebuilding keeps only committed turns (a request whose
// request_end says completed) so that every tool_call in the history is
// paired with exactly one output; incomplete model output is allowed to be
// lost. What was recorded but never reached the model in a committed
// request (tool results of the last turn, a prompt whose request failed,
// delivered steering) becomes the pending input of the next run, with an
// interrupted placeholder for each committed call that never got an
// output.
package resume

import (
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// State is a session's context as rebuilt from its log.
type State struct {
	// Meta is the session_meta of the current context; nil when the log
	// has none (an empty log).
	Meta *penguinv1.SessionMeta
	// MetaSequence is the sequence number of Meta: where the current
	// context starts in the log.
	MetaSequence int64
	// Tools is the tool list recorded for the current context; nil when
	// none was recorded yet.
	Tools []*penguinv1.ToolDefinition
	// History is the committed history of the current context.
	History []*penguinv1.OmniMessage
	// Pending is the input recorded but not yet committed, in the order
	// the next request must send it: the last committed turn's tool
	// outputs in call order (placeholders for missing ones), then other
	// user input in log order.
	Pending []*penguinv1.OmniMessage
	// Turns counts the committed requests of the current context.
	Turns int
	// LastTotal is the token total of the last committed request.
	LastTotal int64
	// Usage is the session's cumulative token counts, from the last
	// token_usage event.
	Usage *penguinv1.TokenCounts
	// OpenCompaction is a compaction_begin with no compaction_end: the
	// process died during a compaction. The caller closes it as failed.
	OpenCompaction *penguinv1.CompactionBegin
	// LastSequence is the sequence number of the last event read.
	LastSequence int64
	// Stranded are the outputs the next task records for the tool calls
	// of the last committed turn that have none although no abort was
	// recorded after them: the engine running the task stopped (a crash,
	// a killed or stopped replica) before they finished. A call that was
	// allowed may or may not have run and is never run again
	// (loop.Stranded); one that was denied gets its denial; one still
	// waiting for approval never ran (loop.NotAsked). Pending holds the
	// same outputs, so the log and the model agree on how each call ended.
	Stranded []*penguinv1.OmniMessage
	// Unasked are the calls among Stranded that were waiting for approval.
	// A task that resumes the run asks for them again (and runs them when
	// allowed) instead of recording their NotAsked output.
	Unasked []*penguinv1.ToolCall
	// CutOff is what the requests since the last commit produced that
	// never joined the history (a request in flight when the engine
	// stopped, and attempts that failed before it): their complete
	// messages, each tool call followed by its output (recorded, or the
	// Stranded or NotAsked one). The model is told about them
	// (loop.CutOffBlock) rather than left to repeat what already ran. Nil
	// when they produced nothing complete, or after an abort.
	CutOff []*penguinv1.OmniMessage
}

// Rebuild replays events (in sequence order, starting at or before the
// current context's session_meta) into a State.
func Rebuild(events []store.Event) *State {
	b := newBuilder()
	for _, e := range events {
		b.add(e)
	}
	return b.finish()
}

type builder struct {
	s *State

	inSpan       bool
	inCompaction bool
	attempt      []*penguinv1.OmniMessage
	attemptUsage *penguinv1.TokenCounts

	// lastCalls are the tool calls of the last committed turn, whose
	// outputs are the next request's input.
	lastCalls []*penguinv1.ToolCall
	// outputs holds every tool output of the context by call id; an
	// output may arrive before its call's request is committed.
	outputs map[string]*penguinv1.OmniMessage
	// pendingUser is user input recorded since the last commit.
	pendingUser []*penguinv1.OmniMessage
	// aborted is set when an abort was recorded since the last commit.
	aborted bool
	// decided holds the approval decision recorded for each call.
	decided map[string]penguinv1.Decision
	// uncommitted is what the requests since the last commit produced
	// that never joined the history: the output of attempts that failed
	// or were cut off by the engine stopping.
	uncommitted []*penguinv1.OmniMessage
}

func newBuilder() *builder {
	return &builder{s: &State{}, outputs: map[string]*penguinv1.OmniMessage{}, decided: map[string]penguinv1.Decision{}}
}

// reset starts a fresh context: everything before a session_meta belongs
// to an older context that a compaction closed.
func (b *builder) reset() {
	usage, last := b.s.Usage, b.s.LastSequence
	*b = *newBuilder()
	b.s.Usage, b.s.LastSequence = usage, last
}

func (b *builder) add(e store.Event) {
	m := e.Message
	b.s.LastSequence = e.Sequence
	if tu := m.GetTokenUsage(); tu != nil {
		b.s.Usage = tu.GetSession()
	}
	if b.inCompaction {
		// Everything between the compaction events is compaction-internal:
		// the request, its summary and its usage never join the context.
		if m.GetCompactionEnd() != nil {
			b.inCompaction = false
			b.s.OpenCompaction = nil
		}
		return
	}
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_SessionMeta:
		b.reset()
		b.s.Meta = p.SessionMeta
		b.s.MetaSequence = e.Sequence
	case *penguinv1.OmniMessage_ToolListReady:
		b.s.Tools = p.ToolListReady.GetTools()
	case *penguinv1.OmniMessage_CompactionBegin:
		b.inCompaction = true
		b.s.OpenCompaction = p.CompactionBegin
	case *penguinv1.OmniMessage_RequestBegin:
		b.inSpan = true
		b.attempt = nil
		b.attemptUsage = nil
	case *penguinv1.OmniMessage_TokenUsage:
		if b.inSpan {
			b.attemptUsage = p.TokenUsage.GetRequest()
		}
	case *penguinv1.OmniMessage_RequestEnd:
		if b.inSpan && p.RequestEnd.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
			b.commit()
		} else {
			b.uncommitted = append(b.uncommitted, b.attempt...)
		}
		b.inSpan = false
		b.attempt = nil
	case *penguinv1.OmniMessage_ToolCallOutput:
		b.outputs[p.ToolCallOutput.GetToolCallId()] = m
	case *penguinv1.OmniMessage_Abort:
		// The abort's own carry-over tells the model what the
		// interrupted request had produced.
		b.aborted = true
		b.uncommitted = nil
	case *penguinv1.OmniMessage_ApprovalDecision:
		b.decided[p.ApprovalDecision.GetToolCallId()] = p.ApprovalDecision.GetDecision()
	default:
		if omni.KindOf(m) != omni.KindModel {
			return
		}
		if isUserRole(m) {
			b.pendingUser = append(b.pendingUser, m)
		} else if b.inSpan {
			b.attempt = append(b.attempt, m)
		}
	}
}

// commit joins a completed request to the history: its input (the previous
// turn's outputs and the user input since) and the model's output.
func (b *builder) commit() {
	b.s.History = append(b.s.History, b.input()...)
	b.s.History = append(b.s.History, b.attempt...)
	b.lastCalls = b.lastCalls[:0]
	for _, m := range b.attempt {
		if tc := m.GetToolCall(); tc != nil {
			b.lastCalls = append(b.lastCalls, tc)
		}
	}
	b.pendingUser = nil
	b.uncommitted = nil
	b.aborted = false
	b.s.Turns++
	if b.attemptUsage != nil {
		b.s.LastTotal = b.attemptUsage.GetTotal()
	}
}

// input returns the input of the next request as recorded so far.
func (b *builder) input() []*penguinv1.OmniMessage {
	out := make([]*penguinv1.OmniMessage, 0, len(b.lastCalls)+len(b.pendingUser))
	for _, c := range b.lastCalls {
		if o, ok := b.outputs[c.GetToolCallId()]; ok {
			out = append(out, o)
			continue
		}
		out = append(out, omni.ToolCallOutput(c.GetToolCallId(), loop.Interrupted, penguinv1.StopReason_STOP_REASON_ABORTED))
	}
	return append(out, b.pendingUser...)
}

func (b *builder) finish() *State {
	b.s.Pending = b.input()
	if !b.aborted {
		for i, c := range b.lastCalls {
			if _, ok := b.outputs[c.GetToolCallId()]; ok {
				continue
			}
			out := b.strandedOutput(c)
			b.s.Stranded = append(b.s.Stranded, out)
			b.s.Pending[i] = out
			if _, ok := b.decided[c.GetToolCallId()]; !ok {
				b.s.Unasked = append(b.s.Unasked, c)
			}
		}
	}
	if b.inSpan {
		b.uncommitted = append(b.uncommitted, b.attempt...)
	}
	b.s.CutOff = b.cutOff()
	return b.s
}

// strandedOutput is the output of a call whose engine stopped before the
// call finished, by what the log says happened to it.
func (b *builder) strandedOutput(c *penguinv1.ToolCall) *penguinv1.OmniMessage {
	id := c.GetToolCallId()
	d, ok := b.decided[id]
	switch {
	case !ok:
		return omni.ToolCallOutput(id, loop.NotAsked, penguinv1.StopReason_STOP_REASON_ABORTED)
	case d == penguinv1.Decision_DECISION_ALLOW:
		return omni.ToolCallOutput(id, loop.Stranded, penguinv1.StopReason_STOP_REASON_ABORTED)
	case d == penguinv1.Decision_DECISION_FORBIDDEN:
		return omni.ToolCallOutput(id, loop.DeniedByPolicy, penguinv1.StopReason_STOP_REASON_ABORTED)
	default:
		return omni.ToolCallOutput(id, loop.DeniedByUser, penguinv1.StopReason_STOP_REASON_ABORTED)
	}
}

// cutOff returns what the requests since the last commit had produced,
// each call followed by its output.
func (b *builder) cutOff() []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, m := range b.uncommitted {
		out = append(out, m)
		if tc := m.GetToolCall(); tc != nil {
			o, ok := b.outputs[tc.GetToolCallId()]
			if !ok {
				o = b.strandedOutput(tc)
			}
			out = append(out, o)
		}
	}
	return out
}

func isUserRole(m *penguinv1.OmniMessage) bool {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		return p.Text.GetRole() == penguinv1.Role_ROLE_USER
	case *penguinv1.OmniMessage_ImageUrl:
		return true
	case *penguinv1.OmniMessage_InlineData:
		return p.InlineData.GetRole() == penguinv1.Role_ROLE_USER
	}
	return false
}
