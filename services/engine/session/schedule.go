package session

import (
	"context"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// StartScheduled starts a schedule's run on a session: a task with spec's
// prompt, sent as penguinv1.Sender_SENDER_SERVER, unless the session's log
// already holds that prompt from the server after sequence since, which
// means that a replica that died before it could say so had started the
// run. It reports whether it started the task; ErrBusy when the session
// runs another one.
//
// The look at the log and the start happen while the session's run lease
// is held, so that two replicas that both believe they own the run are
// serialised by the lease, and the second finds the first one's prompt.
// A run found started is left to the durable-task path: its lease is
// handed back as cut off, so the next look at cut-off runs resumes it if
// it has anything left to do.
func (m *Manager) StartScheduled(ctx context.Context, id string, since int64, spec RunSpec) (bool, error) {
	spec.Sender = penguinv1.Sender_SENDER_SERVER
	rt, err := m.acquire(ctx, id)
	if err != nil {
		return false, err
	}
	defer m.release(rt)
	t := newTask()
	if err := rt.claim(ctx, t, false); err != nil {
		return false, err
	}
	events, err := m.store.ReadEvents(ctx, id, since, 0)
	if err != nil {
		rt.handBack(t, err)
		return false, err
	}
	for _, e := range events {
		if tx := e.Message.GetText(); tx != nil && tx.GetSender() == spec.Sender && tx.GetText() == spec.Prompt {
			rt.handBack(t, nil)
			return false, nil
		}
	}
	if _, err := rt.startClaimed(ctx, t, spec); err != nil {
		return false, err
	}
	return true, nil
}

// Replica returns the name under which this replica holds run leases, and
// how long a lease lasts between renewals.
func (m *Manager) Replica() (string, time.Duration) { return m.leases.Owner(), m.leases.TTL() }

// Running reports whether some replica holds a live run lease on the
// session: a task of it runs, or was cut off less than a lease ago.
func (m *Manager) Running(ctx context.Context, id string) (bool, error) {
	_, _, held, err := m.leases.Holder(ctx, id)
	return held, err
}

// Closing reports whether the engine is shutting down and starts nothing.
func (m *Manager) Closing() bool { return m.isClosing() }

// NewID returns a fresh session id, for a caller that names a session
// before it creates it (CreateSpec.ID).
func NewID() string { return newSessionID() }
