// Package limits sizes a request before it is sent: it estimates the input
// in tokens and derives the output cap, min(max_tokens, context window −
// estimated input − safety margin), so a request never asks for more output
// than the window still fits and a small-window model works without a
// hand-tuned max_tokens.
package limits

import (
	"fmt"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

const (
	// MinContextWindow is the smallest window taken at its word; a smaller
	// (or unset) window turns the output clamp off, because it is more
	// likely a configuration slip than a real model.
	MinContextWindow = 4096
	// MinOutputTokens is the least output room a request must leave; with
	// less, the request is refused as too large for the window.
	MinOutputTokens = 256
	// imageTokens is the estimate for one image: providers bill a large
	// image at roughly this many tokens, and over-estimating is the safe
	// side.
	imageTokens = 1600
	// perMessageTokens covers the role and framing tokens of a message.
	perMessageTokens = 4
)

// Margin returns the safety margin kept free in a window: 2% of it, at
// least 1024 tokens, to absorb the estimate's error and the provider's own
// framing.
func Margin(window int64) int64 { return max(1024, window/50) }

// Tokens estimates the tokens of a text: ASCII at four bytes a token, and
// every other character at one token each (CJK text tokenizes at about a
// token per character, and over-counting is the safe side).
func Tokens(s string) int64 {
	var ascii, other int64
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		other++
	}
	return (ascii+3)/4 + other
}

// Input estimates the input tokens of a request.
func Input(system string, tools []*penguinv1.ToolDefinition, msgs []*penguinv1.OmniMessage) int64 {
	n := Tokens(system)
	for _, t := range tools {
		n += Tokens(t.GetName()) + Tokens(t.GetDescription()) + Tokens(t.GetParameters()) + perMessageTokens
	}
	for _, m := range msgs {
		n += perMessageTokens
		switch p := m.GetPayload().(type) {
		case *penguinv1.OmniMessage_Text:
			n += Tokens(p.Text.GetText())
		case *penguinv1.OmniMessage_Thinking:
			n += Tokens(p.Thinking.GetThinking()) + int64(len(p.Thinking.GetFidelity())/4)
		case *penguinv1.OmniMessage_ToolCall:
			n += Tokens(p.ToolCall.GetName()) + Tokens(p.ToolCall.GetArguments())
		case *penguinv1.OmniMessage_ToolCallOutput:
			n += Tokens(p.ToolCallOutput.GetOutput()) + int64(len(p.ToolCallOutput.GetImages()))*imageTokens
		case *penguinv1.OmniMessage_ImageUrl:
			n += imageTokens
		case *penguinv1.OmniMessage_InlineData:
			n += imageTokens
		case *penguinv1.OmniMessage_InlineThinking:
			n += int64(len(p.InlineThinking.GetData()) / 4)
		}
	}
	return n
}

// TooLargeError reports a request whose input leaves less than
// MinOutputTokens of room in the model's context window.
type TooLargeError struct {
	Input, Window, Margin int64
}

// Error says how far over the window the request is and what to do.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request too large for the model's context window: about %d input tokens plus a %d-token safety margin leave less than %d tokens of output in a window of %d; compact the history",
		e.Input, e.Margin, MinOutputTokens, e.Window)
}

// OutputCap returns the output cap to send and the room the window leaves.
// want is the max_tokens asked for (zero: the provider's default, which is
// left alone, since the model's own output limit is unknown). room is zero
// when the window is unknown (under MinContextWindow), which also leaves
// want unclamped.
func OutputCap(want, window, input int64) (capTokens, room int64, err error) {
	if window < MinContextWindow {
		return want, 0, nil
	}
	margin := Margin(window)
	room = window - input - margin
	if room < MinOutputTokens {
		return 0, 0, &TooLargeError{Input: input, Window: window, Margin: margin}
	}
	if want <= 0 {
		return 0, room, nil
	}
	return min(want, room), room, nil
}
