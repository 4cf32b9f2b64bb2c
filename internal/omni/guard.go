package omni

import penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"

// Kind classifies an OmniMessage into the contract's three message families
// (session_meta, model messages, events), with partials split out because
// they are never persisted.
type Kind int

const (
	// KindUnknown is a message with no payload set.
	KindUnknown Kind = iota
	// KindSessionMeta is the session_meta of a context.
	KindSessionMeta
	// KindModel is a complete model message.
	KindModel
	// KindPartial is a streaming fragment.
	KindPartial
	// KindEvent is a runtime event.
	KindEvent
)

// KindOf returns the kind of m.
func KindOf(m *penguinv1.OmniMessage) Kind {
	switch m.GetPayload().(type) {
	case *penguinv1.OmniMessage_SessionMeta:
		return KindSessionMeta
	case *penguinv1.OmniMessage_Text, *penguinv1.OmniMessage_ImageUrl, *penguinv1.OmniMessage_InlineData,
		*penguinv1.OmniMessage_Thinking, *penguinv1.OmniMessage_InlineThinking,
		*penguinv1.OmniMessage_ToolCall, *penguinv1.OmniMessage_ToolCallOutput:
		return KindModel
	case *penguinv1.OmniMessage_PartialText, *penguinv1.OmniMessage_PartialThinking,
		*penguinv1.OmniMessage_PartialToolCall, *penguinv1.OmniMessage_PartialToolCallOutput:
		return KindPartial
	case nil:
		return KindUnknown
	default:
		return KindEvent
	}
}

// IsCompleteModelMessage reports whether m is a complete model message.
func IsCompleteModelMessage(m *penguinv1.OmniMessage) bool { return KindOf(m) == KindModel }

// Persistable reports whether m belongs in a session log: session_meta,
// complete model messages and events of the session itself. Partials and
// messages forwarded from a subagent (with an origin) are never persisted.
func Persistable(m *penguinv1.OmniMessage) bool {
	k := KindOf(m)
	return k != KindPartial && k != KindUnknown && len(m.GetOrigin()) == 0
}
