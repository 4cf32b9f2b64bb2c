package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Board holds the approval questions of one session that wait for a
// person. Each question is published as an ApprovalRequest event for
// whoever watches the session, and Answer settles it. Questions are never
// recorded in the log (a person's answer is, as the approval decision), so
// Between hands the ones still open to a watcher that replays the log.
type Board struct {
	publish func(ev *penguinv1.RunEvent, opens bool) (int64, error)
	settled func()

	mu      sync.Mutex
	pending map[string]*question
}

// question is one approval request waiting for its answer.
type question struct {
	seq    int64
	req    *penguinv1.ApprovalRequest
	answer chan penguinv1.Decision
}

// NewBoard returns an empty board. publish numbers and publishes a
// question's event; opens says it is the only open question, and then
// publish puts the session in awaiting approval in the same step, so that
// the state change is followed by its question on every stream. settled
// is called when the last open question is settled. Both are called under
// the board's lock, so they come in order (neither may call the board).
func NewBoard(publish func(ev *penguinv1.RunEvent, opens bool) (int64, error), settled func()) *Board {
	return &Board{publish: publish, settled: settled, pending: map[string]*question{}}
}

// key identifies a question: a tool call id is unique only within the
// session (or subagent chain) that made the call.
func key(origin []string, toolCallID string) string {
	return strings.Join(origin, "/") + "|" + toolCallID
}

// Asker returns the Asker that puts the calls of origin (the subagent chain
// they come from, empty for the session's own) on the board.
func (b *Board) Asker(origin []string) Asker {
	return boardAsker{b: b, origin: origin}
}

type boardAsker struct {
	b      *Board
	origin []string
}

// Ask publishes the question and waits for its answer or for ctx to end.
func (a boardAsker) Ask(ctx context.Context, call *penguinv1.ToolCall, perm penguinv1.Permission) (penguinv1.Decision, error) {
	b := a.b
	k := key(a.origin, call.GetToolCallId())
	q := &question{
		req:    &penguinv1.ApprovalRequest{ToolCall: call, Permission: perm, Origin: slices.Clone(a.origin)},
		answer: make(chan penguinv1.Decision, 1),
	}
	b.mu.Lock()
	if _, dup := b.pending[k]; dup {
		b.mu.Unlock()
		return penguinv1.Decision_DECISION_DENY, fmt.Errorf("tool call %s is already waiting for approval", call.GetToolCallId())
	}
	b.pending[k] = q
	seq, err := b.publish(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: q.req}}, len(b.pending) == 1)
	q.seq = seq
	b.mu.Unlock()
	defer b.settle(k, q)
	if err != nil {
		return penguinv1.Decision_DECISION_DENY, err
	}
	select {
	case d := <-q.answer:
		return d, nil
	case <-ctx.Done():
		return penguinv1.Decision_DECISION_DENY, ctx.Err()
	}
}

// settle takes q off the board, if it is still there, and reports
// whether it was.
func (b *Board) settle(k string, q *question) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q == nil || b.pending[k] != q {
		return false
	}
	delete(b.pending, k)
	if len(b.pending) == 0 {
		b.settled()
	}
	return true
}

// Answer settles the open question about toolCallID from origin with d. It
// reports false when no such question is open; of two answers to one
// question, only the first counts.
func (b *Board) Answer(origin []string, toolCallID string, d penguinv1.Decision) bool {
	k := key(origin, toolCallID)
	b.mu.Lock()
	q := b.pending[k]
	b.mu.Unlock()
	if !b.settle(k, q) {
		return false
	}
	q.answer <- d
	return true
}

// Between returns the open questions whose events fall in (after,
// before), to replay them along with a stored history.
func (b *Board) Between(after, before int64) []*penguinv1.RunEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*penguinv1.RunEvent
	for _, q := range b.pending {
		if q.seq > after && q.seq < before {
			out = append(out, &penguinv1.RunEvent{Sequence: q.seq, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: q.req}})
		}
	}
	return out
}
