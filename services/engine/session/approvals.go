package session

import (
	"context"
	"fmt"
	"slices"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// pending is an approval request waiting for Approve.
type pending struct {
	seq    int64
	req    *penguinv1.ApprovalRequest
	answer chan penguinv1.Decision
}

func approvalKey(origin []string, toolCallID string) string {
	return strings.Join(origin, "/") + "|" + toolCallID
}

// asker puts tool calls to whoever watches the session: each question is
// an ApprovalRequest event, answered by Approve. origin is the subagent
// chain the calls come from (empty for the session's own).
type asker struct {
	rt     *Runtime
	origin []string
}

// Ask publishes the request and waits for its answer or for ctx to end.
func (a asker) Ask(ctx context.Context, call *penguinv1.ToolCall, perm penguinv1.Permission) (penguinv1.Decision, error) {
	rt := a.rt
	key := approvalKey(a.origin, call.GetToolCallId())
	p := &pending{
		req:    &penguinv1.ApprovalRequest{ToolCall: call, Permission: perm, Origin: slices.Clone(a.origin)},
		answer: make(chan penguinv1.Decision, 1),
	}
	rt.mu.Lock()
	if _, dup := rt.approvals[key]; dup {
		rt.mu.Unlock()
		return penguinv1.Decision_DECISION_DENY, fmt.Errorf("tool call %s is already waiting for approval", call.GetToolCallId())
	}
	rt.approvals[key] = p
	prev := rt.state
	rt.state = penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL
	rt.mu.Unlock()
	rt.m.watch.Changed(rt.id)

	seq, err := rt.publish(ctx, &penguinv1.RunEvent{Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: p.req}}, false)
	rt.mu.Lock()
	p.seq = seq
	rt.mu.Unlock()

	defer func() {
		rt.mu.Lock()
		delete(rt.approvals, key)
		if len(rt.approvals) == 0 && rt.state == penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL {
			rt.state = prev
			if prev == penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL || prev == penguinv1.SessionState_SESSION_STATE_IDLE {
				rt.state = penguinv1.SessionState_SESSION_STATE_RUNNING
			}
		}
		rt.mu.Unlock()
		rt.m.watch.Changed(rt.id)
	}()
	if err != nil {
		return penguinv1.Decision_DECISION_DENY, err
	}
	select {
	case d := <-p.answer:
		return d, nil
	case <-ctx.Done():
		return penguinv1.Decision_DECISION_DENY, ctx.Err()
	}
}

// pendingBetween returns the approval requests still waiting whose events
// fall in (after, before), to replay them with a stored history.
func (rt *Runtime) pendingBetween(after, before int64) []*penguinv1.RunEvent {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*penguinv1.RunEvent
	for _, p := range rt.approvals {
		if p.seq > after && p.seq < before {
			out = append(out, &penguinv1.RunEvent{Sequence: p.seq, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: p.req}})
		}
	}
	return out
}

// Approve answers a pending approval request.
func (m *Manager) Approve(ctx context.Context, id, toolCallID string, origin []string, d penguinv1.Decision) error {
	if toolCallID == "" {
		return fmt.Errorf("%w: tool_call_id is required", ErrInvalid)
	}
	if d != penguinv1.Decision_DECISION_ALLOW && d != penguinv1.Decision_DECISION_DENY {
		return fmt.Errorf("%w: the decision must be allow or deny (forbidden is the command policy's alone)", ErrInvalid)
	}
	rt := m.loaded(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return err
		}
		if err := m.elsewhere(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: session %s has no pending approval for tool call %s (no task is running)", ErrNotFound, id, toolCallID)
	}
	defer m.release(rt)
	rt.mu.Lock()
	p := rt.approvals[approvalKey(origin, toolCallID)]
	if p != nil {
		delete(rt.approvals, approvalKey(origin, toolCallID))
	}
	rt.mu.Unlock()
	if p == nil {
		where := ""
		if len(origin) > 0 {
			where = " from subagent " + strings.Join(origin, "/")
		}
		return fmt.Errorf("%w: session %s has no pending approval for tool call %s%s", ErrNotFound, id, toolCallID, where)
	}
	p.answer <- d
	return nil
}
