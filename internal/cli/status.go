package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/spinner"
)

// statusText is the line that says what a task is doing: a spinner frame,
// the activity, the time since the task started and its tokens; during a
// retry wait, the countdown to the next attempt. chat and run both show it.
func statusText(a Activity, started time.Time, frame string, aborting bool, color bool) string {
	style := func(s, text string) string {
		if !color {
			return text
		}
		return s + text + styleReset
	}
	if a.What == "retrying" {
		left := max(time.Until(a.RetryAt), 0).Round(time.Second)
		return style(styleYellow, fmt.Sprintf("⟳ %s; retrying in %s (attempt %d) · Ctrl-C to give up", a.Failure, left, a.Attempt))
	}
	what := a.What
	switch {
	case aborting:
		what = "aborting"
	case what == "":
		what = "working"
	}
	line := fmt.Sprintf("%s %s · %s", frame, what, time.Since(started).Truncate(time.Second))
	if a.Tokens > 0 {
		line += " · " + count(a.Tokens) + " tokens"
	}
	return style(styleDim, line+" · Ctrl-C to abort")
}

// spinnerFrames are the frames of both spinners.
var spinnerFrames = spinner.Dot

// StatusLine keeps one status line under a task's output on a terminal,
// for `penguin run`: output written through it clears the line first and
// draws it again after each whole line, so the two never mix; a ticker
// redraws it to count the time. The chat has Bubble Tea for this.
type StatusLine struct {
	mu     sync.Mutex
	out    io.Writer
	text   func() string
	shown  bool
	paused bool
	// midLine is set while the last output did not end a line: the
	// status waits for the line's end.
	midLine bool
	stop    chan struct{}
	done    chan struct{}
}

// NewStatusLine returns a status line over out; Start sets its text.
func NewStatusLine(out io.Writer) *StatusLine { return &StatusLine{out: out} }

// Write writes output above the status line.
func (s *StatusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	n, err := s.out.Write(p)
	if len(p) > 0 {
		s.midLine = p[len(p)-1] != '\n'
	}
	s.drawLocked()
	return n, err
}

// start shows text (read under the caller's lock, see RunTask) and redraws
// it every tick until stop.
func (s *StatusLine) start(text func() string, tick time.Duration) {
	s.mu.Lock()
	s.text, s.stop, s.done = text, make(chan struct{}), make(chan struct{})
	s.drawLocked()
	s.mu.Unlock()
	go func() {
		defer close(s.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.mu.Lock()
				s.clearLocked()
				s.drawLocked()
				s.mu.Unlock()
			}
		}
	}()
}

// end removes the status line for good.
func (s *StatusLine) end() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	s.clearLocked()
	s.text = nil
	s.mu.Unlock()
}

// pause hides the line while something else uses the terminal (an
// approval question); resume shows it again.
func (s *StatusLine) pause() {
	s.mu.Lock()
	s.clearLocked()
	s.paused = true
	s.mu.Unlock()
}

func (s *StatusLine) resume() {
	s.mu.Lock()
	s.paused = false
	s.drawLocked()
	s.mu.Unlock()
}

func (s *StatusLine) clearLocked() {
	if s.shown {
		fmt.Fprint(s.out, "\r\x1b[2K")
		s.shown = false
	}
}

func (s *StatusLine) drawLocked() {
	if s.text == nil || s.paused || s.midLine {
		return
	}
	fmt.Fprint(s.out, strings.ReplaceAll(s.text(), "\n", " "))
	s.shown = true
}
