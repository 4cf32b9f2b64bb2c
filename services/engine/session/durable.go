package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Durable tasks. A task outlives the engine running it: the run lease is
// the record that a run is in progress (a finished run releases it), so a
// lease that outlived its replica is a run that was cut off. Every replica
// looks for such leases when it starts and then every TTL/3; the one that
// takes a lease over resumes the run from its log, with the pending input
// resume.Rebuild finds there. A replica that stops cleanly hands its
// durable tasks over instead of aborting them: it writes nothing more to
// their logs and lets their leases expire at once, so the next replica (or
// this one restarted) resumes them as after a crash, through the same path.

// errHandedOver is what a handed-over task's writes get: the task stopped
// here and goes on elsewhere, so nothing more of it may reach the log.
var errHandedOver = errors.New("the task was handed over to the next engine replica")

// StartResuming resumes the runs that were cut off, now and then every
// TTL/3, until Shutdown. Call it once, when the replica is ready to run
// tasks. A transient engine resumes nothing.
func (m *Manager) StartResuming() {
	if m.opts.Transient {
		return
	}
	go func() {
		tick := time.NewTicker(m.leases.TTL() / 3)
		defer tick.Stop()
		for {
			m.resumeStale()
			select {
			case <-m.stopping:
				return
			case <-tick.C:
			}
		}
	}()
}

// resumeStale resumes every cut-off run that this replica can take.
func (m *Manager) resumeStale() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ids, err := m.leases.Stale(ctx)
	if err != nil {
		m.log.Warn("could not look for cut-off runs to resume", "error", err)
		return
	}
	for _, id := range ids {
		if rt := m.loaded(id); rt != nil {
			busy := rt.busy()
			m.release(rt)
			if busy {
				continue // running here: the lease is live, just ours
			}
		}
		resumed, err := m.resume(ctx, id)
		var held *lease.HeldError
		switch {
		case errors.As(err, &held), errors.Is(err, ErrBusy), errors.Is(err, errHandedOver),
			errors.Is(err, ErrUnavailable) && m.isClosing():
			// Another replica was quicker, or this one is stopping (and
			// handed the run over again).
		case err != nil:
			m.log.Warn("could not resume a cut-off run", "session", id, "error", err)
		case resumed:
			m.log.Info("resumed a run cut off by a stopped engine", "session", id)
		}
	}
}

// resume takes the lease of a cut-off run and resumes the run when its
// agent wants durable tasks and its log holds something to go on with. It
// reports whether a task started.
func (m *Manager) resume(ctx context.Context, id string) (bool, error) {
	rt, err := m.acquire(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // deleted since: its lease went with it
	}
	if err != nil {
		return false, err
	}
	defer m.release(rt)
	t := newTask()
	t.examined = make(chan struct{})
	// Whatever the look decides, a claim waiting for it (a client's Run)
	// goes on once resume returns: the session then runs the resumed
	// run, or is free.
	defer close(t.examined)
	if err := rt.claim(ctx, t, false); err != nil {
		return false, err
	}
	// A run taken over is durable from the claim on: an engine stopping
	// while it looks at the run (a rollout stops replicas one after the
	// other) hands it over again instead of aborting it, so the run stays
	// on record for the next replica. One that turns out not durable is
	// released below, as it would be anyway.
	rt.mu.Lock()
	t.durable = !m.opts.Transient
	rt.mu.Unlock()
	// The task may number events it never records (partials, approval
	// questions) before it dies in turn, leaving the log as it found it;
	// the next load would then number from where this one does, and a
	// client following with after_sequence would miss what repeats a
	// number it saw. Reserve the numbers first: the next load starts
	// above them.
	high := rt.journal.Last() + crashGap
	if err := m.updateRow(ctx, id, func(_ *store.Session, c *config) { c.SeqHigh = max(c.SeqHigh, high) }); err != nil {
		rt.handBack(t, err)
		return false, err
	}
	gs, err := rt.goalState(ctx)
	if err != nil {
		rt.handBack(t, err)
		return false, err
	}
	p, err := rt.prepare(ctx, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, gs.Active, leasedRead{})
	if err != nil {
		if errors.Is(err, ErrPrecondition) || errors.Is(err, ErrInvalid) {
			// The session cannot run as it stands (its agent state is
			// gone, its log broken): resuming would fail every time.
			rt.abandon(t, err)
			return false, fmt.Errorf("the run stays stopped: %w", err)
		}
		// Perhaps the environment or the store is down for a moment:
		// the run stays on record for the next look.
		rt.handBack(t, err)
		return false, err
	}
	if !p.st.Config.DurableTasks || p.row.ParentID != "" || (len(p.input) == 0 && len(p.rs.Unasked) == 0 && !gs.Active) {
		// Not durable (the pending input waits for the next Run), a
		// subagent (its parent's task goes on and decides), or nothing
		// left to do (the engine stopped after the task's last request,
		// and no goal wants another round).
		rt.abandon(t, nil)
		return false, nil
	}
	rt.mu.Lock()
	t.prep = p
	rt.mu.Unlock()
	rt.setState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	err = rt.begin(t, p, true)
	if err == nil && gs.Active {
		err = rt.resumeGoal(t, p, gs)
	}
	if err == nil {
		err = rt.journal.Flush()
	}
	if err != nil {
		rt.finish(t, p, loop.Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "the session log could not be written: " + err.Error(), Err: err})
		return false, err
	}
	rt.launch(t, p, RunSpec{}, p.rs.Unasked)
	return true, nil
}

// takeOver resumes the session's run here when it was cut off (its replica
// stopped or died) and waits for a new owner, so that a client that
// attaches to the session follows the resumed run rather than finding the
// session idle while its run waits for the next look of some replica.
// When another replica is quicker, the error says where the run went.
func (m *Manager) takeOver(ctx context.Context, id string) error {
	if m.opts.Transient {
		return nil
	}
	cut, err := m.leases.CutOff(ctx, id)
	if err != nil || !cut {
		return err
	}
	resumed, err := m.resume(ctx, id)
	switch {
	case errors.Is(err, ErrBusy):
		// Another replica took the run a moment ago: the caller goes
		// there.
		return m.elsewhere(ctx, id)
	case errors.Is(err, ErrPrecondition), errors.Is(err, ErrInvalid):
		// The run cannot go on (resume logged why and ended it): the
		// session is idle, and the caller sees how it ended.
		m.log.Warn("a cut-off run could not be resumed for a client that attached", "session", id, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w: session %s: the run a stopped engine replica cut off could not be resumed here yet (%v); Attach again shortly", ErrUnavailable, id, err)
	case resumed:
		m.log.Info("resumed a run cut off by a stopped engine for a client that attached", "session", id)
	}
	return nil
}

// handBack lets go of a task that could not start resuming, leaving its
// run on record as cut off so that the next look tries again.
func (rt *Runtime) handBack(t *task, cause error) {
	rt.letGo(t, cause, t.lease.Handover)
}

// isClosing reports whether Shutdown has begun.
func (m *Manager) isClosing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closing
}

// handOver stops a durable task at once, writing nothing more to its log,
// so that the next replica resumes it; it reports false for a task that is
// not durable, which the caller aborts instead.
func (rt *Runtime) handOver(t *task) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !t.durable || t.closed || rt.m.opts.Transient {
		return false
	}
	t.handover = true
	rt.sealed.Store(true)
	t.cancel(errHandedOver)
	return true
}
