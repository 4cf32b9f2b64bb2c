// Package sse reads a server-sent event stream, as the provider APIs send
// them: "event:" and "data:" fields, several data lines joined, comment
// lines (": OPENROUTER PROCESSING", keep-alives) skipped, an event
// dispatched at each blank line.
//
// It is written here rather than taken from a client library because the
// libraries get the corners that matter to a gateway wrong: go-openai
// collects every non-data line into an error buffer, so a provider's error
// event that follows a comment line is lost behind a JSON parse error; and
// the adapters of three wire formats (Chat Completions, the Responses API,
// Gemini) need one reader that keeps named events, bounds memory, and
// leaves classification to them.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxEventBytes bounds one event; a larger one is an error rather than
// unbounded memory.
const MaxEventBytes = 32 << 20

// ErrTooLarge is returned for an event over MaxEventBytes.
var ErrTooLarge = errors.New("sse: event larger than the limit")

// Event is one dispatched event.
type Event struct {
	// Name is the "event:" field; empty for the default "message".
	Name string
	// Data is the data lines joined with newlines. It is valid until the
	// next call of Next.
	Data []byte
}

// Reader reads events from a stream. It is used by one goroutine.
type Reader struct {
	br   *bufio.Reader
	data bytes.Buffer
	line bytes.Buffer
	name string
	has  bool // a data field was seen since the last dispatch
}

// readBuffer is the size of a Reader's read buffer. A read of an HTTP
// body returns at most what one TLS record holds (16 KiB), and a longer
// line is gathered piece by piece anyway (readLine), so a larger buffer
// only costs: at 64 KiB, the two streams of a task's two model turns
// were an eighth of the bytes the server allocated per task.
const readBuffer = 16 << 10

// NewReader returns a Reader of r; Release hands it back when the
// stream is done.
func NewReader(r io.Reader) *Reader {
	if x, _ := readers.Get().(*Reader); x != nil {
		x.br.Reset(r)
		return x
	}
	return &Reader{br: bufio.NewReaderSize(r, readBuffer)}
}

// readers keeps released Readers for the next streams: a new one is its
// 16 KiB read buffer and the growth of its line and data buffers, at
// every model request (a tenth of the bytes a task allocated).
var readers sync.Pool

// maxPooled is the largest line or data buffer a released Reader keeps:
// one that held an exceptional event is left to the collector.
const maxPooled = 256 << 10

// Release ends the use of r: its buffers serve another stream. Neither r
// nor an Event it returned may be used after.
func (r *Reader) Release() {
	if r.line.Cap() > maxPooled || r.data.Cap() > maxPooled {
		return
	}
	r.br.Reset(nil)
	r.line.Reset()
	r.data.Reset()
	r.name, r.has = "", false
	readers.Put(r)
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// after dispatching a last event that had data but no closing blank line
// (some servers end that way); any other read error is returned as is.
func (r *Reader) Next() (Event, error) {
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && r.has {
				return r.dispatch(), nil
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if r.has {
				return r.dispatch(), nil
			}
			r.name = ""
			continue
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found && len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if r.has {
				r.data.WriteByte('\n')
			}
			if r.data.Len()+len(value) > MaxEventBytes {
				return Event{}, ErrTooLarge
			}
			r.data.Write(value)
			r.has = true
		case "event":
			r.name = string(value)
		}
		// id, retry and unknown fields are not used by any provider API.
	}
}

// dispatch ends the event under way. Its Data is the Reader's buffer,
// not a copy (valid until the next call of Next, as Event says): every
// caller decodes it at once, and a copy was a tenth of what a model turn
// allocated.
func (r *Reader) dispatch() Event {
	ev := Event{Name: r.name, Data: r.data.Bytes()}
	r.data.Reset()
	r.name = ""
	r.has = false
	return ev
}

// readLine returns the next line without its line ending ("\n" or
// "\r\n"), bounded by MaxEventBytes.
func (r *Reader) readLine() ([]byte, error) {
	r.line.Reset()
	for {
		chunk, err := r.br.ReadSlice('\n')
		if r.line.Len()+len(chunk) > MaxEventBytes {
			return nil, ErrTooLarge
		}
		r.line.Write(chunk)
		switch {
		case err == nil:
			b := bytes.TrimSuffix(r.line.Bytes(), []byte("\n"))
			return bytes.TrimSuffix(b, []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && r.line.Len() > 0:
			// A last line without its newline: take it, then report EOF
			// on the next read.
			return bytes.TrimSuffix(r.line.Bytes(), []byte("\r")), nil
		default:
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("sse: %w", err)
		}
	}
}
