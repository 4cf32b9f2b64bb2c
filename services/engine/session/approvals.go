package session

import (
	"context"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Approve answers an open approval question of a session's task.
func (m *Manager) Approve(ctx context.Context, id, toolCallID string, origin []string, d penguinv1.Decision) error {
	if toolCallID == "" {
		return fmt.Errorf("%w: tool_call_id is required", ErrInvalid)
	}
	if d != penguinv1.Decision_DECISION_ALLOW && d != penguinv1.Decision_DECISION_DENY {
		return fmt.Errorf("%w: the decision must be allow or deny (forbidden is the command policy's alone)", ErrInvalid)
	}
	rt, err := m.loadedHere(ctx, id)
	if err != nil {
		return err
	}
	if rt == nil {
		return fmt.Errorf("%w: session %s has no pending approval for tool call %s (no task is running)", ErrNotFound, id, toolCallID)
	}
	defer m.release(rt)
	if !rt.board.Answer(origin, toolCallID, d) {
		where := ""
		if len(origin) > 0 {
			where = " from subagent " + strings.Join(origin, "/")
		}
		return fmt.Errorf("%w: session %s has no pending approval for tool call %s%s", ErrNotFound, id, toolCallID, where)
	}
	return nil
}
