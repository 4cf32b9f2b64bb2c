package session

import (
	"context"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// loadedHere returns the session's runtime, with a reference, when it is
// loaded on this replica. When it is not, it returns nil, or the error
// that tells the caller why there is nothing to act on: the session does
// not exist, or another replica runs it.
func (m *Manager) loadedHere(ctx context.Context, id string) (*Runtime, error) {
	if rt := m.loaded(id); rt != nil {
		return rt, nil
	}
	if _, err := m.store.GetSession(ctx, id); err != nil {
		return nil, err
	}
	return nil, m.elsewhere(ctx, id)
}

// Steer queues a steering message, its text and its images, for the
// session's running task. The images go to the model as a prompt's do
// (imageMessages).
func (m *Manager) Steer(ctx context.Context, id, text string, images []string) error {
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		return fmt.Errorf("%w: the steering text is empty", ErrInvalid)
	}
	rt, err := m.loadedHere(ctx, id)
	if err != nil {
		return err
	}
	if rt == nil {
		return fmt.Errorf("%w: session %s is idle; start a Run instead", ErrNotRunning, id)
	}
	defer m.release(rt)
	steerable := func() (*task, error) {
		t := rt.task
		if t == nil || t.closed || t.compaction {
			return nil, fmt.Errorf("%w: session %s has no task to steer; start a Run instead", ErrNotRunning, id)
		}
		return t, nil
	}
	rt.mu.Lock()
	t, err := steerable()
	var p *prepared
	if t != nil {
		p = t.prep
	}
	rt.mu.Unlock()
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		text = "(see the attached images)"
	}
	msgs := []*penguinv1.OmniMessage{loop.SteeringMessage(text)}
	if len(images) > 0 {
		if p == nil {
			return fmt.Errorf("%w: session %s's task is still starting; send the images again in a moment", ErrNotRunning, id)
		}
		// Saving an image for a text-only model writes files; the
		// runtime is not held meanwhile.
		imgs, err := rt.imageMessages(ctx, p, images)
		if err != nil {
			return err
		}
		msgs = append(msgs, imgs...)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if now, err := steerable(); err != nil || now != t {
		return fmt.Errorf("%w: session %s's task ended before the steering message was queued; start a Run instead", ErrNotRunning, id)
	}
	t.steering = append(t.steering, msgs)
	return nil
}

// Abort interrupts the session's task and waits until it has ended (or
// ctx ends). It reports false when no task was running.
func (m *Manager) Abort(ctx context.Context, id, reason string) (bool, error) {
	rt, err := m.loadedHere(ctx, id)
	if rt == nil || err != nil {
		return false, err
	}
	defer m.release(rt)
	rt.mu.Lock()
	t := rt.task
	rt.mu.Unlock()
	if t == nil {
		return false, nil
	}
	t.cancel(&loop.Aborted{Reason: reason})
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return true, nil
}

// RetryNow cuts short the session's wait before a reconnect. It reports
// false when the session was not waiting.
func (m *Manager) RetryNow(ctx context.Context, id string) (bool, error) {
	rt, err := m.loadedHere(ctx, id)
	if rt == nil || err != nil {
		return false, err
	}
	defer m.release(rt)
	rt.mu.Lock()
	t := rt.task
	waiting := t != nil && t.waiting
	rt.mu.Unlock()
	if !waiting {
		return false, nil
	}
	select {
	case t.retryNow <- struct{}{}:
	default:
	}
	return true, nil
}

// Compact compacts an idle session's context now, folding in its pending
// input, and reports how it ended.
func (m *Manager) Compact(ctx context.Context, id string, mode penguinv1.CompactionMode) (penguinv1.StopReason, string, error) {
	rt, err := m.acquire(ctx, id)
	if err != nil {
		return 0, "", err
	}
	defer m.release(rt)
	t := newTask()
	t.compaction = true
	if err := rt.claim(ctx, t, false); err != nil {
		return 0, "", err
	}
	p, err := rt.prepare(ctx, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, false, leasedRead{})
	if err != nil {
		rt.abandon(t, err)
		return 0, "", err
	}
	if len(p.mctx.History) == 0 {
		p.releaseEnvironment(m, rt.id)
		rt.abandon(t, nil)
		msg := "nothing to compact: the context is empty"
		if p.rs.MetaSequence > 1 {
			// The context was opened by a compaction and holds nothing
			// since; a caller can tell this answer from "the context
			// is empty".
			msg = "nothing to compact: the context was just compacted"
		}
		return penguinv1.StopReason_STOP_REASON_FAILED, msg, nil
	}
	rt.setState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	if err := rt.begin(t, p, false); err != nil {
		rt.finish(t, p, loop.Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: err.Error(), Err: err})
		return 0, "", err
	}
	deps := loop.Deps{LLM: m.opts.LLM, Tools: p.tools, Approver: &approval.Gate{}, Emitter: rt, Host: &host{rt: rt, t: t, p: p}}
	go func() {
		cr := loop.Compact(t.ctx, deps, p.settings, p.mctx, mode, p.input)
		res := loop.Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Err: cr.Err()}
		switch {
		case cr.Err() != nil:
			res.Status, res.Message = penguinv1.StopReason_STOP_REASON_FAILED, "the session log could not be written: "+cr.Err().Error()
		case cr.Aborted():
			res.Status = penguinv1.StopReason_STOP_REASON_ABORTED
		case !cr.OK():
			res.Status, res.Message = penguinv1.StopReason_STOP_REASON_FAILED, cr.Message()
		}
		t.result = res
		rt.finish(t, p, res)
	}()
	select {
	case <-t.done:
		return t.result.Status, t.result.Message, nil
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
}
