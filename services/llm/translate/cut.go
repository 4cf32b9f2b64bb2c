package translate

import (
	"encoding/json"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
)

// A Cut says why a provider ended a stream before the model was done with
// its output, in the words the outcome uses. The contract has no stop
// reason for such an end, and output cut short is still output, so
// [Translator.FinishCut] keeps the outcome's status and explains the end in
// its message; only a tool call that the cut left unfinished changes the
// status, because it cannot be run.
type Cut struct {
	// Note is the outcome's message when the output is usable as far as it
	// goes, such as "the model stopped at the output token limit
	// (finish_reason length)".
	Note string
	// Cause completes `tool call "name" was cut off …` for a call whose
	// arguments the cut left incomplete, such as "at the output token limit
	// (finish_reason length)".
	Cause string
}

// OutputLimit is the Cut of a stream that the output token limit ended.
// wire is the provider's own term for that end, such as "finish_reason
// length" or "stop_reason max_tokens", so that every adapter words the
// note alike and a reader can still trace it to the wire.
func OutputLimit(wire string) Cut {
	at := "at the output token limit (" + wire + ")"
	return Cut{Note: "the model stopped " + at, Cause: at}
}

// FinishCut ends a stream that the provider ended normally but early, for
// the reason cut gives, and returns the outcome to send last.
//
// A tool call still open whose arguments are not a whole JSON value cannot
// be run, so the outcome is malformed, naming the first such call in start
// order, and the engine asks again; Finish then closes every open segment
// marked with that status, so no open call is taken for a whole one and
// run. A call with no arguments at all counts as cut: the end fell right
// after its name. An adapter whose provider closes a call's block before it
// says why the stream ended (Anthropic) must therefore keep the last call
// open until it knows.
//
// Otherwise the content is usable as far as it goes: the outcome keeps the
// status [Translator.Finish] gives it, and its message is cut's note, so an
// answer cut short is not mistaken for a finished one. A stream with no
// content at all still fails as empty, the note appended to say why.
func (t *Translator) FinishCut(cut Cut) *penguinv1.LLMOutcome {
	for _, i := range t.order {
		if c := t.calls[i]; !json.Valid(c.args) {
			return t.Finish(failure.Malformed(nil, "tool call %q was cut off %s: its arguments are incomplete JSON", c.name, cut.Cause))
		}
	}
	o := t.Finish(nil)
	if o.Message == "" {
		o.Message = cut.Note
	} else {
		o.Message += "; " + cut.Note
	}
	return o
}
