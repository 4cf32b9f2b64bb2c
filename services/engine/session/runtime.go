package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/envwatch"
	"github.com/penguin-agent/penguin/services/engine/journal"
	"github.com/penguin-agent/penguin/services/engine/live"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Runtime is a loaded session: its journal (numbering, log writer, live
// buffer), its open approval questions, the watch of its environment, and
// its task when one runs.
type Runtime struct {
	m       *Manager
	id      string
	buf     *live.Buffer
	journal *journal.Journal
	board   *approval.Board
	watcher *envwatch.Watcher

	// seqSaved is SeqHigh as last written to the row: set at load and by
	// the end of each task (which holds a reference, so unload, which
	// runs after the last one is released, reads it after).
	seqSaved int64
	// sealed is set when the session's task was handed over to another
	// replica: nothing more is recorded here.
	sealed atomic.Bool

	refs int // guarded by m.mu

	mu    sync.Mutex
	task  *task
	state penguinv1.SessionState
	// beforeApproval is the state to return to when the last open
	// approval question is settled.
	beforeApproval penguinv1.SessionState
	mode           penguinv1.ApprovalMode
}

func newRuntime(m *Manager, row *store.Session, cfg config) *Runtime {
	next := max(row.LastSequence, cfg.SeqHigh) + 1
	if row.LastSequence > cfg.SeqHigh {
		// The log grew after the sequence high-water mark was saved: the
		// engine stopped mid-run, and partials numbered after the last
		// persisted event may have reached clients. Leave a gap.
		next = row.LastSequence + crashGap
	}
	rt := &Runtime{
		m:        m,
		id:       row.ID,
		buf:      live.New(next-1, m.opts.BufferEvents, m.opts.BufferBytes),
		seqSaved: cfg.SeqHigh,
		state:    penguinv1.SessionState_SESSION_STATE_IDLE,
		mode:     row.ApprovalMode,
	}
	rt.journal = journal.New(journal.Options{
		Store: m.store, Session: row.ID, Next: next, LastPersisted: row.LastSequence,
		Buffer: rt.buf, Linger: m.opts.LogLinger, Timeout: storeTimeout, Logger: m.log, OnFail: rt.logFailed,
	})
	rt.board = approval.NewBoard(rt.ask, rt.answered)
	rt.watcher = envwatch.New(watchedSession{rt}, row.ID, storeTimeout, m.log)
	return rt
}

// unload saves the sequence high-water mark and drops the live buffer.
func (rt *Runtime) unload() {
	_ = rt.journal.Flush()
	if high := rt.journal.Last(); high > rt.seqSaved {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := rt.m.updateRow(ctx, rt.id, func(_ *store.Session, c *config) { c.SeqHigh = max(c.SeqHigh, high) })
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			rt.m.log.Warn("could not save the session's sequence mark; the next load leaves a gap", "session", rt.id, "error", err)
		}
	}
	rt.buf.Close()
}

// State returns what the session is doing.
func (rt *Runtime) State() penguinv1.SessionState {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.state
}

// Emit queues m to be recorded in the log when it belongs there and then
// published. It implements loop.Emitter: an error means the log failed
// (for this message or an earlier one) and nothing from then on will be
// published.
func (rt *Runtime) Emit(_ context.Context, m *penguinv1.OmniMessage) error {
	if rt.sealed.Load() {
		return errHandedOver
	}
	_, err := rt.journal.Publish(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: m}}, omni.Persistable(m))
	if err == nil {
		rt.m.metrics.observeEmit(m)
	}
	return err
}

// publishState publishes a state change (never persisted). It goes out
// even after the log failed, so that the idle event that ends a task
// reaches every stream.
func (rt *Runtime) publishState(ch *penguinv1.RunStateChange) {
	rt.m.watch.StateChanged(rt.id, ch)
	rt.journal.Announce(stateEvent(ch))
}

func stateEvent(ch *penguinv1.RunStateChange) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: ch}}
}

// logFailed stops the session's task as soon as its log fails: the task
// could not record anything more, and it might otherwise run on for a long
// tool call or an open approval before its next event found out.
func (rt *Runtime) logFailed(err error) {
	rt.mu.Lock()
	t := rt.task
	rt.mu.Unlock()
	if t != nil {
		t.cancel(err)
	}
}

// setState records what the task is doing and tells the watchers when it
// changed.
func (rt *Runtime) setState(s penguinv1.SessionState, retryIn time.Duration) {
	rt.mu.Lock()
	changed := rt.state != s || s == penguinv1.SessionState_SESSION_STATE_RETRY_WAIT
	rt.state = s
	rt.mu.Unlock()
	if changed {
		rt.publishState(&penguinv1.RunStateChange{State: s, RetryInMs: retryIn.Milliseconds()})
	}
}

// ask publishes an approval question of the session's board. The only
// open question (opens) first moves the session into awaiting approval,
// and the state change and the question are queued in one step of the
// journal: the tool that asks runs while its model request still
// publishes (a request's tools start before it ends), and no event of
// that request may come between the two on any stream.
func (rt *Runtime) ask(ev *penguinv1.RunEvent, opens bool) (int64, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !opens || rt.state == penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL {
		return rt.journal.Publish(ev, false)
	}
	rt.beforeApproval = rt.state
	rt.state = penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL
	ch := &penguinv1.RunStateChange{State: rt.state}
	rt.m.watch.StateChanged(rt.id, ch)
	return rt.journal.AnnounceWith(stateEvent(ch), ev)
}

// answered moves the session out of awaiting approval once the last open
// question is settled, back to what it was doing (running, at the least);
// the move is streamed like every other state change.
func (rt *Runtime) answered() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.state != penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL {
		return
	}
	rt.state = rt.beforeApproval
	if rt.state == penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL || rt.state == penguinv1.SessionState_SESSION_STATE_IDLE {
		rt.state = penguinv1.SessionState_SESSION_STATE_RUNNING
	}
	rt.publishState(&penguinv1.RunStateChange{State: rt.state})
}

// busy reports whether a task holds the session.
func (rt *Runtime) busy() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.task != nil
}

// approvalMode returns the session's current approval mode.
func (rt *Runtime) approvalMode() penguinv1.ApprovalMode {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.mode
}

// hold keeps the runtime loaded until the returned release is called.
func (rt *Runtime) hold() (release func()) {
	rt.m.mu.Lock()
	rt.refs++
	rt.m.mu.Unlock()
	return func() { rt.m.release(rt) }
}

// watchedSession is the runtime as the watch of its environment sees it.
type watchedSession struct{ rt *Runtime }

func (w watchedSession) Deliver(n *penguinv1.OmniMessage) { w.rt.m.deliverNotice(w.rt.id, n) }
func (w watchedSession) Busy() bool                       { return w.rt.busy() }
func (w watchedSession) Hold() func()                     { return w.rt.hold() }
