// Package translate holds the translation rules of the interface contract
// that every adapter shares: how provider stream events become partials and
// complete messages (the [Translator]), how tool-call ids stay unique within
// a session without the service keeping state ([IDs]), how provider fidelity
// payloads are kept verbatim, and how a history of OmniMessages is grouped
// into provider turns ([Turns]).
package translate

import (
	"bytes"
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

const (
	phaseStart = penguinv1.StreamEventType_STREAM_EVENT_TYPE_START
	phaseDelta = penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA
	phaseStop  = penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
)

// Translator turns the events of one provider stream into the contract's
// frames: every segment is start, deltas, stop and then its complete
// message; a thinking block is closed by its fidelity payload and
// consecutive deltas with identical fidelity belong to one block; text is
// split where the fidelity phase changes and closed by a signature; a new
// kind of content closes the thinking and text before it, so complete
// messages come in the order thinking, text, tool calls. Tool calls are
// keyed by the provider's index, so parallel calls may interleave their
// deltas; each keeps its own segment until the provider closes it or the
// stream ends.
//
// After the last event, [Translator.Finish] closes whatever is still open
// (marking it with the outcome's status when the stream failed), emits
// token usage, and returns the outcome. A Translator is used by one
// goroutine.
//
// Every message it emits is new and shares nothing with the Translator or
// the adapter (fidelity payloads are copied: an adapter may hand the same
// bytes to every request), because what is emitted is the consumer's (see
// [stream.Emit]).
type Translator struct {
	emit stream.Emit
	ids  *IDs
	err  error

	thinking *block
	text     *block
	calls    map[int]*call
	order    []int // open tool calls in start order

	content bool // anything at all was emitted
	usage   *penguinv1.TokenCounts
}

type block struct {
	fidelity []byte
	content  []byte
}

type call struct {
	id, name string
	args     []byte
	fidelity []byte
}

// New returns a Translator that emits through emit and allocates tool-call
// ids from ids.
func New(emit stream.Emit, ids *IDs) *Translator {
	return &Translator{emit: emit, ids: ids, calls: map[int]*call{}}
}

// Err returns the consumer's error once emit has failed; the adapter should
// then stop reading and return, because nobody is listening.
func (t *Translator) Err() error { return t.err }

func (t *Translator) send(m *penguinv1.OmniMessage) {
	if t.err != nil {
		return
	}
	t.err = t.emit(m)
}

// ThinkingDelta adds reasoning text. fidelity is the provider's payload for
// this delta (nil for none): a delta whose fidelity differs from the open
// block's starts a new block; nil continues the open block.
func (t *Translator) ThinkingDelta(text string, fidelity []byte) {
	t.closeText(nil)
	if t.thinking != nil && fidelity != nil && t.thinking.fidelity != nil && !bytes.Equal(fidelity, t.thinking.fidelity) {
		t.closeThinking(nil)
	}
	if t.thinking == nil {
		t.thinking = &block{fidelity: fidelity}
		t.send(omni.PartialThinking(phaseStart, ""))
	} else if t.thinking.fidelity == nil {
		t.thinking.fidelity = fidelity
	}
	if text == "" {
		return
	}
	t.thinking.content = append(t.thinking.content, text...)
	t.send(omni.PartialThinking(phaseDelta, text))
}

// CloseThinking closes the open thinking block, merging fidelity (such as
// {"signature": …}) into its payload. A closing payload with no open block
// opens and closes an empty one, which is how encrypted reasoning arrives.
func (t *Translator) CloseThinking(fidelity []byte) {
	if t.thinking == nil {
		if fidelity == nil {
			return
		}
		t.ThinkingDelta("", nil)
	}
	t.closeThinking(fidelity)
}

func (t *Translator) closeThinking(fidelity []byte) {
	b := t.thinking
	if b == nil {
		return
	}
	t.thinking = nil
	b.fidelity = MergeFidelity(b.fidelity, fidelity)
	t.send(omni.PartialThinking(phaseStop, ""))
	t.send(omni.Thinking(string(b.content), bytes.Clone(b.fidelity)))
	t.content = true
}

// RedactedThinking emits a complete thinking block that has no text, only
// the provider's opaque payload (Anthropic's redacted_thinking), which must
// go back to the provider verbatim.
func (t *Translator) RedactedThinking(fidelity []byte) {
	t.closeText(nil)
	t.closeThinking(nil)
	t.send(omni.Thinking("", bytes.Clone(fidelity)))
	t.content = true
}

// TextDelta adds visible text. A fidelity whose "phase" differs from the
// open segment's starts a new segment; other keys accumulate.
func (t *Translator) TextDelta(text string, fidelity []byte) {
	t.closeThinking(nil)
	if t.text != nil && fidelity != nil && phaseOf(fidelity) != phaseOf(t.text.fidelity) {
		t.closeText(nil)
	}
	if t.text == nil {
		t.text = &block{fidelity: fidelity}
		t.send(omni.PartialText(phaseStart, ""))
	} else {
		t.text.fidelity = MergeFidelity(t.text.fidelity, fidelity)
	}
	if text == "" {
		return
	}
	t.text.content = append(t.text.content, text...)
	t.send(omni.PartialText(phaseDelta, text))
	if hasKey(fidelity, "signature") {
		t.closeText(nil)
	}
}

// CloseText closes the open text segment, merging fidelity into its
// payload.
func (t *Translator) CloseText(fidelity []byte) { t.closeText(fidelity) }

func (t *Translator) closeText(fidelity []byte) {
	b := t.text
	if b == nil {
		return
	}
	t.text = nil
	b.fidelity = MergeFidelity(b.fidelity, fidelity)
	t.send(omni.PartialText(phaseStop, ""))
	m := omni.AssistantText(string(b.content))
	m.GetText().Fidelity = bytes.Clone(b.fidelity)
	t.send(m)
	t.content = true
}

// ToolCallDelta adds to the tool call at the provider's index. The first
// delta of an index opens the call: providerID and name are taken from it
// (or from the first delta that has them), and the id is made unique within
// the session. args is a fragment of the raw argument JSON.
func (t *Translator) ToolCallDelta(index int, providerID, name, args string) {
	c := t.calls[index]
	if c == nil {
		t.closeThinking(nil)
		t.closeText(nil)
		c = &call{id: t.ids.Inbound(providerID, name), name: name}
		t.calls[index] = c
		t.order = append(t.order, index)
		t.send(omni.PartialToolCall(phaseStart, c.id, c.name, ""))
	} else if c.name == "" && name != "" {
		c.name = name
	}
	if args == "" {
		return
	}
	c.args = append(c.args, args...)
	t.send(omni.PartialToolCall(phaseDelta, c.id, c.name, args))
}

// ToolCallFidelity merges the provider's payload for the open call at
// index (Gemini's thought signature) into the call's fidelity.
func (t *Translator) ToolCallFidelity(index int, fidelity []byte) {
	if c := t.calls[index]; c != nil {
		c.fidelity = MergeFidelity(c.fidelity, fidelity)
	}
}

// CloseToolCall closes the tool call at index. A call that received no
// arguments gets "{}", so the arguments are always a JSON object.
func (t *Translator) CloseToolCall(index int) {
	t.closeCall(index, penguinv1.StopReason_STOP_REASON_UNSPECIFIED)
}

func (t *Translator) closeCall(index int, stop penguinv1.StopReason) {
	c := t.calls[index]
	if c == nil {
		return
	}
	delete(t.calls, index)
	t.order = slices.DeleteFunc(t.order, func(i int) bool { return i == index })
	if len(c.args) == 0 && stop == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		c.args = append(c.args, "{}"...)
		t.send(omni.PartialToolCall(phaseDelta, c.id, c.name, "{}"))
	}
	p := omni.PartialToolCall(phaseStop, c.id, c.name, "")
	p.GetPartialToolCall().StopReason = stop
	t.send(p)
	m := omni.ToolCall(c.id, c.name, string(c.args))
	m.GetToolCall().StopReason = stop
	m.GetToolCall().Fidelity = bytes.Clone(c.fidelity)
	t.send(m)
	t.content = true
}

// Usage records the request's token counts; the last call wins. Counts are
// emitted by Finish, after the content.
func (t *Translator) Usage(u *penguinv1.TokenCounts) { t.usage = u }

// HasContent reports whether any content was emitted or is open.
func (t *Translator) HasContent() bool {
	return t.content || t.thinking != nil || t.text != nil || len(t.calls) > 0
}

// Finish closes every open segment and returns the outcome to send last.
// fail is nil when the provider ended the stream normally; then a stream
// with no content at all becomes an EMPTY_RESPONSE failure, because an
// empty answer would silently end the turn. Otherwise open segments are
// closed with the failure's status as their stop reason, so the consumer
// can tell complete content from a cut-off fragment. Token usage is emitted
// whenever the provider reported it, and on every completed stream: marked
// unreported when the provider sent none, so that unknown counts are never
// taken for zeros.
func (t *Translator) Finish(fail *failure.Error) *penguinv1.LLMOutcome {
	if fail == nil && !t.HasContent() {
		fail = failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_EMPTY_RESPONSE,
			"the provider completed the request with no content at all")
	}
	stop := penguinv1.StopReason_STOP_REASON_UNSPECIFIED
	if fail != nil {
		stop = fail.Status
	}
	t.closeOpen(stop)
	if t.usage != nil || fail == nil {
		u := t.usage
		if u == nil {
			u = &penguinv1.TokenCounts{Unreported: true}
		}
		// The service is stateless, so the session total it can report is
		// this request's; the engine, which owns the session, adds up.
		t.send(omni.TokenUsage(proto.CloneOf(u), u))
	}
	if fail != nil {
		return fail.Outcome()
	}
	return failure.Completed()
}

func (t *Translator) closeOpen(stop penguinv1.StopReason) {
	if t.thinking != nil {
		b := t.thinking
		t.thinking = nil
		p := omni.PartialThinking(phaseStop, "")
		p.GetPartialThinking().StopReason = stop
		t.send(p)
		m := omni.Thinking(string(b.content), bytes.Clone(b.fidelity))
		m.GetThinking().StopReason = stop
		t.send(m)
		t.content = true
	}
	if t.text != nil {
		b := t.text
		t.text = nil
		p := omni.PartialText(phaseStop, "")
		p.GetPartialText().StopReason = stop
		t.send(p)
		m := omni.AssistantText(string(b.content))
		m.GetText().Fidelity = bytes.Clone(b.fidelity)
		m.GetText().StopReason = stop
		t.send(m)
		t.content = true
	}
	for _, i := range slices.Clone(t.order) {
		t.closeCall(i, stop)
	}
}

// MergeFidelity returns the union of two fidelity objects. Either alone is
// returned as is, byte for byte, because some providers need their payload
// back verbatim; only when both are set are their keys combined (each
// value's bytes still kept), b winning on a clash.
func MergeFidelity(a, b []byte) []byte {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0 || bytes.Equal(a, b):
		return b
	}
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return b
	}
	for k, v := range mb {
		ma[k] = v
	}
	out, err := json.Marshal(ma)
	if err != nil {
		return b
	}
	return out
}

// FidelityString returns the string value of key in a fidelity object, and
// whether it was there.
func FidelityString(fidelity []byte, key string) (string, bool) {
	if len(fidelity) == 0 {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(fidelity, &m) != nil {
		return "", false
	}
	raw, ok := m[key]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Fidelity returns the JSON object {key: value}.
func Fidelity(key, value string) []byte {
	out, _ := json.Marshal(map[string]string{key: value})
	return out
}

func phaseOf(fidelity []byte) string {
	s, _ := FidelityString(fidelity, "phase")
	return s
}

func hasKey(fidelity []byte, key string) bool {
	_, ok := FidelityString(fidelity, key)
	return ok
}
