package sse_test

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/services/llm/sse"
)

func TestEvents(t *testing.T) {
	in := ": OPENROUTER PROCESSING\n\n" +
		"data: {\"a\":1}\n\n" +
		"event: response.created\r\ndata: {\"b\":\r\ndata: 2}\r\n\r\n" +
		": keep-alive\n" +
		"data:{\"error\":{\"message\":\"boom\"}}\n\n" +
		"data: [DONE]"
	r := sse.NewReader(strings.NewReader(in))
	want := []sse.Event{
		{Data: []byte(`{"a":1}`)},
		{Name: "response.created", Data: []byte("{\"b\":\n2}")},
		{Data: []byte(`{"error":{"message":"boom"}}`)},
		{Data: []byte(`[DONE]`)},
	}
	for i, w := range want {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Name != w.Name || string(ev.Data) != string(w.Data) {
			t.Fatalf("event %d = %q %q, want %q %q", i, ev.Name, ev.Data, w.Name, w.Data)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end = %v", err)
	}
}

func TestLongLinesAndLimit(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	r := sse.NewReader(strings.NewReader("data: " + long + "\n\n"))
	ev, err := r.Next()
	if err != nil || string(ev.Data) != long {
		t.Fatalf("long event: %v (%d bytes)", err, len(ev.Data))
	}
	huge := strings.NewReader("data: " + strings.Repeat("y", sse.MaxEventBytes+10) + "\n\n")
	if _, err := sse.NewReader(huge).Next(); !errors.Is(err, sse.ErrTooLarge) {
		t.Fatalf("huge event = %v", err)
	}
}

type cut struct{ r io.Reader }

func (c cut) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func TestReadErrorsPassThrough(t *testing.T) {
	r := sse.NewReader(cut{strings.NewReader("data: {\"a\"")})
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut stream = %v", err)
	}
}

// TestReaderIsSmall checks what a stream's reader costs before it reads
// anything: its buffer, 16 KiB, not the 64 KiB it used to be.
func TestReaderIsSmall(t *testing.T) {
	const readers = 100
	keep := make([]*sse.Reader, 0, readers)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range readers {
		keep = append(keep, sse.NewReader(strings.NewReader("")))
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / readers; per > 20<<10 {
		t.Errorf("NewReader allocated %d bytes, want about 16 KiB", per)
	}
	runtime.KeepAlive(keep)
}

// TestReleasedReaderIsReused checks that a released Reader serves the next
// stream, without the allocations of a new one and with nothing left of
// the stream it read before (here an event cut off mid-way).
func TestReleasedReaderIsReused(t *testing.T) {
	r := sse.NewReader(strings.NewReader("event: half\ndata: {\"a\":"))
	r.Release()
	r = sse.NewReader(strings.NewReader("data: {\"b\":2}\n\n"))
	ev, err := r.Next()
	if err != nil || ev.Name != "" || string(ev.Data) != `{"b":2}` {
		t.Fatalf("the reused reader's first event = %q %q, %v", ev.Name, ev.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %v", err)
	}
	r.Release()
	// A collection may empty the pool once in a while, and the race
	// detector drops a quarter of what is put in it: on average, far less
	// than the three allocations of a new Reader.
	src := strings.NewReader("")
	if n := testing.AllocsPerRun(100, func() { src.Reset(""); sse.NewReader(src).Release() }); n >= 1.5 {
		t.Errorf("a Reader got after a Release allocates %v times", n)
	}
}

// TestNextAllocatesNothing: an event's Data is the Reader's buffer, valid
// until the next call, not a copy per event.
func TestNextAllocatesNothing(t *testing.T) {
	r := sse.NewReader(strings.NewReader(strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n", 200)))
	if n := testing.AllocsPerRun(100, func() {
		if ev, err := r.Next(); err != nil || len(ev.Data) == 0 {
			t.Fatalf("Next = %q, %v", ev.Data, err)
		}
	}); n != 0 {
		t.Errorf("Next allocates %v times per event", n)
	}
}
