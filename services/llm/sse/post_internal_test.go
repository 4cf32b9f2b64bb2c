package sse

import (
	"mime"
	"testing"
)

// TestMediaTypeAsParsed checks that the shortcut for event streams
// decides as mime.ParseMediaType did: a stream (or no type) wherever it
// found one, and the same type otherwise.
func TestMediaTypeAsParsed(t *testing.T) {
	for _, ct := range []string{"", "text/event-stream", "text/event-stream; charset=utf-8", "text/event-stream;charset=UTF-8",
		"text/event-stream ; charset=utf-8", "text/event-stream\t;x=y", "text/event-stream; charset", "text/event-stream;",
		"text/event-stream ", "TEXT/EVENT-STREAM", "Text/Event-Stream; charset=utf-8", "text/event-streamx", "text/event-stream/x",
		"text/event-stream, application/json", "application/json", "application/json; charset=utf-8", "text/plain", "text/html;",
		"garbage", ";", "text/", "text/event", " text/event-stream"} {
		want, _, _ := mime.ParseMediaType(ct)
		got := mediaType(ct)
		stream := func(mt string) bool { return mt == "" || mt == eventStream }
		if stream(got) != stream(want) || (!stream(want) && got != want) {
			t.Errorf("mediaType(%q) = %q, mime.ParseMediaType: %q", ct, got, want)
		}
	}
}
