package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Foreground windows of the subagent tools, as the reference sets them.
const (
	defaultSubagentYield = 300 * time.Second
	defaultPollYield     = 10 * time.Second
	// maxReport caps the text a background completion report carries.
	maxReport = 4000
)

// children is the registry of one parent session's running subagents. A
// subagent's id is its child session's id; a finished subagent leaves the
// registry (freeing its slot) but its session stays, so input_subagent can
// give it a follow-up later.
type children struct {
	mu      sync.Mutex
	running map[string]*child
}

// child is one running subagent task.
type child struct {
	id         string
	done       chan struct{}
	cancel     context.CancelFunc
	relay      relay
	background bool

	mu      sync.Mutex
	polls   int             // input_subagent calls waiting for it
	current strings.Builder // assistant text of the request in progress
	final   string          // assistant text of the last completed request
	pending strings.Builder // text not yet handed to the parent
	status  penguinv1.StopReason
	message string
}

// relay passes a child's messages to wherever they go now: the parent's
// tool call while it waits, the parent's session afterwards.
type relay struct {
	mu sync.Mutex
	fn func(*penguinv1.OmniMessage)
}

func (r *relay) set(fn func(*penguinv1.OmniMessage)) {
	r.mu.Lock()
	r.fn = fn
	r.mu.Unlock()
}

func (r *relay) send(m *penguinv1.OmniMessage) {
	r.mu.Lock()
	fn := r.fn
	r.mu.Unlock()
	if fn != nil {
		fn(m)
	}
}

// childrenOf returns the registry of a parent session.
func (m *Manager) childrenOf(parentID string) *children {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subagents == nil {
		m.subagents = map[string]*children{}
	}
	c := m.subagents[parentID]
	if c == nil {
		c = &children{running: map[string]*child{}}
		m.subagents[parentID] = c
	}
	return c
}

// subagentTool returns the engine's implementation of a subagent tool for
// this session, or nil when it offers none: a subagent cannot start
// subagents of its own (depth 1).
func (rt *Runtime) subagentTool(name string, row *store.Session, cfg config) EngineTool {
	if cfg.Depth > 0 {
		return nil
	}
	s := &subagentTools{rt: rt, parent: row, kids: rt.m.childrenOf(rt.id)}
	switch name {
	case agentstate.ToolRunSubagent:
		return toolFunc(s.run)
	case agentstate.ToolInputSubagent:
		return toolFunc(s.input)
	case agentstate.ToolKillSubagent:
		return toolFunc(s.kill)
	}
	return nil
}

type toolFunc func(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage

func (f toolFunc) Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	return f(ctx, call, forward)
}

// subagentTools implements run_subagent, input_subagent and kill_subagent
// for one parent session.
type subagentTools struct {
	rt     *Runtime
	parent *store.Session
	kids   *children
}

func toolFailed(call *penguinv1.ToolCall, format string, args ...any) *penguinv1.OmniMessage {
	return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf(format, args...), penguinv1.StopReason_STOP_REASON_FAILED)
}

func (s *subagentTools) run(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	var args struct {
		Prompt          string `json:"prompt"`
		AgentID         string `json:"agent_id"`
		Provider        string `json:"provider"`
		ModelID         string `json:"model_id"`
		ThinkingLevel   string `json:"thinking_level"`
		YieldTimeMs     *int64 `json:"yield_time_ms"`
		RunInBackground bool   `json:"run_in_background"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil {
		return toolFailed(call, "run_subagent: the arguments are not valid JSON: %v", err)
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return toolFailed(call, "run_subagent: the prompt is required")
	}
	if (args.Provider == "") != (args.ModelID == "") {
		return toolFailed(call, "run_subagent: provider and model_id go together: give both or neither")
	}
	if args.AgentID != "" && args.AgentID != agentID(s.parent.AgentState) {
		return toolFailed(call, "run_subagent: unknown agent %q; only this agent (%s) can be started", args.AgentID, agentID(s.parent.AgentState))
	}
	thinking, err := agentstate.ParseThinkingLevel(args.ThinkingLevel)
	if err != nil {
		return toolFailed(call, "run_subagent: %v", err)
	}
	if thinking == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		thinking = s.parent.ThinkingLevel
	}
	model := &penguinv1.ModelRef{Provider: s.parent.Provider, ModelId: s.parent.ModelID}
	if args.ModelID != "" {
		model = &penguinv1.ModelRef{Provider: args.Provider, ModelId: args.ModelID}
	}
	m := s.rt.m
	s.kids.mu.Lock()
	n := len(s.kids.running)
	s.kids.mu.Unlock()
	if n >= m.opts.MaxSubagents {
		return toolFailed(call, "run_subagent: %d subagents are running already, the most a session may have; wait for one to finish or stop one with kill_subagent", n)
	}
	sess, err := m.Create(ctx, CreateSpec{
		Model:           model,
		Workspace:       s.parent.Workspace,
		ApprovalMode:    s.rt.approvalMode(),
		ThinkingLevel:   thinking,
		AgentState:      s.parent.AgentState,
		ParentID:        s.parent.ID,
		Source:          "subagent",
		EnvironmentID:   s.parent.EnvironmentID,
		EnvironmentAddr: s.parent.EnvironmentAddr,
		Depth:           1,
	})
	if err != nil {
		return toolFailed(call, "run_subagent: could not create the subagent's session: %v", err)
	}
	id := sess.GetSessionId()
	forward(omni.SubagentPointer(id))
	yield := defaultSubagentYield
	if args.YieldTimeMs != nil {
		yield = time.Duration(*args.YieldTimeMs) * time.Millisecond
	}
	return s.start(ctx, call, forward, id, args.Prompt, thinking, 0, yield, args.RunInBackground)
}

// start runs a prompt on a child session and waits for it in the
// foreground for yield, or not at all in the background.
func (s *subagentTools) start(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage), id, prompt string, thinking penguinv1.ThinkingLevel, after int64, yield time.Duration, background bool) *penguinv1.OmniMessage {
	m := s.rt.m
	c := &child{id: id, done: make(chan struct{}), background: background}
	c.relay.set(forward)
	s.kids.mu.Lock()
	if len(s.kids.running) >= m.opts.MaxSubagents {
		s.kids.mu.Unlock()
		return toolFailed(call, "%s: %d subagents are running already; wait for one or stop one with kill_subagent", call.GetName(), len(s.kids.running))
	}
	s.kids.running[id] = c
	s.kids.mu.Unlock()

	crt, err := m.acquire(ctx, id)
	if err != nil {
		s.forget(id)
		return toolFailed(call, "%s: could not load the subagent's session: %v", call.GetName(), err)
	}
	parent := m.loaded(s.rt.id) // the child keeps its parent loaded
	spec := RunSpec{
		Prompt:   prompt,
		Thinking: thinking,
		Sender:   penguinv1.Sender_SENDER_PARENT_AGENT,
		Origin:   []string{id},
		Asker:    asker{rt: s.rt, origin: []string{id}},
		ModeFunc: s.rt.approvalMode,
	}
	_, from, err := crt.startRun(context.WithoutCancel(ctx), spec)
	if err != nil {
		m.release(crt)
		if parent != nil {
			m.release(parent)
		}
		s.forget(id)
		return toolFailed(call, "%s: could not start the subagent: %v", call.GetName(), err)
	}
	if after > 0 {
		from = max(from, after)
	} else {
		from = 0 // a new child: its stream opens with its session_meta
	}
	fctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer func() {
			cancel()
			m.release(crt)
			s.finished(c)
			if parent != nil {
				m.release(parent)
			}
		}()
		err := crt.follow(fctx, from, func(ev *penguinv1.RunEvent) error {
			c.observe(ev)
			if msg := ev.GetMessage(); msg != nil {
				c.relay.send(omni.WithOrigin(msg, id))
			}
			return nil
		}, isIdle, false)
		if err != nil && !errors.Is(err, context.Canceled) {
			m.log.Warn("stopped following a subagent", "parent", s.rt.id, "subagent", id, "error", err)
		}
	}()
	if background {
		c.relay.set(s.toParent(id))
		return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("The subagent is working in the background (subagent_id: %s). Its result will arrive as a message when it is done; input_subagent polls it, kill_subagent stops it.", id), 0)
	}
	return s.wait(ctx, call, c, yield)
}

// wait waits for a child in the foreground. When the window passes, the
// child moves to the background; when the parent's call is aborted, the
// child is aborted with it.
func (s *subagentTools) wait(ctx context.Context, call *penguinv1.ToolCall, c *child, yield time.Duration) *penguinv1.OmniMessage {
	timer := time.NewTimer(yield)
	defer timer.Stop()
	select {
	case <-c.done:
		return c.report(call)
	case <-timer.C:
		c.mu.Lock()
		c.background = true
		c.mu.Unlock()
		c.relay.set(s.toParent(c.id))
		text := c.takePending()
		msg := fmt.Sprintf("The subagent is still working; it moved to the background (subagent_id: %s). Its result will arrive as a message when it is done; input_subagent polls it or waits longer, kill_subagent stops it.", c.id)
		if text != "" {
			msg += "\nIts output so far:\n" + text
		}
		return omni.ToolCallOutput(call.GetToolCallId(), msg, 0)
	case <-ctx.Done():
		actx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_, _ = s.rt.m.Abort(actx, c.id, "the parent's call was interrupted")
		return omni.ToolCallOutput(call.GetToolCallId(), "Tool call aborted.", penguinv1.StopReason_STOP_REASON_ABORTED)
	}
}

// toParent forwards a background child's messages to the parent session's
// watchers (never to its log: they carry an origin).
func (s *subagentTools) toParent(id string) func(*penguinv1.OmniMessage) {
	return func(m *penguinv1.OmniMessage) {
		_ = s.rt.Emit(context.Background(), m)
	}
}

func (s *subagentTools) forget(id string) {
	s.kids.mu.Lock()
	delete(s.kids.running, id)
	s.kids.mu.Unlock()
}

// finished takes a child out of the registry; a background child reports
// its completion to the parent.
func (s *subagentTools) finished(c *child) {
	s.forget(c.id)
	c.mu.Lock()
	// A poll waiting for the child hands its result over itself.
	bg := c.background && c.polls == 0
	c.mu.Unlock()
	close(c.done)
	if bg {
		s.rt.m.deliverNotice(s.rt.id, c.notice())
	}
}

func (s *subagentTools) input(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	var args struct {
		SubagentID  string `json:"subagent_id"`
		Prompt      string `json:"prompt"`
		YieldTimeMs *int64 `json:"yield_time_ms"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || args.SubagentID == "" {
		return toolFailed(call, `input_subagent takes {"subagent_id": "...", "prompt": "..."}; the subagent_id is missing or the arguments are not valid JSON`)
	}
	s.kids.mu.Lock()
	c := s.kids.running[args.SubagentID]
	s.kids.mu.Unlock()
	if c != nil {
		if strings.TrimSpace(args.Prompt) != "" {
			return toolFailed(call, "input_subagent: subagent %s is still working; a follow-up prompt is accepted only once it is idle (poll with an empty prompt)", c.id)
		}
		yield := defaultPollYield
		if args.YieldTimeMs != nil {
			yield = time.Duration(*args.YieldTimeMs) * time.Millisecond
		}
		c.mu.Lock()
		c.polls++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.polls--
			c.mu.Unlock()
		}()
		timer := time.NewTimer(yield)
		defer timer.Stop()
		select {
		case <-c.done:
			return c.report(call)
		case <-timer.C:
			text := c.takePending()
			if text == "" {
				text = "(no new output)"
			}
			return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("Subagent %s is still working. New output:\n%s", c.id, text), 0)
		case <-ctx.Done():
			return omni.ToolCallOutput(call.GetToolCallId(), "Tool call aborted.", penguinv1.StopReason_STOP_REASON_ABORTED)
		}
	}
	row, err := s.rt.m.store.GetSession(ctx, args.SubagentID)
	if err != nil || row.ParentID != s.parent.ID {
		return toolFailed(call, "input_subagent: no subagent %q belongs to this session", args.SubagentID)
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("Subagent %s is idle; give it a prompt to continue its work.", row.ID), 0)
	}
	yield := defaultSubagentYield
	if args.YieldTimeMs != nil {
		yield = time.Duration(*args.YieldTimeMs) * time.Millisecond
	}
	return s.start(ctx, call, forward, row.ID, args.Prompt, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, row.LastSequence, yield, false)
}

func (s *subagentTools) kill(ctx context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	var args struct {
		SubagentID string `json:"subagent_id"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || args.SubagentID == "" {
		return toolFailed(call, `kill_subagent takes {"subagent_id": "..."}; the subagent_id is missing or the arguments are not valid JSON`)
	}
	s.kids.mu.Lock()
	c := s.kids.running[args.SubagentID]
	if c != nil {
		// A killed subagent sends no completion report: this output is it.
		c.mu.Lock()
		c.background = false
		c.mu.Unlock()
	}
	s.kids.mu.Unlock()
	if c == nil {
		row, err := s.rt.m.store.GetSession(ctx, args.SubagentID)
		if err != nil || row.ParentID != s.parent.ID {
			return toolFailed(call, "kill_subagent: no subagent %q belongs to this session", args.SubagentID)
		}
		return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("Subagent %s was idle; nothing to stop.", args.SubagentID), 0)
	}
	if _, err := s.rt.m.Abort(ctx, c.id, "stopped by kill_subagent"); err != nil {
		return toolFailed(call, "kill_subagent: %v", err)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	text := c.takePending()
	msg := fmt.Sprintf("Subagent %s was stopped.", c.id)
	if text != "" {
		msg += " Output it had not delivered:\n" + text
	}
	return omni.ToolCallOutput(call.GetToolCallId(), msg, 0)
}

// observe follows a child's events to keep its answer.
func (c *child) observe(ev *penguinv1.RunEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := ev.GetState(); st != nil && st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
		c.status, c.message = st.GetStatus(), st.GetMessage()
		return
	}
	m := ev.GetMessage()
	switch {
	case m.GetRequestBegin() != nil:
		c.current.Reset()
	case m.GetRequestEnd() != nil:
		if m.GetRequestEnd().GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
			c.final = c.current.String()
		}
	case m.GetText() != nil && m.GetText().GetRole() == penguinv1.Role_ROLE_ASSISTANT && len(m.GetOrigin()) == 0:
		t := m.GetText().GetText()
		if c.current.Len() > 0 {
			c.current.WriteString("\n")
		}
		c.current.WriteString(t)
		if c.pending.Len() > 0 {
			c.pending.WriteString("\n")
		}
		c.pending.WriteString(t)
	}
}

func (c *child) takePending() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.pending.String()
	c.pending.Reset()
	return s
}

// report is the tool output of a child that finished.
func (c *child) report(call *penguinv1.ToolCall) *penguinv1.OmniMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending.Reset()
	if c.status == penguinv1.StopReason_STOP_REASON_COMPLETED {
		answer := c.final
		if answer == "" {
			answer = "(the subagent finished without a text answer)"
		}
		return omni.ToolCallOutput(call.GetToolCallId(), answer, 0)
	}
	msg := fmt.Sprintf("The subagent (subagent_id: %s) ended with %s", c.id, enumword.Word(c.status))
	if c.message != "" {
		msg += ": " + c.message
	}
	if c.final != "" {
		msg += "\nIts last answer:\n" + c.final
	}
	return omni.ToolCallOutput(call.GetToolCallId(), msg, penguinv1.StopReason_STOP_REASON_FAILED)
}

// notice is the completion report of a background child, a user message
// from the harness.
func (c *child) notice() *penguinv1.OmniMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	status := enumword.Word(c.status)
	detail := "finished"
	if c.message != "" {
		detail = c.message
	}
	out := c.final
	if out == "" {
		out = c.pending.String()
	}
	if len(out) > maxReport {
		out = "[..." + fmt.Sprint(len(out)-maxReport) + " chars of earlier output dropped...]\n" + out[len(out)-maxReport:]
	}
	head := loop.Block("background_task_done", fmt.Sprintf("kind: subagent\nid: %s\nstatus: %s\ndetail: %s", c.id, status, detail))
	return loop.HarnessText(head + "\nThe subagent's answer:\n" + out)
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

// agentID names an agent by its state directory.
func agentID(dir string) string {
	dir = strings.TrimRight(dir, "/")
	if i := strings.LastIndex(dir, "/"); i >= 0 {
		return dir[i+1:]
	}
	return dir
}
