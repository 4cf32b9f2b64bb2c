// Package command runs the shell commands of one environment: each in a
// pseudo-terminal (so interactive programs work) or, when asked, on plain
// pipes (for bulk output), as a session and process group of its own (so a
// timeout, an abort or a kill ends everything it started), kept as a
// numbered command session that later calls can read, write to and kill.
package command

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// MaxSessions is the default cap on command sessions per environment.
const MaxSessions = 64

// Options configure a Manager.
type Options struct {
	// Shell is the shell that runs command lines, as shell -c LINE (as
	// PowerShell or cmd.exe take a line, for those); empty means bash
	// from PATH, and on Windows the first of bash, sh, pwsh, powershell
	// and cmd found (see shellCandidates).
	Shell string
	// Env is the environment the login shell starts in. The environment
	// it leaves (the shell snapshot) is every command's, Fixed aside.
	Env []string
	// Fixed are variables ("NAME=value") that every command gets as
	// given, whatever the login profile set.
	Fixed []string
	// Dir is where the login shell of the snapshot runs (the workspace).
	Dir string
	// LoginShell runs every command as shell -lc LINE, the login profile
	// each time, instead of taking a snapshot once.
	LoginShell bool
	// ProfileTimeout bounds the snapshot's login shell; zero means
	// DefaultProfileTimeout.
	ProfileTimeout time.Duration
	// Limits, when set, reports the resource limits the environment's
	// commands ran into, in their final status.
	Limits LimitReporter
	// Launcher applies the sandbox; nil means Unconfined.
	Launcher Launcher
	// Max caps the number of sessions; zero means MaxSessions.
	Max int
	// TailSlack is how many bytes of output each session's tail keeps
	// beyond TailBytes. The environment makes it the longest span of a
	// vault value, so that a value whose start the tail cut off can be
	// dropped whole before the tail is shown (see Info.Tail).
	TailSlack int
	// OnBackgroundDone is called, on its own goroutine, when a command
	// started in the background finishes by itself.
	OnBackgroundDone func(*Session)
}

// LimitReporter tells whether the environment's commands ran into its
// resource limits. *sandbox.Env implements it.
type LimitReporter interface {
	// Events returns counters that only grow.
	Events() sandbox.LimitEvents
	// LimitsSince says what happened since the counters were before, or
	// "" when nothing did.
	LimitsSince(before sandbox.LimitEvents) string
}

// Manager owns the command sessions of one environment.
type Manager struct {
	opts  Options
	shell string
	// snap is the shell snapshot, nil with LoginShell; closing ends a
	// snapshot still being taken.
	snap    *snapshot
	env     func() []string // commandEnv, once the snapshot is taken
	closing chan struct{}
	// noticed is set once a command's output carried the snapshot's
	// notice.
	noticed bool
	// noPTYNoticed is set once a command's output said that it runs
	// with pipes for want of a pseudo-terminal.
	noPTYNoticed bool

	mu       sync.Mutex
	sessions map[string]*Session
	changed  chan struct{} // closed and replaced when a slot may have freed
	next     int
	closed   bool
	// retired holds the trackers of sessions taken out of service until
	// reap releases them; reapTimer is set while a reap is due.
	retired   []Tracker
	reapTimer *time.Timer

	// reapMu serializes reaping and Close; kept, which it guards, holds
	// the trackers of commands that left processes behind.
	reapMu sync.Mutex
	kept   []Tracker
}

// NewManager returns a Manager. It fails when the shell cannot be found.
func NewManager(opts Options) (*Manager, error) {
	shells := shellCandidates(runtime.GOOS)
	if opts.Shell != "" {
		shells = []string{opts.Shell}
	}
	path, err := findShell(shells, exec.LookPath)
	if err != nil {
		return nil, fmt.Errorf("finding the shell (%s): %w", strings.Join(shells, ", "), err)
	}
	if opts.Max <= 0 {
		opts.Max = MaxSessions
	}
	if opts.Launcher == nil {
		opts.Launcher = Unconfined()
	}
	m := &Manager{opts: opts, shell: path, sessions: map[string]*Session{}, changed: make(chan struct{}), closing: make(chan struct{})}
	m.env = sync.OnceValue(m.buildEnv)
	// Only a POSIX shell's login profile can be snapshotted (env -0).
	if !opts.LoginShell && kindOf(path) == posixShell {
		m.snap = &snapshot{done: make(chan struct{})}
		go m.takeSnapshot()
	}
	return m, nil
}

// waitSnapshot waits for the shell snapshot (bounded by the profile
// timeout) and returns its notice the first time it is asked.
func (m *Manager) waitSnapshot(ctx context.Context) (string, error) {
	if m.snap == nil {
		return "", nil
	}
	select {
	case <-m.snap.done:
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the login shell's profile: %w", ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap.notice != "" && !m.noticed {
		m.noticed = true
		return m.snap.notice + "\n", nil
	}
	return "", nil
}

// ErrTooMany is returned when every session slot holds a running command.
var ErrTooMany = errors.New("too many running commands")

// ErrClosed is returned once the manager has been closed.
var ErrClosed = errors.New("the environment has been disposed")

// StartOptions describe one command.
type StartOptions struct {
	// Command is the command line, run with the shell's -c (-lc with
	// Options.LoginShell).
	Command string
	// Dir is the working directory.
	Dir string
	// Background marks a run_in_background command, whose completion is
	// reported.
	Background bool
	// Pipes runs the command on plain pipes instead of a pseudo-terminal:
	// stdout and stderr share one pipe. A terminal's line discipline
	// handles a few KiB at a time, which caps output below 100 MB/s; a
	// pipe carries many times that, for commands that print a lot and
	// need no terminal.
	Pipes bool
}

// Start starts a command in a new session. When every slot is taken it
// evicts a finished session; when none is finished but some are held by
// calls still reading their command in the foreground, it waits (until ctx
// ends) for one of those to free up; when all hold commands running in the
// background, it refuses.
func (m *Manager) Start(ctx context.Context, o StartOptions) (*Session, error) {
	m.mu.Lock()
	for {
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if len(m.sessions) < m.opts.Max {
			break
		}
		if victim := m.evictableLocked(); victim != nil {
			delete(m.sessions, victim.id)
			victim.markRemoved()
			m.retireLocked(victim)
			break
		}
		if !m.anyForegroundLocked() {
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: all %d command sessions hold commands running in the background; end one with kill_command first", ErrTooMany, m.opts.Max)
		}
		changed := m.changed
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a free command session: %w", ctx.Err())
		}
		m.mu.Lock()
	}
	m.next++
	id := strconv.Itoa(m.next)
	// The slot is reserved before the (slow) start so that concurrent
	// starts respect the cap.
	m.sessions[id] = nil
	m.mu.Unlock()

	notice, err := m.waitSnapshot(ctx)
	if err == nil {
		var s *Session
		s, err = m.start(id, o, notice)
		if err == nil {
			return m.admit(id, s)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, id)
	m.notifyLocked()
	return nil, err
}

// admit puts a started session into its reserved slot, unless the manager
// was closed meanwhile.
func (m *Manager) admit(id string, s *Session) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		delete(m.sessions, id)
		m.notifyLocked()
		s.markRemoved()
		go s.Kill(0)
		return nil, ErrClosed
	}
	m.sessions[id] = s
	return s, nil
}

// anyForegroundLocked reports whether a slot is held by a command that is
// being started or read by a call, and so will soon be free or evictable.
func (m *Manager) anyForegroundLocked() bool {
	for _, s := range m.sessions {
		if s == nil {
			return true
		}
		s.mu.Lock()
		fg := s.attached || s.exited && s.eof
		s.mu.Unlock()
		if fg {
			return true
		}
	}
	return false
}

// notifyLocked wakes the starts waiting for a slot.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// notify is notifyLocked for callers without the lock.
func (m *Manager) notify() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notifyLocked()
}

// evictableLocked picks the session to evict: a finished one whose output
// was all delivered, else any finished one, least recently used first.
// Running commands are never evicted.
func (m *Manager) evictableLocked() *Session {
	var best *Session
	bestRank := 3
	var bestUsed time.Time
	for _, s := range m.sessions {
		if s == nil {
			continue
		}
		s.mu.Lock()
		rank := 3
		if s.exited && s.eof || s.killed {
			rank = 1
			if len(s.unread) > 0 || s.dropped > 0 {
				rank = 2
			}
		}
		used := s.lastUsed
		s.mu.Unlock()
		if rank < bestRank || rank == bestRank && rank < 3 && used.Before(bestUsed) {
			best, bestRank, bestUsed = s, rank, used
		}
	}
	if bestRank == 3 {
		return nil
	}
	return best
}

func (m *Manager) start(id string, o StartOptions, notice string) (*Session, error) {
	if !o.Pipes && !havePTY {
		// No pseudo-terminal on this system: the command runs with
		// pipes, and the first one says so.
		o.Pipes = true
		m.mu.Lock()
		if !m.noPTYNoticed {
			m.noPTYNoticed = true
			notice += "[penguin: pseudo-terminals are not available on " + runtime.GOOS + ": commands run with pipes]\n"
		}
		m.mu.Unlock()
	}
	kind := kindOf(m.shell)
	cmd := exec.Command(m.shell, shellArgs(kind, o.Command, m.opts.LoginShell)...)
	if kind == cmdShell {
		setCmdLine(cmd, cmdLine(m.shell, o.Command))
	}
	cmd.Dir = o.Dir
	cmd.Env = m.commandEnv()
	var limitsAt sandbox.LimitEvents
	if m.opts.Limits != nil {
		limitsAt = m.opts.Limits.Events()
	}
	var files commandIO
	var err error
	if o.Pipes {
		files, err = openPipes(cmd)
	} else {
		files, err = openTerminal(cmd)
	}
	if err != nil {
		return nil, err
	}
	proc, tracker, err := start(m.opts.Launcher, cmd, files.spawn)
	if err != nil {
		files.closeAll()
		return nil, err
	}
	files.closeChildEnds()
	now := time.Now()
	s := &Session{
		id:         id,
		tailKeep:   TailBytes + max(m.opts.TailSlack, 0),
		command:    o.Command,
		background: o.Background,
		started:    now,
		lastUsed:   now,
		proc:       proc,
		tracker:    tracker,
		output:     files.output,
		input:      files.input,
		terminal:   !o.Pipes,
		buffering:  terminalBuffering,
		changed:    make(chan struct{}),
		done:       make(chan struct{}),
		limits:     m.opts.Limits,
		limitsAt:   limitsAt,
	}
	if o.Pipes {
		s.buffering = pipeBuffering
	}
	if notice != "" {
		s.unread = []byte(notice)
	}
	s.space = sync.NewCond(&s.mu)
	s.onChange = m.notify
	if o.Background && m.opts.OnBackgroundDone != nil {
		report := m.opts.OnBackgroundDone
		s.onDone = func(s *Session) {
			if !s.isRemoved() {
				go report(s)
			}
		}
	}
	go s.readLoop()
	go s.waitLoop()
	return s, nil
}

func (s *Session) markRemoved() {
	s.mu.Lock()
	s.removed = true
	s.mu.Unlock()
}

func (s *Session) isRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// Get returns the session with the process id id.
func (m *Manager) Get(id string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	return s, ok && s != nil
}

// Remove forgets a session; a background command removed this way sends no
// completion report. It does not kill the command.
func (m *Manager) Remove(id string) {
	m.mu.Lock()
	s := m.sessions[id]
	delete(m.sessions, id)
	if s != nil {
		m.retireLocked(s)
	}
	m.notifyLocked()
	m.mu.Unlock()
	if s != nil {
		s.markRemoved()
	}
}

// List returns a snapshot of every session, oldest first.
func (m *Manager) List() []Info {
	m.mu.Lock()
	list := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if s != nil {
			list = append(list, s)
		}
	}
	m.mu.Unlock()
	out := make([]Info, 0, len(list))
	for _, s := range list {
		out = append(out, s.Info())
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(out[i].ID)
		b, _ := strconv.Atoi(out[j].ID)
		return a < b
	})
	return out
}

// Close kills every command of the environment, running or finished (a
// finished command may have left processes behind), and waits for them.
// Later starts fail with ErrClosed.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		close(m.closing)
	}
	m.closed = true
	m.notifyLocked()
	list := make([]*Session, 0, len(m.sessions))
	for id, s := range m.sessions {
		if s != nil {
			list = append(list, s)
		}
		delete(m.sessions, id)
	}
	retired := m.retired
	m.retired = nil
	if m.reapTimer != nil {
		m.reapTimer.Stop()
	}
	m.mu.Unlock()
	// A reap under way finishes first; what it kept is released here.
	m.reapMu.Lock()
	retired = append(retired, m.kept...)
	m.kept = nil
	m.reapMu.Unlock()
	var wg sync.WaitGroup
	for _, s := range list {
		s.markRemoved()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Kill(0)
			_ = s.tracker.Release()
		}()
	}
	for _, t := range retired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = t.Release()
		}()
	}
	wg.Wait()
	if m.snap != nil {
		<-m.snap.done
	}
}

// reapDelay is how long a retired tracker waits to be released. Releasing
// it on the spot would wake work (reading cgroup or /proc state) just as
// the call that ended the command is sending its result; a moment later it
// costs that call nothing, and one reap serves every command retired
// meanwhile.
const reapDelay = 50 * time.Millisecond

// retireLocked takes a session out of service; its tracker is released by
// the next reap.
func (m *Manager) retireLocked(s *Session) {
	if m.closed {
		// Close has ended every process; only the tracking is left.
		_ = s.tracker.Release()
		return
	}
	m.retired = append(m.retired, s.tracker)
	if m.reapTimer == nil {
		m.reapTimer = time.AfterFunc(reapDelay, m.reap)
	}
}

// reap releases retired trackers. A command that left processes behind (a
// server started with "&", say) keeps its tracker until the environment
// closes, so that disposal still ends them; any other tracker is released
// now. The kept ones are checked again whenever as many have piled up as
// there are session slots.
func (m *Manager) reap() {
	m.reapMu.Lock()
	defer m.reapMu.Unlock()
	m.mu.Lock()
	batch := m.retired
	m.retired = nil
	m.reapTimer = nil
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return // Close took them
	}
	for _, t := range batch {
		if t.Alive() {
			m.kept = append(m.kept, t)
		} else {
			_ = t.Release()
		}
	}
	if len(m.kept) < m.opts.Max {
		return
	}
	alive := m.kept[:0]
	for _, t := range m.kept {
		if t.Alive() {
			alive = append(alive, t)
		} else {
			_ = t.Release()
		}
	}
	m.kept = alive
}
