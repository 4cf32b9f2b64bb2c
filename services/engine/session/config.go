package session

import (
	"encoding/json"
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// config is the engine's own part of a session row (store.Session.Config),
// kept as JSON. Everything the model saw lives in the log; this holds the
// session's settings and a few facts about the log that make reloading it
// cheap and safe.
type config struct {
	// MaxTurns overrides the agent's max_turns: zero keeps it, negative
	// means no limit.
	MaxTurns int32 `json:"max_turns,omitempty"`
	// SandboxMode is how the environment confines commands.
	SandboxMode penguinv1.SandboxMode `json:"sandbox_mode,omitempty"`
	// Vision records whether the model takes images.
	Vision bool `json:"vision,omitempty"`
	// Depth is 1 for a subagent's session: it gets no subagent tools.
	Depth int `json:"depth,omitempty"`
	// SharedEnvironment marks a subagent's session that uses its parent's
	// environment, which it must not dispose of.
	SharedEnvironment bool `json:"shared_environment,omitempty"`

	// SeqHigh is at least the highest sequence number ever handed out,
	// including partials that were never persisted. A runtime loaded later
	// continues above it, so no number a client has seen is reused. When
	// the log has grown past it (the engine died mid-run), a gap is left
	// instead.
	SeqHigh int64 `json:"seq_high,omitempty"`
	// ContextSeq is where the current model context starts in the log (its
	// session_meta); rebuilding reads from there. It is a hint: reading
	// from an earlier point gives the same result.
	ContextSeq int64 `json:"context_seq,omitempty"`
	// Note is model-visible carry-over that is never written to the log
	// (the [turn_aborted] or [turn_retried] block of an interrupted run).
	// It applies only while the log's last sequence is still NoteSeq.
	Note    string `json:"note,omitempty"`
	NoteSeq int64  `json:"note_seq,omitempty"`

	// Pinned and Archived are how a person keeps the session list in
	// order (UpdateSession).
	Pinned   bool `json:"pinned,omitempty"`
	Archived bool `json:"archived,omitempty"`

	// LastEnd is how the session's last task ended: the idle state event
	// that said so, which is never in the log. An Attach with until_idle
	// that finds the session idle ends with it, on whichever replica it
	// lands, so a client learns how a task ended that finished before it
	// attached, or on another replica.
	LastEnd *taskEnd `json:"last_end,omitempty"`
}

// taskEnd is the idle state event that ended a task, and its number.
type taskEnd struct {
	Sequence    int64                `json:"sequence"`
	Status      penguinv1.StopReason `json:"status"`
	Message     string               `json:"message,omitempty"`
	NotRecorded bool                 `json:"not_recorded,omitempty"`
}

// event returns the idle state event e describes; for a session that
// never ran a task (e nil), an idle state with no number and no status.
func (e *taskEnd) event() *penguinv1.RunEvent {
	if e == nil {
		return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE}}}
	}
	return &penguinv1.RunEvent{Sequence: e.Sequence, Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{
		State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: e.Status, Message: e.Message, NotRecorded: e.NotRecorded,
	}}}
}

func parseConfig(b []byte) (config, error) {
	var c config
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("session config: %w", err)
	}
	return c, nil
}

func (c config) bytes() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		// A struct of plain fields always marshals.
		panic(err)
	}
	return b
}

// configSharedEnvironment is config.SharedEnvironment's member of the
// JSON, which a binding of the session's own environment removes
// (rebind).
const configSharedEnvironment = "shared_environment"

// endChanges is what a task's end changes in the session's config, as
// changes of its JSON members that the store makes without reading the
// row back (store.SessionPatch): SeqHigh raised to high, LastEnd, the
// note and the log's last sequence it applies to (the row's, with the
// task's last events appended), and ContextSeq when the task moved it.
// The other members stay as they are in the row, whoever changed them
// during the task. Each key is config's JSON name of the field, which
// TestEndChangesAreTheConfigsFields checks.
func endChanges(high int64, end *taskEnd, note string, contextSeq int64) []store.ConfigChange {
	changes := []store.ConfigChange{
		{Key: "seq_high", Rule: store.ConfigRaise, N: high},
		{Key: "last_end", Value: jsonMember(end, end == nil)},
		{Key: "note", Value: jsonMember(note, note == "")},
		{Key: "note_seq", Rule: store.ConfigLastSequence},
	}
	if contextSeq > 0 {
		changes = append(changes, store.ConfigChange{Key: "context_seq", Value: jsonMember(contextSeq, false)})
	}
	return changes
}

// jsonMember is v as a config member's JSON value, or nothing (the member
// removed, as encoding/json's omitempty leaves it out) when empty is set.
func jsonMember(v any, empty bool) []byte {
	if empty {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Plain values and structs of them always marshal.
		panic(err)
	}
	return b
}

// crashGap is how far above the log's last sequence a runtime starts when
// the engine died during a run: more than any run emits between two
// persisted events.
const crashGap = 1 << 20
