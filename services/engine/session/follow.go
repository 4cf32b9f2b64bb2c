package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/live"
)

// follow sends the session's events after the sequence number after: first
// what only the store still has, then the live buffer, then live events as
// they come. It returns when ctx ends, when stop says so for a sent event,
// or, with untilIdle, when the session is idle and everything was sent. A
// task that stopped because its log failed ends the stream with
// ErrUnavailable right after its idle event: the client learns at once,
// from the event and from the status, that the work was not recorded.
// While catching up it falls back to the store whenever the buffer has
// moved on; once caught up, a reader that falls behind the buffer is cut
// off with ErrFellBehind, because the run never waits for it.
func (rt *Runtime) follow(ctx context.Context, after int64, send func(*penguinv1.RunEvent) error, stop func(*penguinv1.RunEvent) bool, untilIdle bool) error {
	cursor := after
	caughtUp := false
	sentIdle := false
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
			sentIdle = sentIdle || isIdle(ev)
			if st := ev.GetState(); st.GetNotRecorded() {
				return fmt.Errorf("%w: session %s: %s", ErrUnavailable, rt.id, st.GetMessage())
			}
			if stop != nil && stop(ev) {
				return nil
			}
		}
		if len(evs) > 0 {
			continue
		}
		caughtUp = true
		if untilIdle && rt.State() == penguinv1.SessionState_SESSION_STATE_IDLE && !rt.busy() && !rt.journal.Pending() {
			// What was published up to now (the idle state event among
			// it) is in the buffer; send it before stopping.
			if more, _, err := rt.buf.Read(cursor, 1); err == nil && len(more) > 0 {
				continue
			}
			if sentIdle {
				return nil
			}
			// The task ended before this stream began, perhaps on another
			// replica: end with the event that said how.
			end, err := rt.lastEnd(ctx)
			if err != nil {
				return err
			}
			return send(end)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-rt.m.stopping:
			if !rt.busy() && !rt.journal.Pending() {
				if more, _, err := rt.buf.Read(cursor, 1); err == nil && len(more) > 0 {
					continue
				}
				if rt.State() == penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER {
					return fmt.Errorf("%w: this engine replica stopped and handed session %s's run over; it goes on on another replica: Attach again with after_sequence=%d", ErrUnavailable, rt.id, cursor)
				}
				return fmt.Errorf("%w: the engine is shutting down", ErrUnavailable)
			}
			// A task still ending (its abort being recorded, its hand-over
			// announced) is followed to its end; poll until then.
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// lastEnd returns the idle state event that ended the session's last
// task, as the store has it: the task may have run on another replica.
func (rt *Runtime) lastEnd(ctx context.Context) (*penguinv1.RunEvent, error) {
	row, err := rt.m.store.GetSession(ctx, rt.id)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(row.Config)
	if err != nil {
		return nil, err
	}
	return cfg.LastEnd.event(), nil
}

// replayStored sends the persisted events after cursor that the live
// buffer no longer holds, merged in order with approval questions still
// open (which are never persisted), and returns the new cursor.
func (rt *Runtime) replayStored(ctx context.Context, cursor int64, send func(*penguinv1.RunEvent) error) (int64, error) {
	oldest := rt.buf.Oldest()
	const page = 500
	events, err := rt.m.store.ReadEvents(ctx, rt.id, cursor, page)
	if err != nil {
		return cursor, err
	}
	pend := rt.board.Between(cursor, oldest)
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
	if !rt.busy() {
		if err := m.takeOver(ctx, id); err != nil {
			return err
		}
	}
	return rt.follow(ctx, after, send, nil, untilIdle)
}
