package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/live"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// storeTimeout bounds one write of the log. A write is never cut short by
// the caller going away (an abort must still be recorded), only by this.
const storeTimeout = 30 * time.Second

// Runtime is a loaded session: its sequence counter, its log writer, its
// live buffer, and its task when one runs.
//
// Events are numbered when they are emitted and queued; one writer
// goroutine appends the queued events that belong in the log in one
// transaction (group commit) and only then publishes the whole batch to
// the live buffer, in sequence order. So nothing is seen before it is
// recorded, the live order, the log order and the numbering agree, and the
// agent loop never waits for the database on its way to the next request.
type Runtime struct {
	m   *Manager
	id  string
	buf *live.Buffer

	// emitMu guards the sequence counter and the write queue.
	emitMu        sync.Mutex
	drained       *sync.Cond // signalled when the writer empties the queue
	next          int64
	queue         []queued
	writerActive  bool
	writeErr      error // the log failed: nothing more is published
	lastPersisted int64
	seqSaved      int64 // SeqHigh as last written to the row

	refs int // guarded by m.mu

	mu        sync.Mutex
	task      *task
	watcher   *watcher
	state     penguinv1.SessionState
	mode      penguinv1.ApprovalMode
	approvals map[string]*pending
}

// queued is an event waiting for the writer.
type queued struct {
	ev      *penguinv1.RunEvent
	persist bool
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
		m:             m,
		id:            row.ID,
		buf:           live.New(next-1, m.opts.BufferEvents, m.opts.BufferBytes),
		next:          next,
		lastPersisted: row.LastSequence,
		seqSaved:      cfg.SeqHigh,
		state:         penguinv1.SessionState_SESSION_STATE_IDLE,
		mode:          row.ApprovalMode,
		approvals:     map[string]*pending{},
	}
	rt.drained = sync.NewCond(&rt.emitMu)
	return rt
}

// unload saves the sequence high-water mark and drops the live buffer.
func (rt *Runtime) unload() {
	_ = rt.flush()
	rt.emitMu.Lock()
	high := rt.next - 1
	saved := rt.seqSaved
	rt.emitMu.Unlock()
	if high > saved {
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
func (rt *Runtime) Emit(ctx context.Context, m *penguinv1.OmniMessage) error {
	_, err := rt.publish(ctx, &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: m}}, omni.Persistable(m))
	if err == nil {
		rt.m.metrics.observeEmit(m)
	}
	return err
}

// publish numbers ev and queues it for the writer, which appends its
// message to the log when persist is set and then hands it to the live
// buffer.
func (rt *Runtime) publish(_ context.Context, ev *penguinv1.RunEvent, persist bool) (int64, error) {
	rt.emitMu.Lock()
	defer rt.emitMu.Unlock()
	if rt.writeErr != nil {
		return 0, rt.writeErr
	}
	seq := rt.next
	rt.next++
	ev.Sequence = seq
	rt.queue = append(rt.queue, queued{ev: ev, persist: persist})
	if !rt.writerActive {
		rt.writerActive = true
		go rt.write()
	}
	return seq, nil
}

// write drains the queue: each round appends what belongs in the log in
// one transaction and publishes the round in order.
func (rt *Runtime) write() {
	for {
		rt.emitMu.Lock()
		batch := rt.queue
		rt.queue = nil
		if len(batch) == 0 || rt.writeErr != nil {
			rt.queue = nil
			rt.writerActive = false
			rt.drained.Broadcast()
			rt.emitMu.Unlock()
			return
		}
		rt.emitMu.Unlock()

		events := make([]store.Event, 0, len(batch))
		for _, q := range batch {
			if q.persist {
				events = append(events, store.Event{Sequence: q.ev.GetSequence(), Message: q.ev.GetMessage()})
			}
		}
		var err error
		if len(events) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			err = rt.m.store.AppendEvents(ctx, rt.id, events...)
			cancel()
		}
		if err != nil {
			rt.emitMu.Lock()
			rt.writeErr = fmt.Errorf("record events %d to %d of session %s: %w", events[0].Sequence, events[len(events)-1].Sequence, rt.id, err)
			rt.emitMu.Unlock()
			rt.m.log.Error("the session log could not be written; the session's task stops", "session", rt.id, "error", err)
			continue
		}
		if len(events) > 0 {
			rt.emitMu.Lock()
			rt.lastPersisted = events[len(events)-1].Sequence
			rt.emitMu.Unlock()
		}
		for _, q := range batch {
			rt.buf.Publish(q.ev)
		}
	}
}

// flush waits until every queued event is recorded and published, and
// returns the log's error if it failed.
func (rt *Runtime) flush() error {
	rt.emitMu.Lock()
	defer rt.emitMu.Unlock()
	for rt.writerActive {
		rt.drained.Wait()
	}
	return rt.writeErr
}

// resetLog clears a failure of the log before a new task, which starts by
// reading the log again.
func (rt *Runtime) resetLog() {
	rt.emitMu.Lock()
	defer rt.emitMu.Unlock()
	for rt.writerActive {
		rt.drained.Wait()
	}
	rt.writeErr = nil
}

// publishState publishes a state change (never persisted).
func (rt *Runtime) publishState(ch *penguinv1.RunStateChange) {
	rt.m.watch.StateChanged(rt.id, ch)
	_, _ = rt.publish(context.Background(), &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: ch}}, false)
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

// lastSequence returns the number of the newest event handed out.
func (rt *Runtime) lastSequence() int64 {
	rt.emitMu.Lock()
	defer rt.emitMu.Unlock()
	return rt.next - 1
}

// follow sends the session's events after the sequence number after: first
// what only the store still has, then the live buffer, then live events as
// they come. It returns when ctx ends, when stop says so for a sent event,
// or, with untilIdle, when the session is idle and everything was sent.
// While catching up it falls back to the store whenever the buffer has
// moved on; once caught up, a reader that falls behind the buffer is cut
// off with ErrFellBehind, because the run never waits for it.
func (rt *Runtime) follow(ctx context.Context, after int64, send func(*penguinv1.RunEvent) error, stop func(*penguinv1.RunEvent) bool, untilIdle bool) error {
	cursor := after
	caughtUp := false
	for {
		evs, wake, err := rt.buf.Read(cursor, 256)
		switch {
		case errors.Is(err, live.ErrEvicted):
			if caughtUp {
				return fmt.Errorf("%w: session %s: events after sequence %d were dropped before this stream read them; Attach again with after_sequence=%d", ErrFellBehind, rt.id, cursor, cursor)
			}
			next, err := rt.replayStored(ctx, cursor, send)
			if err != nil {
				return err
			}
			cursor = next
			continue
		case errors.Is(err, live.ErrClosed):
			return fmt.Errorf("%w: session %s was unloaded", ErrUnavailable, rt.id)
		}
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return err
			}
			cursor = ev.GetSequence()
			if stop != nil && stop(ev) {
				return nil
			}
		}
		if len(evs) > 0 {
			continue
		}
		caughtUp = true
		if untilIdle && rt.State() == penguinv1.SessionState_SESSION_STATE_IDLE && !rt.busy() && !rt.pendingWrites() {
			// What was published up to now (the idle state event among
			// it) is in the buffer; send it before stopping.
			if more, _, err := rt.buf.Read(cursor, 1); err == nil && len(more) > 0 {
				continue
			}
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-rt.m.stopping:
			if !rt.busy() {
				return fmt.Errorf("%w: the engine is shutting down", ErrUnavailable)
			}
			// A task still ending (its abort being recorded) is followed
			// to its end; poll until then.
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// pendingWrites reports whether events are queued and not yet published.
func (rt *Runtime) pendingWrites() bool {
	rt.emitMu.Lock()
	defer rt.emitMu.Unlock()
	return rt.writerActive || len(rt.queue) > 0
}

// busy reports whether a task holds the session.
func (rt *Runtime) busy() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.task != nil
}

// replayStored sends the persisted events after cursor that the live
// buffer no longer holds, merged in order with approval requests still
// pending (which are never persisted), and returns the new cursor.
func (rt *Runtime) replayStored(ctx context.Context, cursor int64, send func(*penguinv1.RunEvent) error) (int64, error) {
	oldest := rt.buf.Oldest()
	const page = 500
	events, err := rt.m.store.ReadEvents(ctx, rt.id, cursor, page)
	if err != nil {
		return cursor, err
	}
	pend := rt.pendingBetween(cursor, oldest)
	out := make([]*penguinv1.RunEvent, 0, len(events)+len(pend))
	for _, e := range events {
		if e.Sequence >= oldest {
			break
		}
		out = append(out, &penguinv1.RunEvent{Sequence: e.Sequence, Event: &penguinv1.RunEvent_Message{Message: e.Message}})
	}
	upTo := oldest - 1
	if len(events) == page && len(out) == page {
		// More may follow below oldest: continue from this page's end.
		upTo = out[len(out)-1].GetSequence()
	}
	for _, p := range pend {
		if p.GetSequence() <= upTo {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *penguinv1.RunEvent) int { return int(a.GetSequence() - b.GetSequence()) })
	for _, ev := range out {
		if err := send(ev); err != nil {
			return cursor, err
		}
	}
	return max(cursor, upTo), nil
}

// History returns persisted events after a sequence number.
func (m *Manager) History(ctx context.Context, id string, after int64, limit int) ([]*penguinv1.RunEvent, bool, error) {
	if limit <= 0 {
		limit = 1000
	}
	events, err := m.store.ReadEvents(ctx, id, after, limit+1)
	if err != nil {
		return nil, false, err
	}
	more := len(events) > limit
	if more {
		events = events[:limit]
	}
	out := make([]*penguinv1.RunEvent, len(events))
	for i, e := range events {
		out[i] = &penguinv1.RunEvent{Sequence: e.Sequence, Event: &penguinv1.RunEvent_Message{Message: e.Message}}
	}
	return out, more, nil
}

// Attach sends a session's events after a sequence number and then follows
// its live events; with untilIdle it returns once the session is idle.
func (m *Manager) Attach(ctx context.Context, id string, after int64, untilIdle bool, send func(*penguinv1.RunEvent) error) error {
	if after < 0 {
		return fmt.Errorf("%w: after_sequence must not be negative", ErrInvalid)
	}
	rt, err := m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer m.release(rt)
	if !rt.busy() {
		// A task of another replica is not published here.
		if err := m.elsewhere(ctx, id); err != nil {
			return err
		}
	}
	return rt.follow(ctx, after, send, nil, untilIdle)
}
