package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// State is where a command session is in its life.
type State int

const (
	// Running means the command's main process has not exited.
	Running State = iota
	// Exited means it exited and all its output has been read.
	Exited
	// Killed means it was ended by kill_command, a timeout, an abort or
	// disposal.
	Killed
)

// ErrBusy is returned when a second call tries to read a session that
// another call is reading.
var ErrBusy = errors.New("another call is already reading this command's output")

// ErrInputClosed is returned when input is sent to a command on pipes
// whose stdin an earlier Ctrl-D closed.
var ErrInputClosed = errors.New("the command's input was closed by Ctrl-D")

// ErrExited is returned when input is sent to a command that has exited.
var ErrExited = errors.New("the command has exited")

const (
	// attachedBuffer is how much unread output is held while a call reads
	// the session; a faster producer then waits (the terminal applies
	// backpressure) instead of losing output.
	attachedBuffer = 256 << 10
	// detachedBuffer is how much unread output a session keeps while nobody
	// reads it; beyond it the oldest output is dropped and counted.
	detachedBuffer = 1 << 20
	// drainGrace is how long output is still read after the main process
	// exited while something else keeps the terminal open.
	drainGrace = 200 * time.Millisecond
	// terminalRead and pipeRead are the read sizes: a terminal hands over
	// at most 4 KiB per read (the line discipline's buffer), a pipe as
	// much as it holds (pipeSize).
	terminalRead = 16 << 10
	pipeRead     = 1 << 20
	// coalesceBytes and coalesceWait bound how much output Stream gathers,
	// and how long it waits for it, before passing it on.
	coalesceBytes = 64 << 10
	coalesceWait  = 2 * time.Millisecond
	// maxDrain bounds the final read of a terminal that a leftover process
	// keeps writing to.
	maxDrain = 4 << 20
)

// terminalBuffers and pipeBuffers hold read buffers between commands, so
// that a command's start does not allocate (and the collector reclaim) a
// buffer of its own.
var (
	terminalBuffers = sync.Pool{New: func() any { b := make([]byte, terminalRead); return &b }}
	pipeBuffers     = sync.Pool{New: func() any { b := make([]byte, pipeRead); return &b }}
)

// Session is one command running in its own pseudo-terminal, or on plain
// pipes, as one session and process group of its own.
type Session struct {
	id         string
	command    string
	background bool
	started    time.Time
	pid        int
	proc       Process
	tracker    Tracker
	// output is where the command's output is read: the terminal's
	// controller, or the read end of the pipe its stdout and stderr share.
	output *os.File
	// input is where its input is written: the same controller, or the
	// write end of its stdin pipe.
	input *os.File
	// terminal is false for a command on pipes, which has no line
	// discipline to turn "\x03" into SIGINT.
	terminal bool
	// inputClosed is set once Ctrl-D closed a piped command's stdin.
	inputClosed atomic.Bool

	mu      sync.Mutex
	space   *sync.Cond // signalled when unread output was taken or reading must stop
	changed chan struct{}
	unread  []byte
	// spare is an emptied buffer that Stream gave back once written out,
	// for the output that follows: a command printing fast then reuses
	// two buffers instead of allocating (and the collector clearing and
	// reclaiming) a new one for every piece. Only kept while attached.
	spare       []byte
	dropped     int64
	attached    bool
	exited      bool
	eof         bool
	exitCode    int
	killed      bool
	removed     bool // by kill_command, eviction or disposal: no completion report
	lastUsed    time.Time
	done        chan struct{} // closed once exited and all output read
	onDone      func(*Session)
	onChange    func() // tells the manager a slot may have freed
	finalizedMu sync.Once
	// limits and limitsAt report the resource limits the environment's
	// commands ran into while this one ran.
	limits   LimitReporter
	limitsAt sandbox.LimitEvents
}

// ID returns the session's process id, the one tools use.
func (s *Session) ID() string { return s.id }

// Command returns the command line.
func (s *Session) Command() string { return s.command }

// Pid returns the operating system's pid of the main process, which is also
// its process group and session id.
func (s *Session) Pid() int { return s.pid }

// Background reports whether the session was started with
// run_in_background.
func (s *Session) Background() bool { return s.background }

// Done is closed when the command has exited and its output has been read.
func (s *Session) Done() <-chan struct{} { return s.done }

// Info is a snapshot of a session for listings.
type Info struct {
	ID         string
	Command    string
	State      State
	ExitCode   int
	Pid        int
	Started    time.Time
	Background bool
}

// Info returns a snapshot of the session.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{ID: s.id, Command: s.command, State: s.stateLocked(), ExitCode: s.exitCode, Pid: s.pid, Started: s.started, Background: s.background}
}

func (s *Session) stateLocked() State {
	switch {
	case s.killed:
		return Killed
	case s.exited && s.eof:
		return Exited
	default:
		return Running
	}
}

// Status is what a read saw at its end.
type Status struct {
	// State is the session's state.
	State State
	// ExitCode is the exit status once exited; a command ended by a
	// signal reports 128 plus the signal number, as shells do.
	ExitCode int
	// Limits says, once the command has ended, which of the
	// environment's resource limits its commands ran into while it ran,
	// or "".
	Limits string
}

// broadcastLocked wakes every reader waiting for news.
func (s *Session) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// readLoop moves the terminal's output into the unread buffer until the
// terminal closes, or until the main process has exited and the drain
// deadline passes.
func (s *Session) readLoop() {
	pool := &terminalBuffers
	if !s.terminal {
		pool = &pipeBuffers
	}
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	buf := *bp
	for {
		n, err := s.output.Read(buf)
		if n > 0 {
			s.appendOutput(buf[:n])
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.drainRest(buf)
			}
			break
		}
	}
	// The terminal is closed in maybeFinish, once the main process has
	// exited too: closing it earlier would hang it up and send SIGHUP to
	// a command that closed its output but has not exited yet.
	s.mu.Lock()
	s.eof = true
	s.broadcastLocked()
	s.space.Broadcast()
	s.mu.Unlock()
	s.maybeFinish()
}

// drainRest reads, without waiting, what is still buffered in the terminal
// after the drain deadline, so that a slow reader loses nothing the main
// process wrote before it exited.
func (s *Session) drainRest(buf []byte) {
	rc, err := s.output.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxDrain; {
		var n int
		var rerr error
		if err := rc.Control(func(fd uintptr) { n, rerr = unix.Read(int(fd), buf) }); err != nil {
			return
		}
		if n <= 0 || rerr != nil {
			return
		}
		total += n
		s.appendOutput(buf[:n])
	}
}

// appendOutput adds terminal output to the unread buffer: while a call is
// reading, it waits for room; otherwise it drops the oldest output. It
// wakes a waiting reader only when there is news for it: the first output
// after the buffer was emptied (a reader waits for that), or enough to end
// a reader's coalescing wait (see coalesce). Waking it for every piece in
// between would cost two goroutine switches per read, which is most of the
// work of moving output that arrives in pieces of a few KiB.
func (s *Session) appendOutput(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.attached && len(s.unread) >= attachedBuffer && !s.killed {
		s.space.Wait()
	}
	before := len(s.unread)
	if before == 0 && s.unread == nil && s.spare != nil {
		s.unread, s.spare = s.spare, nil
	}
	s.unread = append(s.unread, p...)
	if over := len(s.unread) - detachedBuffer; over > 0 && !s.attached {
		s.dropped += int64(over)
		s.unread = append(s.unread[:0], s.unread[over:]...)
	}
	if before == 0 || before < coalesceBytes && len(s.unread) >= coalesceBytes {
		s.broadcastLocked()
	}
}

// waitLoop reaps the main process and records how it ended.
func (s *Session) waitLoop() {
	code, _ := s.proc.Wait()
	s.mu.Lock()
	s.exited = true
	s.exitCode = code
	s.broadcastLocked()
	s.mu.Unlock()
	// Leftover background processes may keep the terminal open; their
	// output is read a little longer, then reading stops.
	_ = s.output.SetReadDeadline(time.Now().Add(drainGrace))
	s.maybeFinish()
}

// maybeFinish closes Done once the process exited and the output was read,
// and reports the completion of a background command.
func (s *Session) maybeFinish() {
	s.mu.Lock()
	finished := s.exited && s.eof
	s.mu.Unlock()
	if !finished {
		return
	}
	s.finalizedMu.Do(func() {
		s.closeFiles()
		close(s.done)
		if s.onChange != nil {
			s.onChange()
		}
		if s.onDone != nil {
			s.onDone(s)
		}
	})
}

// takeLocked returns the unread output and empties the buffer, prefixed by a
// note when output was dropped.
func (s *Session) takeLocked() []byte {
	if len(s.unread) == 0 && s.dropped == 0 {
		return nil
	}
	out := s.unread
	if s.dropped > 0 {
		out = append([]byte(fmt.Sprintf("[... %d bytes of earlier output dropped ...]\n", s.dropped)), out...)
		s.dropped = 0
	}
	s.unread = nil
	s.space.Broadcast()
	return out
}

// giveBack returns a buffer that takeLocked handed out, once its contents
// were written out, as the next unread buffer's storage. Buffers larger
// than a reader's backlog can grow to are left to the collector.
func (s *Session) giveBack(b []byte) {
	if cap(b) > 2*(attachedBuffer+pipeRead) {
		return
	}
	s.mu.Lock()
	if s.attached && s.spare == nil {
		s.spare = b[:0]
	}
	s.mu.Unlock()
}

// TakeUnread returns the output nobody has read yet and empties the buffer.
func (s *Session) TakeUnread() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = time.Now()
	return s.takeLocked()
}

// Stream copies the session's output to w as it arrives, until the command
// has exited and its output is read, until wait has elapsed (wait <= 0
// means no limit), or until ctx ends. Only one call may stream a session at
// a time.
func (s *Session) Stream(ctx context.Context, wait time.Duration, w io.Writer) (Status, error) {
	s.mu.Lock()
	if s.attached {
		s.mu.Unlock()
		return Status{}, ErrBusy
	}
	s.attached = true
	s.lastUsed = time.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.attached = false
		s.spare = nil
		s.lastUsed = time.Now()
		s.space.Broadcast()
		s.mu.Unlock()
		if s.onChange != nil {
			s.onChange()
		}
	}()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		s.mu.Lock()
		if n := len(s.unread); n > 0 && n < coalesceBytes && s.stateLocked() == Running && !s.eof {
			// A piece of output: wait a moment for more to join it.
			s.mu.Unlock()
			s.coalesce()
			s.mu.Lock()
		}
		data := s.takeLocked()
		st := Status{State: s.stateLocked(), ExitCode: s.exitCode}
		changed := s.changed
		s.mu.Unlock()
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return st, err
			}
			s.giveBack(data)
			continue
		}
		if st.State != Running {
			if s.limits != nil {
				st.Limits = s.limits.LimitsSince(s.limitsAt)
			}
			return st, nil
		}
		select {
		case <-changed:
		case <-timeout:
			return st, nil
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// coalesce waits a moment for more output to join what is unread, so that
// a command writing fast reaches the caller in fewer, larger pieces (a
// terminal delivers at most a few KiB per read, a pipe what the writer
// wrote). It returns once coalesceBytes are unread, the command has ended
// or its output closed, or coalesceWait has passed; appendOutput wakes it
// only for the first two. The wait is too short to matter to a reader
// watching the output.
func (s *Session) coalesce() {
	timer := time.NewTimer(coalesceWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		done := len(s.unread) >= coalesceBytes || s.stateLocked() != Running || s.eof
		changed := s.changed
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

// Write sends input to the command, as typed: "\x03" is Ctrl-C and "\x04"
// Ctrl-D. In a terminal the line discipline turns them into SIGINT for the
// foreground job and an end of input; on pipes there is none, so each
// "\x03" is sent as SIGINT to the command's process group, "\x04" closes
// its stdin, and the rest is written to its stdin.
func (s *Session) Write(ctx context.Context, chars string) error {
	s.mu.Lock()
	finished := s.eof || s.killed
	s.lastUsed = time.Now()
	s.mu.Unlock()
	if finished {
		return ErrExited
	}
	if s.terminal {
		return s.writeInput(ctx, chars)
	}
	for {
		i := strings.IndexAny(chars, "\x03\x04")
		if i < 0 {
			return s.writeInput(ctx, chars)
		}
		if err := s.writeInput(ctx, chars[:i]); err != nil {
			return err
		}
		switch chars[i] {
		case '\x03':
			if err := s.signal(syscall.SIGINT); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("interrupting the command: %w", err)
			}
		case '\x04':
			// Ctrl-D: the end of input, as a terminal would give it to
			// a program reading a line.
			s.inputClosed.Store(true)
			if err := s.input.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				return fmt.Errorf("closing the command's input: %w", err)
			}
		}
		chars = chars[i+1:]
	}
}

// writeInput writes chars to the command's input, giving up when the
// command does not read it.
func (s *Session) writeInput(ctx context.Context, chars string) error {
	if chars == "" {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.input.SetWriteDeadline(deadline)
	_, err := io.WriteString(s.input, chars)
	if err != nil {
		if s.inputClosed.Load() {
			return ErrInputClosed
		}
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return ErrExited
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return errors.New("the command is not reading its input (its input buffer is full)")
		}
		return fmt.Errorf("writing to the command: %w", err)
	}
	return nil
}

// signal sends sig to the command's process group; to none when its pid
// was never known (kill(0) would signal the service's own group).
func (s *Session) signal(sig syscall.Signal) error {
	if s.pid <= 0 {
		return unix.ESRCH
	}
	return unix.Kill(-s.pid, sig)
}

// closeFiles closes the command's terminal or pipes.
func (s *Session) closeFiles() {
	commandIO{output: s.output, input: s.input}.closeOwnEnds()
}

// Kill ends the command and everything it started: with grace > 0 it first
// sends SIGTERM and waits up to grace, then SIGKILL. It returns once the
// session is done or a short bound has passed.
func (s *Session) Kill(grace time.Duration) {
	s.mu.Lock()
	s.killed = true
	s.space.Broadcast()
	s.broadcastLocked()
	s.mu.Unlock()
	if grace > 0 {
		_ = s.signal(syscall.SIGTERM)
		s.waitGone(grace)
	}
	_ = s.tracker.Kill()
	s.waitGone(5 * time.Second)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		// The terminal is held by a process beyond reach; stop reading it.
		_ = s.output.SetReadDeadline(time.Now())
	}
}

// waitGone polls until no process of the command remains or d passes.
func (s *Session) waitGone(d time.Duration) {
	deadline := time.Now().Add(d)
	for s.tracker.Alive() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // group members exit without notice; poll
	}
}
