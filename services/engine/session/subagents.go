package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/enginetool/subagent"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// parent is a session as the subagent tools see it (subagent.Parent):
// row is its row as the task that offers the tools read it, tools that
// task's tools, whose environment its subagents share.
type parent struct {
	rt    *Runtime
	row   *store.Session
	tools *toolset
}

func (p *parent) ID() string { return p.rt.id }

// AgentID names the agent by its state directory.
func (p *parent) AgentID() string {
	dir := strings.TrimRight(p.row.AgentState, "/")
	if i := strings.LastIndex(dir, "/"); i >= 0 {
		return dir[i+1:]
	}
	return dir
}

func (p *parent) Spawn(ctx context.Context, model *penguinv1.ModelRef, thinking penguinv1.ThinkingLevel) (string, error) {
	if model == nil {
		model = &penguinv1.ModelRef{Provider: p.row.Provider, ModelId: p.row.ModelID}
	}
	if thinking == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		thinking = p.row.ThinkingLevel
	}
	// The child shares the parent's environment, made now when the
	// parent's task has not needed one yet.
	env, err := p.tools.ensure(ctx)
	if err != nil {
		return "", fmt.Errorf("could not create the environment the subagent shares: %w", err)
	}
	sess, err := p.rt.m.Create(ctx, CreateSpec{
		Model:           model,
		Workspace:       p.row.Workspace,
		ApprovalMode:    p.rt.approvalMode(),
		ThinkingLevel:   thinking,
		AgentState:      p.row.AgentState,
		ParentID:        p.row.ID,
		ProjectID:       p.row.ProjectID,
		Source:          "subagent",
		EnvironmentID:   env.id,
		EnvironmentAddr: env.addr,
		Depth:           1,
	})
	if err != nil {
		return "", err
	}
	return sess.GetSessionId(), nil
}

func (p *parent) Start(ctx context.Context, id, prompt string, thinking penguinv1.ThinkingLevel) (subagent.Run, error) {
	m := p.rt.m
	crt, err := m.acquire(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("could not load the subagent's session: %w", err)
	}
	up := m.loaded(p.rt.id) // the child keeps its parent loaded
	release := func() {
		m.release(crt)
		if up != nil {
			m.release(up)
		}
	}
	origin := []string{id}
	_, from, err := crt.startRun(ctx, RunSpec{
		Prompt:   prompt,
		Thinking: thinking,
		Sender:   penguinv1.Sender_SENDER_PARENT_AGENT,
		Origin:   origin,
		Asker:    p.rt.board.Asker(origin),
		ModeFunc: p.rt.approvalMode,
	})
	if err != nil {
		release()
		return nil, fmt.Errorf("could not start the subagent: %w", err)
	}
	return &childRun{rt: crt, begin: from, release: release}, nil
}

func (p *parent) Child(ctx context.Context, id string) (int64, bool) {
	row, err := p.rt.m.store.GetSession(ctx, id)
	if err != nil || row.ParentID != p.row.ID {
		return 0, false
	}
	return row.LastSequence, true
}

func (p *parent) Abort(ctx context.Context, id, reason string) error {
	_, err := p.rt.m.Abort(ctx, id, reason)
	return err
}

// Emit passes a background child's message to the parent's watchers; it
// carries an origin, so it never reaches the parent's log.
func (p *parent) Emit(m *penguinv1.OmniMessage) { _ = p.rt.Emit(context.Background(), m) }

func (p *parent) Notify(n *penguinv1.OmniMessage) { p.rt.m.deliverNotice(p.rt.id, n) }

// childRun is a subagent's task (subagent.Run).
type childRun struct {
	rt      *Runtime
	begin   int64
	release func()
}

func (c *childRun) Begin() int64 { return c.begin }
func (c *childRun) Release()     { c.release() }

func (c *childRun) Follow(ctx context.Context, after int64, send func(*penguinv1.RunEvent)) error {
	return c.rt.follow(ctx, after, func(ev *penguinv1.RunEvent) error {
		send(ev)
		return nil
	}, isIdle, false)
}

// deliverNotice hands a background completion report to a session: at the
// next turn of its running task, or as a new task when it is idle.
func (m *Manager) deliverNotice(id string, notice *penguinv1.OmniMessage) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	rt, err := m.acquire(ctx, id)
	if err != nil {
		m.log.Warn("lost a background completion report", "session", id, "error", err)
		return
	}
	defer m.release(rt)
	for attempt := 0; attempt < 3; attempt++ {
		rt.mu.Lock()
		t := rt.task
		if t != nil && !t.closed && !t.compaction {
			t.notices = append(t.notices, notice)
			rt.mu.Unlock()
			return
		}
		rt.mu.Unlock()
		if t == nil {
			_, _, err := rt.startRun(ctx, RunSpec{Prompt: notice.GetText().GetText(), Sender: penguinv1.Sender_SENDER_HARNESS})
			if err == nil {
				return
			}
			if !errors.Is(err, ErrBusy) {
				m.log.Warn("could not start a task for a background completion report", "session", id, "error", err)
				return
			}
		}
		// A task is ending or just started: try again shortly.
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
	m.log.Warn("could not deliver a background completion report: the session stayed busy", "session", id)
}
