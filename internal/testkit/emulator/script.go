package emulator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultChunkSize is the number of characters (Unicode code points) in each
// delta when a turn does not set ChunkSize. It is small so that even short
// scripted texts arrive as several deltas, which is what adapters must
// handle.
const DefaultChunkSize = 8

// Script is what the emulator answers: its turns are played one per request,
// in order (see [Turn.Match] for the exception). The zero value is a valid
// script with no turns, whose every request is answered as exhausted.
type Script struct {
	// Turns are the scripted answers.
	Turns []Turn `yaml:"turns" json:"turns"`
	// OnExhausted says what a request gets once no turn is left: an error
	// (the default) or the script's last turn again.
	OnExhausted Exhausted `yaml:"on_exhausted,omitempty" json:"on_exhausted,omitempty"`
}

// Exhausted is the policy for requests that arrive after the script ran out.
type Exhausted string

const (
	// ExhaustedError answers HTTP 500 in the provider's error format, with a
	// message saying the script is exhausted. It is the default because a
	// test that makes more requests than it scripted is usually wrong.
	ExhaustedError Exhausted = "error"
	// ExhaustedRepeatLast plays the script's last turn again, for demos and
	// load tests that send any number of identical requests.
	ExhaustedRepeatLast Exhausted = "repeat_last"
)

// Turn is one scripted model answer. Its content is either given by the
// shorthand fields (Thinking, Signature, RedactedThinking, Text, ToolCalls,
// played in that order) or, for full control over block order, by Blocks;
// not both. A turn with no content and no fault is an empty completion.
type Turn struct {
	// Name labels the turn in logs and errors; it is not sent.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Match, when set, reserves this turn for a request whose last message
	// (user text or tool result) contains Match as a substring. Such turns
	// are picked by content, in script order, before any turn without
	// Match; that lets concurrent agents each get their own answers.
	Match string `yaml:"match,omitempty" json:"match,omitempty"`
	// Repeat lets a turn with Match be played any number of times rather
	// than once: a request that a client or an engine may send again (a
	// run resumed on another replica repeats the request its last replica
	// had made) gets the same answer each time.
	Repeat bool `yaml:"repeat,omitempty" json:"repeat,omitempty"`

	// Thinking is the reasoning text: Anthropic thinking_delta events,
	// OpenAI reasoning_content (or reasoning) deltas.
	Thinking string `yaml:"thinking,omitempty" json:"thinking,omitempty"`
	// Signature closes the thinking block with a signature_delta
	// (Anthropic only; OpenAI has no signature).
	Signature string `yaml:"signature,omitempty" json:"signature,omitempty"`
	// RedactedThinking are the data payloads of redacted_thinking blocks
	// (Anthropic only).
	RedactedThinking []string `yaml:"redacted_thinking,omitempty" json:"redacted_thinking,omitempty"`
	// Text is the visible answer.
	Text string `yaml:"text,omitempty" json:"text,omitempty"`
	// ToolCalls are the tool calls; several are parallel calls.
	ToolCalls []ToolCall `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	// Blocks replaces the shorthand fields with an explicit block order.
	Blocks []Block `yaml:"blocks,omitempty" json:"blocks,omitempty"`

	// ReasoningField is the OpenAI delta field that carries thinking:
	// "reasoning_content" (DeepSeek, the default) or "reasoning" (vLLM,
	// OpenRouter).
	ReasoningField string `yaml:"reasoning_field,omitempty" json:"reasoning_field,omitempty"`
	// ContentParts sends OpenAI content as a list of typed parts, as
	// Mistral's thinking models do: thinking as {"type":"thinking",
	// "thinking":[{"type":"text","text":…}]} and text as {"type":"text",
	// "text":…}, instead of string deltas (and no reasoning field).
	ContentParts bool `yaml:"content_parts,omitempty" json:"content_parts,omitempty"`
	// NoUsage leaves usage out of the stream even when the client asks
	// for it, as some compatible servers do.
	NoUsage bool `yaml:"no_usage,omitempty" json:"no_usage,omitempty"`
	// InterleaveToolCalls sends the OpenAI deltas of parallel tool calls
	// round-robin by index instead of one call after the other, as some
	// compatible servers do.
	InterleaveToolCalls bool `yaml:"interleave_tool_calls,omitempty" json:"interleave_tool_calls,omitempty"`
	// StopReason overrides the finish reason, which is otherwise "tool
	// calls" when the turn has tool calls and "stop" when it does not.
	// The portable values stop, length, tool_calls and content_filter (or
	// their Anthropic names end_turn, max_tokens, tool_use, refusal) are
	// translated to each provider's word; any other value is sent as is.
	StopReason string `yaml:"stop_reason,omitempty" json:"stop_reason,omitempty"`
	// Usage is the token usage reported for the turn.
	Usage Usage `yaml:"usage,omitempty" json:"usage,omitempty"`

	// ChunkSize is the number of characters per delta (DefaultChunkSize
	// when zero).
	ChunkSize int `yaml:"chunk_size,omitempty" json:"chunk_size,omitempty"`
	// FirstDelay is the pause before the first delta (time to first token).
	FirstDelay time.Duration `yaml:"first_delay,omitempty" json:"first_delay,omitempty"`
	// Delay is the pause before every later delta.
	Delay time.Duration `yaml:"delay,omitempty" json:"delay,omitempty"`

	// Fault makes the turn fail; nil plays it normally.
	Fault *Fault `yaml:"fault,omitempty" json:"fault,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	// ID is the call id sent to the client. When empty, the emulator makes
	// up a unique one per request ("call_…" for OpenAI, "toolu_…" for
	// Anthropic). Set it to the function name to imitate providers that use
	// the name as the id.
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
	// Name is the function name.
	Name string `yaml:"name" json:"name"`
	// Arguments is the raw JSON argument string, streamed in chunks as is
	// ("{}" when empty). It is not validated, so a script can send broken
	// arguments on purpose.
	Arguments string `yaml:"arguments,omitempty" json:"arguments,omitempty"`
	// Signature is the call's thought signature (Gemini only).
	Signature string `yaml:"signature,omitempty" json:"signature,omitempty"`
}

// BlockType names the kind of a [Block].
type BlockType string

// Block types.
const (
	BlockThinking         BlockType = "thinking"
	BlockRedactedThinking BlockType = "redacted_thinking"
	BlockText             BlockType = "text"
	BlockToolCall         BlockType = "tool_call"
)

// Block is one content block of a turn written in explicit order.
type Block struct {
	// Type is the kind of block.
	Type BlockType `yaml:"type" json:"type"`
	// Text is the text of a thinking or text block.
	Text string `yaml:"text,omitempty" json:"text,omitempty"`
	// Signature closes a thinking block (Anthropic's signature, the
	// Responses API's encrypted content, Gemini's thought signature) or is
	// a tool call's thought signature (Gemini).
	Signature string `yaml:"signature,omitempty" json:"signature,omitempty"`
	// Data is the payload of a redacted_thinking block (Anthropic).
	Data string `yaml:"data,omitempty" json:"data,omitempty"`
	// ID, Name and Arguments describe a tool_call block, as in [ToolCall].
	ID        string `yaml:"id,omitempty" json:"id,omitempty"`
	Name      string `yaml:"name,omitempty" json:"name,omitempty"`
	Arguments string `yaml:"arguments,omitempty" json:"arguments,omitempty"`
}

// Usage is the token usage of a turn. Input counts only uncached input
// tokens, as Anthropic reports it; OpenAI's prompt_tokens is therefore
// Input+CacheRead+CacheWrite, with CacheRead as its cached_tokens.
type Usage struct {
	Input      int `yaml:"input,omitempty" json:"input,omitempty"`
	Output     int `yaml:"output,omitempty" json:"output,omitempty"`
	CacheRead  int `yaml:"cache_read,omitempty" json:"cache_read,omitempty"`
	CacheWrite int `yaml:"cache_write,omitempty" json:"cache_write,omitempty"`
	// Reasoning is OpenAI's completion_tokens_details.reasoning_tokens,
	// part of Output.
	Reasoning int `yaml:"reasoning,omitempty" json:"reasoning,omitempty"`
	// ReasoningApart reports reasoning tokens outside completion_tokens,
	// as xAI does: completion_tokens is Output-Reasoning and total_tokens
	// still counts them.
	ReasoningApart bool `yaml:"reasoning_apart,omitempty" json:"reasoning_apart,omitempty"`
}

// FaultKind names a way a turn fails.
type FaultKind string

// Fault kinds. "After N events" counts the SSE events already written
// (every data line for OpenAI, every event including ping for Anthropic);
// when the stream has fewer events the fault happens at its end.
const (
	// FaultHTTPError answers Status (default 500) with the provider's error
	// body and the Retry-After header, before any streaming.
	FaultHTTPError FaultKind = "http_error"
	// FaultAuth answers 401 in the provider's format, whatever the key.
	FaultAuth FaultKind = "auth"
	// FaultDrop closes the TCP connection after N events, without ending
	// the HTTP response: the client sees an unexpected EOF (or a reset
	// connection with Reset).
	FaultDrop FaultKind = "drop"
	// FaultMalformed sends an unparsable chunk after N events and ends the
	// response.
	FaultMalformed FaultKind = "malformed"
	// FaultStreamError sends the provider's in-stream error event after N
	// events and ends the response.
	FaultStreamError FaultKind = "stream_error"
	// FaultTruncate ends the response cleanly after N events, without the
	// provider's end marker ([DONE] or message_stop).
	FaultTruncate FaultKind = "truncate"
	// FaultStall stops sending after N events for Duration (until the
	// client or the server gives up when zero), keeping the connection
	// open, then carries on.
	FaultStall FaultKind = "stall"
	// FaultEmpty answers a completion with no content at all.
	FaultEmpty FaultKind = "empty"
)

// Fault is how a turn fails.
type Fault struct {
	// Kind is the failure.
	Kind FaultKind `yaml:"kind" json:"kind"`
	// Status is the HTTP status of an http_error (default 500).
	Status int `yaml:"status,omitempty" json:"status,omitempty"`
	// Message, Type and Code fill the provider's error body (error.message,
	// error.type, and OpenAI's error.code); sensible values per status are
	// used when empty.
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	Type    string `yaml:"type,omitempty" json:"type,omitempty"`
	Code    string `yaml:"code,omitempty" json:"code,omitempty"`
	// Body, when set, is sent verbatim instead of the generated error body
	// (http_error, auth) or as the broken chunk's data (malformed).
	Body string `yaml:"body,omitempty" json:"body,omitempty"`
	// Comment is sent as an SSE comment line (": …") right before a
	// stream_error's event, as OpenRouter sends ": OPENROUTER PROCESSING".
	Comment string `yaml:"comment,omitempty" json:"comment,omitempty"`
	// RetryAfter is sent verbatim as the Retry-After header of an
	// http_error: seconds ("2") or an HTTP date.
	RetryAfter string `yaml:"retry_after,omitempty" json:"retry_after,omitempty"`
	// After is the number of events written before drop, malformed,
	// stream_error, truncate and stall.
	After int `yaml:"after,omitempty" json:"after,omitempty"`
	// Duration is the length of a stall; zero stalls until the client or
	// the server gives up.
	Duration time.Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	// Reset makes a drop send a TCP reset instead of a clean close.
	Reset bool `yaml:"reset,omitempty" json:"reset,omitempty"`
}

// ParseScript parses a YAML (or JSON) script and validates it. Unknown keys
// are errors, so a typo does not silently change what a test plays.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return Script{}, errors.New("emulator: script is empty")
		}
		return Script{}, fmt.Errorf("emulator: parse script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, err
	}
	return s, nil
}

// LoadScript reads and parses the script file at path.
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("emulator: read script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate reports every problem of the script, naming the turn at fault.
func (s Script) Validate() error {
	var errs []error
	switch s.OnExhausted {
	case "", ExhaustedError, ExhaustedRepeatLast:
	default:
		errs = append(errs, fmt.Errorf("emulator: on_exhausted %q: want %q or %q", s.OnExhausted, ExhaustedError, ExhaustedRepeatLast))
	}
	for i := range s.Turns {
		if err := s.Turns[i].validate(); err != nil {
			errs = append(errs, fmt.Errorf("emulator: %s: %w", turnLabel(i, s.Turns[i].Name), err))
		}
	}
	return errors.Join(errs...)
}

func turnLabel(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("turns[%d]", i)
	}
	return fmt.Sprintf("turns[%d] (%s)", i, name)
}

func (t *Turn) validate() error {
	var errs []error
	shorthand := t.Thinking != "" || t.Signature != "" || len(t.RedactedThinking) > 0 || t.Text != "" || len(t.ToolCalls) > 0
	if shorthand && len(t.Blocks) > 0 {
		errs = append(errs, errors.New("blocks cannot be combined with thinking, signature, redacted_thinking, text or tool_calls"))
	}
	if t.Repeat && t.Match == "" {
		errs = append(errs, errors.New("repeat needs match: a turn without match is played in order, once"))
	}
	for i, tc := range t.ToolCalls {
		if tc.Name == "" {
			errs = append(errs, fmt.Errorf("tool_calls[%d]: name is empty", i))
		}
	}
	for i, b := range t.Blocks {
		switch b.Type {
		case BlockThinking, BlockText, BlockRedactedThinking:
		case BlockToolCall:
			if b.Name == "" {
				errs = append(errs, fmt.Errorf("blocks[%d]: tool_call name is empty", i))
			}
		default:
			errs = append(errs, fmt.Errorf("blocks[%d]: type %q: want thinking, redacted_thinking, text or tool_call", i, b.Type))
		}
	}
	switch t.ReasoningField {
	case "", "reasoning_content", "reasoning":
	default:
		errs = append(errs, fmt.Errorf("reasoning_field %q: want reasoning_content or reasoning", t.ReasoningField))
	}
	if t.ChunkSize < 0 {
		errs = append(errs, fmt.Errorf("chunk_size %d is negative", t.ChunkSize))
	}
	if t.FirstDelay < 0 || t.Delay < 0 {
		errs = append(errs, errors.New("first_delay and delay cannot be negative"))
	}
	u := t.Usage
	if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.Reasoning < 0 {
		errs = append(errs, errors.New("usage counts cannot be negative"))
	}
	if t.Fault != nil {
		if err := t.Fault.validate(); err != nil {
			errs = append(errs, fmt.Errorf("fault: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (f *Fault) validate() error {
	switch f.Kind {
	case FaultHTTPError:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("status %d: want 400-599", f.Status)
		}
	case FaultAuth, FaultEmpty:
	case FaultDrop, FaultMalformed, FaultStreamError, FaultTruncate, FaultStall:
		if f.After < 0 {
			return fmt.Errorf("after %d is negative", f.After)
		}
		if f.Duration < 0 {
			return fmt.Errorf("duration %s is negative", f.Duration)
		}
	case "":
		return errors.New("kind is empty")
	default:
		return fmt.Errorf("kind %q: want http_error, auth, drop, malformed, stream_error, truncate, stall or empty", f.Kind)
	}
	return nil
}

// blocks returns the turn's content in play order, expanding the shorthand
// fields and defaulting empty tool arguments to "{}".
func (t *Turn) blocks() []Block {
	var out []Block
	if len(t.Blocks) > 0 {
		out = make([]Block, len(t.Blocks))
		copy(out, t.Blocks)
	} else {
		if t.Thinking != "" || t.Signature != "" {
			out = append(out, Block{Type: BlockThinking, Text: t.Thinking, Signature: t.Signature})
		}
		for _, d := range t.RedactedThinking {
			out = append(out, Block{Type: BlockRedactedThinking, Data: d})
		}
		if t.Text != "" {
			out = append(out, Block{Type: BlockText, Text: t.Text})
		}
		for _, tc := range t.ToolCalls {
			out = append(out, Block{Type: BlockToolCall, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Signature: tc.Signature})
		}
	}
	for i := range out {
		if out[i].Type == BlockToolCall && out[i].Arguments == "" {
			out[i].Arguments = "{}"
		}
	}
	return out
}

// portableStop maps a scripted stop reason onto the portable vocabulary
// (stop, length, tool_calls, content_filter); unknown values come back as
// they are with ok false.
func portableStop(reason string) (string, bool) {
	switch reason {
	case "stop", "end_turn":
		return "stop", true
	case "length", "max_tokens":
		return "length", true
	case "tool_calls", "tool_use":
		return "tool_calls", true
	case "content_filter", "refusal":
		return "content_filter", true
	}
	return reason, false
}
