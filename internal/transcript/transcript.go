// Package transcript converts OmniMessages to and from the JSONL trace format
// (docs/trace-format.md describes it with examples). The format is the one
// PenguinHarness, the TypeScript harness Penguin was modelled on, writes:
// a session exported by Penguin reads, line for line, like a trace written
// by that harness, and such a trace can be imported.
//
// One line is one envelope:
//
//	{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","origin":[…],"payload":{"type":"text","role":"user","text":"…"}}
//
// with the format's field names, key order and values: the envelope type
// is session_meta, model_msg or event_msg; enums are lower-case words
// (roles "user" and "assistant", stop reasons "completed", "failed",
// "aborted", "timeout", "malformed" and "auth", decisions "allow", "deny" and
// "forbidden", and so on); optional fields are omitted when empty. The
// session_meta payload has no "type" key.
//
// Two fields hold JSON inside the protobuf messages and are written as JSON
// values, not strings: a message's fidelity (opaque provider data, a JSON
// object) and a tool definition's parameters (a JSON Schema). They are
// copied into the line with insignificant whitespace removed and nothing
// else changed (key order, number spelling and string escapes stay as the
// provider wrote them), and read back as the exact bytes of the line.
//
// Timestamps are written with millisecond precision in UTC, as
// JavaScript's Date.toISOString writes them; reading accepts any RFC 3339
// time. A round trip is therefore exact for messages whose timestamps are
// whole milliseconds and whose JSON fields are compact.
package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Envelope types.
const (
	TypeSessionMeta = "session_meta"
	TypeModelMsg    = "model_msg"
	TypeEventMsg    = "event_msg"
)

// timeLayout is the format's timestamp layout (JavaScript's
// Date.prototype.toISOString).
const timeLayout = "2006-01-02T15:04:05.000Z"

// envelope is the outer object of a trace line. Field order is the
// format's key order.
type envelope struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Origin    []string        `json:"origin,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// Marshal returns m as one trace line, without the trailing newline. It
// fails for a message without a timestamp or payload, for a required enum
// left unspecified (a text's role, a request_end's status, ...) and for
// fidelity or tool parameters that are not valid JSON.
func Marshal(m *penguinv1.OmniMessage) ([]byte, error) {
	if m == nil {
		return nil, errors.New("trace: nil message")
	}
	if m.GetTimestamp() == nil {
		return nil, errors.New("trace: message has no timestamp")
	}
	if err := m.GetTimestamp().CheckValid(); err != nil {
		return nil, fmt.Errorf("trace: bad timestamp: %w", err)
	}
	typ, payload, err := encodePayload(m)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	raw, err := encodeJSON(payload)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	line, err := encodeJSON(envelope{
		Timestamp: m.GetTimestamp().AsTime().UTC().Format(timeLayout),
		Type:      typ,
		Origin:    m.GetOrigin(),
		Payload:   raw,
	})
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return line, nil
}

// encodeJSON marshals v without escaping <, > and & (JSON.stringify does
// not), and without the encoder's trailing newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Unmarshal parses one trace line. Fields the format no longer has (such
// as session_meta's legacy "tools" and "thinking_level")
// and any other unknown fields are ignored; a missing or malformed
// timestamp, an unknown envelope or payload type, a payload that does not
// belong to its envelope type, and an enum value the format does not
// define are errors.
func Unmarshal(line []byte) (*penguinv1.OmniMessage, error) {
	var env struct {
		Timestamp *string         `json:"timestamp"`
		Type      string          `json:"type"`
		Origin    []string        `json:"origin"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("trace: malformed line: %w", err)
	}
	if env.Timestamp == nil {
		return nil, errors.New("trace: line has no timestamp")
	}
	ts, err := time.Parse(time.RFC3339Nano, *env.Timestamp)
	if err != nil {
		return nil, fmt.Errorf("trace: bad timestamp %q: %w", *env.Timestamp, err)
	}
	if len(env.Payload) == 0 || bytes.Equal(env.Payload, []byte("null")) {
		return nil, errors.New("trace: line has no payload")
	}
	m := &penguinv1.OmniMessage{Timestamp: timestamppb.New(ts), Origin: env.Origin}
	if err := decodePayload(env.Type, env.Payload, m); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return m, nil
}

// WriteJSONL writes msgs to w as a trace: one line per message, each
// terminated by a newline. A trace file should hold only what a session log
// holds (session_meta, complete messages and events, without origin); the
// caller chooses the messages, and WriteJSONL writes them as given. It
// stops at the first message that cannot be encoded, naming its index.
func WriteJSONL(w io.Writer, msgs []*penguinv1.OmniMessage) error {
	bw := bufio.NewWriter(w)
	for i, m := range msgs {
		line, err := Marshal(m)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads a trace. Blank lines are skipped. A last line that has no
// newline and does not parse is a record torn by a crash mid-write, and is
// ignored, as every reader of the format ignores it; any other line that does not parse
// is an error naming its line number, so that a damaged file is not
// imported with history silently missing.
func ReadJSONL(r io.Reader) ([]*penguinv1.OmniMessage, error) {
	br := bufio.NewReader(r)
	var out []*penguinv1.OmniMessage
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("trace: read line %d: %w", n, err)
		}
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 {
			m, perr := Unmarshal(trimmed)
			switch {
			case perr == nil:
				out = append(out, m)
			case !complete:
				// A torn last line: dropped.
			default:
				return nil, fmt.Errorf("line %d: %w", n, perr)
			}
		}
		if err != nil { // io.EOF
			return out, nil
		}
	}
}

// rawJSON checks that b is a JSON value of the wanted shape and returns it
// with insignificant whitespace removed.
func rawJSON(what string, b []byte, wantObject bool) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", what, err)
	}
	if wantObject && (buf.Len() == 0 || buf.Bytes()[0] != '{') {
		return nil, fmt.Errorf("%s is not a JSON object", what)
	}
	return buf.Bytes(), nil
}

// jsonBytes returns the bytes of a raw JSON field as read from a line, or
// nil when the field is absent or null.
func jsonBytes(r json.RawMessage) []byte {
	if len(r) == 0 || bytes.Equal(r, []byte("null")) {
		return nil
	}
	return bytes.Clone(r)
}

// fidelity encodes an optional fidelity field.
func fidelity(b []byte) (json.RawMessage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return rawJSON("fidelity", b, true)
}

// contextWindow is session_meta's model_context_window, which the format
// allows as a number or a string of digits.
type contextWindow int64

// UnmarshalJSON accepts a number or a string of digits.
func (c *contextWindow) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	if s == "" || s == "null" {
		*c = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("model_context_window %s is not a whole number", b)
		}
		n = int64(f)
	}
	*c = contextWindow(n)
	return nil
}
