package command

import (
	"bytes"
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
	// backpressure) instead of losing output. It is several times
	// coalesceBytes, so that the command goes on while a full piece is
	// being passed on.
	attachedBuffer = 1 << 20
	// detachedBuffer is how much unread output a session keeps while nobody
	// reads it; beyond it the oldest output is dropped and counted.
	detachedBuffer = 1 << 20
	// drainGrace is how long output is still read after the main process
	// exited while something else keeps the terminal open.
	drainGrace = 200 * time.Millisecond
	// coalesceBytes and coalesceWait bound how much output Stream gathers,
	// and how long it waits for it, before passing it on. Each piece costs
	// two goroutine switches (the reader waking Stream, which then waits
	// again), so bulk output moves in pieces of 256 KiB rather than 64.
	coalesceBytes = 256 << 10
	coalesceWait  = 2 * time.Millisecond
	// maxDrain bounds the final read of a terminal that a leftover process
	// keeps writing to.
	maxDrain = 4 << 20
)

// buffering is how a session buffers output: output is read straight into
// the free end of the buffer that holds what is unread, so that each byte
// is copied once, by the read, and again only if its buffer fills up before
// the byte was taken (then what is unread moves to the start of another
// buffer).
type buffering struct {
	// size is the size of a buffer; pool holds buffers of that size
	// between commands, so that a command's start does not allocate (and
	// the collector clear and reclaim) one of its own.
	size int
	pool *sync.Pool
	// least is the least free room a read is given, and most the most it
	// takes: a terminal hands over at most 4 KiB per read (the line
	// discipline's buffer), a pipe as much as it holds (pipeSize).
	least, most int
}

var (
	terminalBuffering = newBuffering(64<<10, 4<<10, 16<<10)
	pipeBuffering     = newBuffering(2<<20, 64<<10, 1<<20)
)

func newBuffering(size, least, most int) *buffering {
	return &buffering{size: size, least: least, most: most, pool: &sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

// Session is one command running in its own pseudo-terminal, or on plain
// pipes, as one session and process group of its own.
type Session struct {
	id         string
	command    string
	background bool
	started    time.Time
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

	buffering *buffering

	mu      sync.Mutex
	space   *sync.Cond // signalled when unread output was taken or reading must stop
	changed chan struct{}
	// buf is the buffer that output is read into, from its start to its
	// capacity (its length is zero), and unread the output not yet taken:
	// a part of buf, or the note of the shell snapshot before the first
	// read. A read writes into the free room after unread (its length
	// is published under mu afterwards), and taking the output leaves
	// unread empty where it ended, so a read under way lands right.
	buf    []byte
	unread []byte
	// lent is the buffer of the piece Stream is writing out (nil when
	// none): it must not be reused until Stream gives the piece back.
	lent []byte
	// spare is an emptied buffer for the output that follows: the
	// buffer the reader left, once nothing of it is still being written
	// out. A command printing fast then reuses two buffers instead of
	// allocating (and the collector clearing and reclaiming) a new one
	// whenever one fills. Only kept while attached.
	spare   []byte
	dropped int64
	// tail is the last tailKeep bytes of the output, read or not, for
	// the process list (ListProcesses): what the command printed last,
	// however the model reads its output.
	tail        []byte
	tailKeep    int
	tailCut     bool
	attached    bool
	exited      bool
	eof         bool
	exitCode    int
	endErr      error // why there is no exit code (exitCode -1)
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
// its process group and session id; 0 when it never started. (A command
// a confined environment started is known by its pid a moment after it
// started: Pid may wait for that moment.)
func (s *Session) Pid() int { return s.proc.Pid() }

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
	// Tail is the last output, at most TailBytes plus Options.TailSlack
	// of it, as the command wrote it: a caller that shows it replaces
	// vault values first, and cuts it to TailBytes after.
	Tail []byte
	// TailCut tells whether output before Tail was dropped, so that Tail
	// may start in the middle of a line, or of a vault value.
	TailCut bool
}

// TailBytes is how much of a command's last output Info keeps: a dozen
// lines of a terminal, enough for a panel to show where a command is.
const TailBytes = 2048

// Info returns a snapshot of the session.
func (s *Session) Info() Info {
	pid := s.Pid()
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{
		ID: s.id, Command: s.command, State: s.stateLocked(), ExitCode: s.exitCode, Pid: pid, Started: s.started, Background: s.background,
		Tail: bytes.Clone(s.tail), TailCut: s.tailCut,
	}
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
	// Err says, once the command has ended, why it has no exit code
	// (ExitCode is then -1): it could not start, or its environment
	// ended under it.
	Err error
}

// broadcastLocked wakes every reader waiting for news.
func (s *Session) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// readLoop reads the terminal's output into the unread buffer until the
// terminal closes, or until the main process has exited and the drain
// deadline passes.
func (s *Session) readLoop() {
	for {
		_, err := s.fill(s.output.Read)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.drainRest()
			}
			break
		}
	}
	// The terminal is closed in maybeFinish, once the main process has
	// exited too: closing it earlier would hang it up and send SIGHUP to
	// a command that closed its output but has not exited yet.
	s.mu.Lock()
	s.eof = true
	s.releaseLocked()
	s.broadcastLocked()
	s.space.Broadcast()
	s.mu.Unlock()
	s.maybeFinish()
}

// drainRest reads, without waiting, what is still buffered in the terminal
// after the drain deadline, so that a slow reader loses nothing the main
// process wrote before it exited.
func (s *Session) drainRest() {
	rc, err := s.output.SyscallConn()
	if err != nil {
		return
	}
	for total := 0; total < maxDrain; {
		var cerr error
		n, rerr := s.fill(func(p []byte) (n int, err error) {
			n, cerr, err = readNow(rc, p)
			return max(n, 0), err
		})
		if cerr != nil || n <= 0 || rerr != nil {
			return
		}
		total += n
	}
}

// fill reads once, with read, into the free room after the unread output,
// and adds what it read to it: while a call is reading, it first waits for
// room; otherwise it then drops the oldest output. It wakes a waiting
// reader only when there is news for it: the first output after the
// buffer was emptied (a reader waits for that), or enough to end a
// reader's coalescing wait (see coalesce). Waking it for every piece in
// between would cost two goroutine switches per read, which is most of the
// work of moving output that arrives in pieces of a few KiB.
func (s *Session) fill(read func([]byte) (int, error)) (int, error) {
	s.mu.Lock()
	for s.attached && len(s.unread) >= attachedBuffer && !s.killed {
		s.space.Wait()
	}
	room := s.roomLocked()
	s.mu.Unlock()
	n, err := read(room)
	if n <= 0 {
		return n, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := len(s.unread)
	s.unread = s.unread[:before+n]
	got := s.unread[before:]
	if over := len(s.tail) + len(got) - s.tailKeep; over > 0 {
		s.tailCut = true
		got = got[max(len(got)-s.tailKeep, 0):]
		s.tail = s.tail[max(len(s.tail)+len(got)-s.tailKeep, 0):]
	}
	s.tail = append(s.tail, got...)
	if over := len(s.unread) - detachedBuffer; over > 0 && !s.attached {
		s.dropped += int64(over)
		s.unread = s.unread[over:]
	}
	if before == 0 || before < coalesceBytes && len(s.unread) >= coalesceBytes {
		s.broadcastLocked()
	}
	return n, err
}

// roomLocked returns the free room after the unread output, at most as
// much as one read takes. Where less than the least is free, the unread
// output first moves to the start of another buffer: the spare one, a
// pooled one, else (for a backlog a pooled one cannot take) a new one.
func (s *Session) roomLocked() []byte {
	b := s.buffering
	if cap(s.unread)-len(s.unread) < b.least {
		need := len(s.unread) + b.least
		var next []byte
		switch {
		case cap(s.spare) >= need:
			next, s.spare = s.spare, nil
		case need <= b.size:
			next = *b.pool.Get().(*[]byte)
		default:
			next = make([]byte, 2*len(s.unread))
		}
		old := s.buf
		s.buf = next[:0]
		s.unread = append(s.buf, s.unread...)
		// The buffer left behind, once its output was copied out and
		// unless Stream is still writing a piece of it, is the spare one
		// while a call reads the session, else goes back to the pool.
		if old != nil && !sameBuffer(old, s.lent) {
			if s.attached && s.spare == nil {
				s.spare = old
			} else {
				b.recycle(old)
			}
		}
	}
	room := s.unread[len(s.unread):cap(s.unread)]
	return room[:min(len(room), b.most)]
}

// releaseLocked lets go of the buffers, back into the pool for the next
// command, once the output has all been read and taken and none of it is
// still being written out. It is called wherever that may have become
// true: at the end of the output, and after each take.
func (s *Session) releaseLocked() {
	if !s.eof || len(s.unread) > 0 || s.lent != nil {
		return
	}
	s.buffering.recycle(s.buf)
	s.buffering.recycle(s.spare)
	s.buf, s.unread, s.spare = nil, nil, nil
}

// recycle puts buf, a buffer nothing uses any more, back into the pool
// when it has the pool's size.
func (b *buffering) recycle(buf []byte) {
	if cap(buf) == b.size {
		buf = buf[:cap(buf)]
		b.pool.Put(&buf)
	}
}

// sameBuffer reports whether a and b, each a buffer from its start, are
// the same buffer.
func sameBuffer(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// waitLoop reaps the main process and records how it ended.
func (s *Session) waitLoop() {
	code, err := s.proc.Wait()
	s.mu.Lock()
	s.exited = true
	s.exitCode = code
	s.endErr = err
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
// note when output was dropped. shared reports whether out is a part of
// the session's buffer, which stays the session's: it must be copied or
// given back.
func (s *Session) takeLocked() (out []byte, shared bool) {
	if len(s.unread) == 0 && s.dropped == 0 {
		return nil, false
	}
	n := len(s.unread)
	out, shared = s.unread[:n:n], true
	if s.dropped > 0 {
		out, shared = append([]byte(fmt.Sprintf("[... %d bytes of earlier output dropped ...]\n", s.dropped)), out...), false
		s.dropped = 0
	}
	s.unread = s.unread[n:]
	s.space.Broadcast()
	return out, shared
}

// giveBack tells that the piece Stream took was written out. Its buffer,
// when the reader has moved on from it, becomes the spare one; buffers
// larger than a reader's backlog can grow to are left to the collector.
func (s *Session) giveBack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lent
	s.lent = nil
	if s.attached && s.spare == nil && !sameBuffer(b, s.buf) && cap(b) <= 2*(attachedBuffer+s.buffering.size) {
		s.spare = b
	}
	s.releaseLocked()
}

// TakeUnread returns the output nobody has read yet and empties the buffer.
func (s *Session) TakeUnread() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = time.Now()
	out, shared := s.takeLocked()
	if shared {
		// A call streaming the session meanwhile may recycle the buffer.
		out = bytes.Clone(out)
	}
	s.releaseLocked()
	return out
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
		s.buffering.recycle(s.spare)
		s.lent, s.spare = nil, nil
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
		data, shared := s.takeLocked()
		if shared {
			s.lent = s.buf
		}
		st := Status{State: s.stateLocked(), ExitCode: s.exitCode, Err: s.endErr}
		changed := s.changed
		s.mu.Unlock()
		if len(data) > 0 {
			if _, err := w.Write(data); err != nil {
				return st, err
			}
			if shared {
				s.giveBack()
			}
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
// or its output closed, or coalesceWait has passed; fill wakes it only
// for the first two. The wait is too short to matter to a reader watching
// the output.
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
			if err := s.signal(syscall.SIGINT); err != nil {
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
// was never known (kill(0) would signal the service's own group), and
// without error when the group is gone.
func (s *Session) signal(sig syscall.Signal) error {
	pid := s.Pid()
	if pid <= 0 {
		return nil
	}
	return signalGroup(pid, sig)
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
