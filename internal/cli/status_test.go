package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// screen applies what a terminal does with the status line's erase
// sequence ("\r\x1b[2K" empties the current line) and returns the text
// left.
func screen(raw string) string {
	var lines []string
	cur := ""
	for len(raw) > 0 {
		switch {
		case strings.HasPrefix(raw, "\r\x1b[2K"):
			cur, raw = "", raw[len("\r\x1b[2K"):]
		case raw[0] == '\n':
			lines, cur, raw = append(lines, cur), "", raw[1:]
		default:
			cur, raw = cur+raw[:1], raw[1:]
		}
	}
	return strings.Join(append(lines, cur), "\n")
}

// TestStatusLineKeepsOutputApart: output written through the status line
// is never mixed with it; the line waits for a partial line's end, hides
// while paused, and is gone at the end.
func TestStatusLineKeepsOutputApart(t *testing.T) {
	var out bytes.Buffer
	s := NewStatusLine(&out)
	s.start(func() string { return "⠋ working" }, time.Hour)
	if got := screen(out.String()); got != "⠋ working" {
		t.Fatalf("after start the screen is %q", got)
	}
	_, _ = s.Write([]byte("line one\n"))
	if got := screen(out.String()); got != "line one\n⠋ working" {
		t.Fatalf("after a line the screen is %q", got)
	}
	_, _ = s.Write([]byte("partial"))
	if got := screen(out.String()); got != "line one\npartial" {
		t.Fatalf("after a partial line the screen is %q", got)
	}
	_, _ = s.Write([]byte(" end\n"))
	s.pause()
	_, _ = s.Write([]byte("Allow? [Y/n] y\n"))
	if got := screen(out.String()); got != "line one\npartial end\nAllow? [Y/n] y\n" {
		t.Fatalf("while paused the screen is %q", got)
	}
	s.resume()
	s.end()
	if got := screen(out.String()); got != "line one\npartial end\nAllow? [Y/n] y\n" {
		t.Fatalf("after the end the screen is %q", got)
	}
}
