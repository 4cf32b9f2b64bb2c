package framing

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/environment/redact"
)

// emitter is the tool.Output of one call. It turns raw writes into valid
// UTF-8, redacts vault values, enforces the output cap, archives what the
// cap hides, and sends what remains as deltas, keeping the joined deltas
// for the complete message.
type emitter struct {
	mu      sync.Mutex
	callID  string
	send    Sender
	sendErr error
	closed  bool

	partialRune []byte // an incomplete UTF-8 sequence awaiting its next bytes
	redactor    *redact.Stream
	vault       *redact.Vault

	limit     int // visible cap in characters; zero means none
	shown     int // characters sent as content
	hidden    int // characters cut by the cap
	truncated bool
	// parts are the deltas sent so far; their concatenation is the
	// complete output. They are joined once at the end, which costs one
	// copy instead of the many of a growing buffer.
	parts []string
	size  int

	archive  *archive
	archives *Archives
	log      *slog.Logger
}

func newEmitter(callID string, send Sender, opts Options) *emitter {
	limit := opts.Limits.MaxOutput
	if limit <= 0 || (opts.Ceiling > 0 && opts.Ceiling < limit) {
		limit = opts.Ceiling
	}
	if limit < 0 {
		limit = 0
	}
	e := &emitter{
		callID:   callID,
		send:     send,
		redactor: opts.Vault.NewStream(),
		vault:    opts.Vault,
		limit:    limit,
		archives: opts.Archives,
		log:      opts.Logger,
	}
	if limit > 0 && opts.Archives != nil {
		e.archive = newArchive(opts.Archives.budget())
	}
	return e
}

// sendLocked sends one frame unless the caller is already gone.
func (e *emitter) sendLocked(m *penguinv1.OmniMessage) {
	if e.sendErr != nil {
		return
	}
	e.sendErr = e.send(m)
}

func (e *emitter) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sendLocked(partial(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, e.callID, "", nil, 0))
}

// Write implements tool.Output. It never fails.
func (e *emitter) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || len(p) == 0 {
		return len(p), nil
	}
	var data []byte
	if len(e.partialRune) > 0 {
		data = append(e.partialRune, p...)
		e.partialRune = nil
	} else {
		data = p
	}
	cut := completePrefix(data)
	if cut < len(data) {
		e.partialRune = append([]byte(nil), data[cut:]...)
	}
	if e.truncated && e.vault == nil && e.consumeHiddenLocked(data[:cut]) {
		return len(p), nil
	}
	e.consumeLocked(e.redactor.Write(validUTF8(data[:cut])))
	return len(p), nil
}

// consumeHiddenLocked takes output past the cap straight from the bytes it
// was given, where no secret is to be redacted: nothing of it is sent or
// kept but its copy in the archive and its count of characters, so it is
// neither converted to a string nor scanned twice. This is the bulk of a
// command that prints a lot. It reports false, having done nothing, when b
// is not valid UTF-8, which consumeLocked then repairs.
func (e *emitter) consumeHiddenLocked(b []byte) bool {
	n, ok := validRunes(b)
	if !ok {
		return false
	}
	if e.archive != nil {
		e.archive.addBytes(b)
	}
	e.hidden += n
	return true
}

// validRunes reports whether b is valid UTF-8 and how many characters it
// holds, in one pass that takes ASCII text a word at a time.
func validRunes(b []byte) (int, bool) {
	const ascii = 0x8080808080808080
	n := 0
	for len(b) > 0 {
		if len(b) >= 32 && (binary.LittleEndian.Uint64(b)|binary.LittleEndian.Uint64(b[8:])|
			binary.LittleEndian.Uint64(b[16:])|binary.LittleEndian.Uint64(b[24:]))&ascii == 0 {
			b, n = b[32:], n+32
			continue
		}
		if b[0] < utf8.RuneSelf {
			b, n = b[1:], n+1
			continue
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			return 0, false
		}
		b, n = b[size:], n+1
	}
	return n, true
}

// WriteString implements tool.Output. It never fails.
func (e *emitter) WriteString(s string) (int, error) {
	if len(s) == 0 {
		return 0, nil
	}
	e.mu.Lock()
	if len(e.partialRune) == 0 && !e.closed {
		defer e.mu.Unlock()
		e.consumeLocked(e.redactor.Write(validString(s)))
		return len(s), nil
	}
	e.mu.Unlock()
	return e.Write([]byte(s))
}

// completePrefix returns the length of the longest prefix of b that does
// not end inside a UTF-8 sequence that more bytes could complete.
func completePrefix(b []byte) int {
	n := len(b)
	for i := 1; i <= utf8.UTFMax-1 && i <= n; i++ {
		c := b[n-i]
		if c < utf8.RuneSelf {
			return n // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[n-i:]) {
				return n
			}
			return n - i
		}
	}
	return n
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// consumeLocked archives text and sends the part the cap lets through.
func (e *emitter) consumeLocked(text string) {
	if text == "" {
		return
	}
	if e.archive != nil {
		e.archive.add(text)
	}
	if e.limit <= 0 {
		e.emitLocked(text)
		return
	}
	if e.truncated {
		e.hidden += utf8.RuneCountInString(text)
		return
	}
	room := e.limit - e.shown
	n := utf8.RuneCountInString(text)
	if n <= room {
		e.shown += n
		e.emitLocked(text)
		return
	}
	head := ""
	if room > 0 {
		count := 0
		for i := range text {
			if count == room {
				head = text[:i]
				break
			}
			count++
		}
	}
	e.shown += room
	e.hidden += n - room
	e.truncated = true
	e.emitLocked(head)
}

// emitLocked sends one content delta and records it.
func (e *emitter) emitLocked(text string) {
	if text == "" {
		return
	}
	e.record(text)
	e.sendLocked(partial(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, e.callID, text, nil, 0))
}

// record remembers a sent delta.
func (e *emitter) record(text string) {
	e.parts = append(e.parts, text)
	e.size += len(text)
}

// endsWithNewline reports whether the output so far ends a line.
func (e *emitter) endsWithNewline() bool {
	return len(e.parts) > 0 && strings.HasSuffix(e.parts[len(e.parts)-1], "\n")
}

// finish closes the call: it flushes held-back text, appends the error
// text, "[no output]", the truncation marker and the notes, sends them with
// the images as the last delta, then the stop and the complete message.
func (e *emitter) finish(f finish) *penguinv1.ToolCallOutput {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.partialRune) > 0 {
		rest := validUTF8(e.partialRune)
		e.partialRune = nil
		e.consumeLocked(e.redactor.Write(rest))
	}
	e.consumeLocked(e.redactor.Flush())
	if f.errText != "" {
		text := e.vault.String(f.errText)
		if e.size > 0 && !e.endsWithNewline() {
			text = "\n" + text
		}
		e.consumeLocked(text)
	}
	// "[no output]" rides the last delta with the notes: one message
	// fewer for every command that printed nothing.
	empty := ""
	if e.size == 0 && !e.truncated {
		empty = "[no output]"
	}

	var notes []string
	if e.truncated {
		notes = append(notes, e.truncationNote())
	}
	notes = append(notes, f.result.Note)
	notes = append(notes, f.notes...)
	if e.archive != nil {
		e.archive.release()
		e.archive = nil
	}
	tail := empty + e.vault.String(joinNotes(notes))
	images := f.result.Images
	if tail != "" || len(images) > 0 {
		e.record(tail)
		// Each frame its own slice: a caller in this process may be
		// handed the frames themselves (see grpcserver.HandOver).
		e.sendLocked(partial(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, e.callID, tail, slices.Clone(images), 0))
	}
	e.sendLocked(partial(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, e.callID, "", nil, f.stop))
	final := omni.ToolCallOutput(e.callID, strings.Join(e.parts, ""), f.stop, images...)
	e.parts = nil
	e.sendLocked(final)
	e.closed = true
	return final.GetToolCallOutput()
}

// truncationNote says how much was cut and where the full text is.
func (e *emitter) truncationNote() string {
	total := e.shown + e.hidden
	msg := fmt.Sprintf("[output truncated: showing the first %d of %d characters", e.shown, total)
	if e.archive == nil {
		return msg + "]"
	}
	path, err := e.archives.save(e.archive, e.callID)
	if err != nil {
		if e.log != nil {
			e.log.Warn("saving truncated tool output failed", "tool_call_id", e.callID, "error", err)
		}
		return msg + "; saving the full output failed (" + errorCode(err) + ")]"
	}
	return msg + "; the full output is saved at " + path + "]"
}
