// Package subagent is the engine tools run_subagent, input_subagent and
// kill_subagent: a session's model hands a self-contained subtask to a
// child session, which runs its own task with the parent's agent, in the
// parent's environment, while the parent waits in the foreground or goes
// on with the child in the background.
//
// The tools see the session layer only through Parent, so this package
// holds the subagent protocol (arguments, waiting windows, the registry of
// running children, the reports) and none of the session machinery.
//
// A subagent's id is its child session's id. A finished subagent leaves
// the registry, freeing its slot, but its session stays, so input_subagent
// can give it a follow-up later. Subagents cannot start subagents of their
// own (depth 1): the session layer does not offer these tools to a child.
package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// Foreground windows of the tools, and the limit on running subagents.
const (
	// DefaultYield is how long run_subagent, and input_subagent with a
	// follow-up prompt, wait in the foreground.
	DefaultYield = 300 * time.Second
	// DefaultPollYield is how long input_subagent waits for a running
	// subagent when it only polls.
	DefaultPollYield = 10 * time.Second
	// DefaultMax is how many subagents one session may run at once when
	// the registry is given no limit.
	DefaultMax = 8
	// abortWait bounds how long an interrupted run_subagent call waits for
	// its child to record the abort.
	abortWait = 30 * time.Second
)

// Parent is the session whose model calls the tools, as they see it.
type Parent interface {
	// ID is the parent's session id.
	ID() string
	// AgentID names the parent's agent, the only one a subagent may run.
	AgentID() string
	// Spawn creates a child session that shares the parent's agent and
	// environment, with model (nil: the parent's) and thinking level
	// (unspecified: the parent's), and returns its id.
	Spawn(ctx context.Context, model *penguinv1.ModelRef, thinking penguinv1.ThinkingLevel) (string, error)
	// Start starts a task with prompt on the child session id. Its tool
	// calls are approved in the parent's approval mode, and questions to a
	// person go through the parent, with the child in their origin.
	Start(ctx context.Context, id, prompt string, thinking penguinv1.ThinkingLevel) (Run, error)
	// Child reports whether id is a child session of this parent, and the
	// last sequence number of its log.
	Child(ctx context.Context, id string) (last int64, ok bool)
	// Abort interrupts the child session's task and waits for it to end.
	Abort(ctx context.Context, id, reason string) error
	// Emit passes a background child's message to the parent's watchers.
	Emit(m *penguinv1.OmniMessage)
	// Notify hands the completion report of a background child to the
	// parent's model.
	Notify(notice *penguinv1.OmniMessage)
}

// Run is a child's task once started.
type Run interface {
	// Begin is the sequence number just before the task's first event.
	Begin() int64
	// Follow passes the child's events after the sequence number after to
	// send until the task ends or ctx ends.
	Follow(ctx context.Context, after int64, send func(*penguinv1.RunEvent)) error
	// Release lets go of the child's session.
	Release()
}

// Registry holds the running subagents of every session of one engine.
type Registry struct {
	max int

	mu      sync.Mutex
	running map[string]map[string]*child // parent id → child id → child
	// reserved counts, per parent, the slots taken by run_subagent calls
	// whose child session is still being created: the limit is checked
	// and the slot taken under one lock, before the session exists, so a
	// refused call leaves nothing behind.
	reserved map[string]int
}

// NewRegistry returns an empty registry whose sessions may each run max
// subagents at once; zero or less means DefaultMax.
func NewRegistry(max int) *Registry {
	if max <= 0 {
		max = DefaultMax
	}
	return &Registry{max: max, running: map[string]map[string]*child{}, reserved: map[string]int{}}
}

// usedLocked is how many slots parent holds: running subagents and
// reservations.
func (r *Registry) usedLocked(parent string) int {
	return len(r.running[parent]) + r.reserved[parent]
}

// reserve takes a slot for a subagent of parent that is about to be
// created, unless parent holds the most it may; it returns the number
// held otherwise. The slot is released by unreserve, or turned into the
// child's by add.
func (r *Registry) reserve(parent string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.usedLocked(parent); n >= r.max {
		return n, false
	}
	r.reserved[parent]++
	return 0, true
}

// unreserve gives back a slot reserve took.
func (r *Registry) unreserve(parent string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreserveLocked(parent)
}

func (r *Registry) unreserveLocked(parent string) {
	if r.reserved[parent]--; r.reserved[parent] <= 0 {
		delete(r.reserved, parent)
	}
}

// add registers c under parent. With reserved, c takes the slot reserve
// took for it; otherwise it needs a free slot, and add returns the number
// held when there is none.
func (r *Registry) add(parent string, c *child, reserved bool) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reserved {
		r.unreserveLocked(parent)
	} else if n := r.usedLocked(parent); n >= r.max {
		return n, false
	}
	kids := r.running[parent]
	if kids == nil {
		kids = map[string]*child{}
		r.running[parent] = kids
	}
	kids[c.id] = c
	return 0, true
}

// get returns parent's running subagent id, or nil.
func (r *Registry) get(parent, id string) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[parent][id]
}

// stop returns parent's running subagent id, marked as no longer in the
// background (a stopped subagent sends no completion report), or nil. The
// mark is set under the registry's lock, so a child that finishes at the
// same moment either is gone already or sees it.
func (r *Registry) stop(parent, id string) *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.running[parent][id]
	if c != nil {
		c.mu.Lock()
		c.background = false
		c.mu.Unlock()
	}
	return c
}

// remove takes a subagent out of the registry; a parent with none left
// leaves it too, so the registry holds only running work.
func (r *Registry) remove(parent, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running[parent], id)
	if len(r.running[parent]) == 0 {
		delete(r.running, parent)
	}
}

// Tools are the subagent tools of one parent session.
type Tools struct {
	parent Parent
	reg    *Registry
	log    *slog.Logger
}

// For returns the tools of the session p, registering its subagents in r.
func (r *Registry) For(p Parent, log *slog.Logger) *Tools {
	return &Tools{parent: p, reg: r, log: log}
}

// Tool returns the tool named name, or nil when it is not a subagent tool.
func (s *Tools) Tool(name string) enginetool.Tool {
	switch name {
	case agentconfig.ToolRunSubagent:
		return enginetool.Func(s.run)
	case agentconfig.ToolInputSubagent:
		return enginetool.Func(s.input)
	case agentconfig.ToolKillSubagent:
		return enginetool.Func(s.kill)
	}
	return nil
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

// yieldOf reads an optional yield_time_ms argument.
func yieldOf(ms *int64, def time.Duration) time.Duration {
	if ms == nil {
		return def
	}
	return time.Duration(*ms) * time.Millisecond
}

func (s *Tools) run(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
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
		return enginetool.Failed(call, "run_subagent: the arguments are not valid JSON: %v", err)
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return enginetool.Failed(call, "run_subagent: the prompt is required")
	}
	if (args.Provider == "") != (args.ModelID == "") {
		return enginetool.Failed(call, "run_subagent: provider and model_id go together: give both or neither")
	}
	if agent := s.parent.AgentID(); args.AgentID != "" && args.AgentID != agent {
		return enginetool.Failed(call, "run_subagent: unknown agent %q; only this agent (%s) can be started", args.AgentID, agent)
	}
	thinking, err := agentconfig.ParseThinkingLevel(args.ThinkingLevel)
	if err != nil {
		return enginetool.Failed(call, "run_subagent: %v", err)
	}
	var model *penguinv1.ModelRef
	if args.ModelID != "" {
		model = &penguinv1.ModelRef{Provider: args.Provider, ModelId: args.ModelID}
	}
	if n, ok := s.reg.reserve(s.parent.ID()); !ok {
		return enginetool.Failed(call, "run_subagent: %d subagents are running already, the most a session may have; wait for one to finish or stop one with kill_subagent", n)
	}
	id, err := s.parent.Spawn(ctx, model, thinking)
	if err != nil {
		s.reg.unreserve(s.parent.ID())
		return enginetool.Failed(call, "run_subagent: could not create the subagent's session: %v", err)
	}
	forward(omni.SubagentPointer(id))
	return s.start(ctx, call, forward, id, args.Prompt, thinking, 0, yieldOf(args.YieldTimeMs, DefaultYield), args.RunInBackground, true)
}

// start runs a prompt on a child session and waits for it in the
// foreground for yield, or not at all in the background. after is where a
// follow-up's events start; zero follows a new child from its
// session_meta. reserved says the child's slot was reserved already (a
// new child); a follow-up needs a free one.
func (s *Tools) start(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage), id, prompt string, thinking penguinv1.ThinkingLevel, after int64, yield time.Duration, background, reserved bool) *penguinv1.OmniMessage {
	c := &child{id: id, done: make(chan struct{}), background: background}
	c.relay.set(forward)
	if n, ok := s.reg.add(s.parent.ID(), c, reserved); !ok {
		return enginetool.Failed(call, "%s: %d subagents are running already; wait for one or stop one with kill_subagent", call.GetName(), n)
	}
	run, err := s.parent.Start(context.WithoutCancel(ctx), id, prompt, thinking)
	if err != nil {
		s.reg.remove(s.parent.ID(), id)
		return enginetool.Failed(call, "%s: %v", call.GetName(), err)
	}
	from := int64(0)
	if after > 0 {
		from = max(run.Begin(), after)
	}
	fctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer func() {
			cancel()
			run.Release()
			s.finished(c)
		}()
		err := run.Follow(fctx, from, func(ev *penguinv1.RunEvent) {
			c.observe(ev)
			if msg := ev.GetMessage(); msg != nil {
				c.relay.send(omni.WithOrigin(msg, id))
			}
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("stopped following a subagent", "parent", s.parent.ID(), "subagent", id, "error", err)
		}
	}()
	if background {
		c.relay.set(s.parent.Emit)
		return enginetool.Output(call, fmt.Sprintf("The subagent is working in the background (subagent_id: %s). Its result will arrive as a message when it is done; input_subagent polls it, kill_subagent stops it.", id))
	}
	return s.wait(ctx, call, c, yield)
}

// wait waits for a child in the foreground. When the window passes, the
// child moves to the background; when the parent's call is aborted, the
// child is aborted with it.
func (s *Tools) wait(ctx context.Context, call *penguinv1.ToolCall, c *child, yield time.Duration) *penguinv1.OmniMessage {
	switch c.await(ctx, yield) {
	case finished:
		return c.report(call)
	case windowPassed:
		c.mu.Lock()
		c.background = true
		c.mu.Unlock()
		c.relay.set(s.parent.Emit)
		text := c.takePending()
		msg := fmt.Sprintf("The subagent is still working; it moved to the background (subagent_id: %s). Its result will arrive as a message when it is done; input_subagent polls it or waits longer, kill_subagent stops it.", c.id)
		if text != "" {
			msg += "\nIts output so far:\n" + text
		}
		return enginetool.Output(call, msg)
	default:
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortWait)
		defer cancel()
		_ = s.parent.Abort(actx, c.id, "the parent's call was interrupted")
		return enginetool.Aborted(call)
	}
}

// finished takes a child out of the registry; a background child reports
// its completion to the parent.
func (s *Tools) finished(c *child) {
	s.reg.remove(s.parent.ID(), c.id)
	c.mu.Lock()
	// A poll waiting for the child hands its result over itself.
	bg := c.background && c.polls == 0
	c.mu.Unlock()
	close(c.done)
	if bg {
		s.parent.Notify(c.notice())
	}
}

func (s *Tools) input(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	var args struct {
		SubagentID  string `json:"subagent_id"`
		Prompt      string `json:"prompt"`
		YieldTimeMs *int64 `json:"yield_time_ms"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || args.SubagentID == "" {
		return enginetool.Failed(call, `input_subagent takes {"subagent_id": "...", "prompt": "..."}; the subagent_id is missing or the arguments are not valid JSON`)
	}
	if c := s.reg.get(s.parent.ID(), args.SubagentID); c != nil {
		if strings.TrimSpace(args.Prompt) != "" {
			return enginetool.Failed(call, "input_subagent: subagent %s is still working; a follow-up prompt is accepted only once it is idle (poll with an empty prompt)", c.id)
		}
		return s.poll(ctx, call, c, yieldOf(args.YieldTimeMs, DefaultPollYield))
	}
	last, ok := s.parent.Child(ctx, args.SubagentID)
	if !ok {
		return enginetool.Failed(call, "input_subagent: no subagent %q belongs to this session", args.SubagentID)
	}
	if strings.TrimSpace(args.Prompt) == "" {
		return enginetool.Output(call, fmt.Sprintf("Subagent %s is idle; give it a prompt to continue its work.", args.SubagentID))
	}
	return s.start(ctx, call, forward, args.SubagentID, args.Prompt, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, last, yieldOf(args.YieldTimeMs, DefaultYield), false, false)
}

// poll waits up to yield for a running child and reports its result, or
// the output it produced meanwhile.
func (s *Tools) poll(ctx context.Context, call *penguinv1.ToolCall, c *child, yield time.Duration) *penguinv1.OmniMessage {
	c.mu.Lock()
	c.polls++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.polls--
		c.mu.Unlock()
	}()
	switch c.await(ctx, yield) {
	case finished:
		return c.report(call)
	case windowPassed:
		text := c.takePending()
		if text == "" {
			text = "(no new output)"
		}
		return enginetool.Output(call, fmt.Sprintf("Subagent %s is still working. New output:\n%s", c.id, text))
	default:
		return enginetool.Aborted(call)
	}
}

func (s *Tools) kill(ctx context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	var args struct {
		SubagentID string `json:"subagent_id"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || args.SubagentID == "" {
		return enginetool.Failed(call, `kill_subagent takes {"subagent_id": "..."}; the subagent_id is missing or the arguments are not valid JSON`)
	}
	c := s.reg.stop(s.parent.ID(), args.SubagentID)
	if c == nil {
		if _, ok := s.parent.Child(ctx, args.SubagentID); !ok {
			return enginetool.Failed(call, "kill_subagent: no subagent %q belongs to this session", args.SubagentID)
		}
		return enginetool.Output(call, fmt.Sprintf("Subagent %s was idle; nothing to stop.", args.SubagentID))
	}
	if err := s.parent.Abort(ctx, c.id, "stopped by kill_subagent"); err != nil {
		return enginetool.Failed(call, "kill_subagent: %v", err)
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
	return enginetool.Output(call, msg)
}

// waitEnd is how a wait for a child ended.
type waitEnd int

const (
	finished     waitEnd = iota // the child's task ended
	windowPassed                // the foreground window passed first
	interrupted                 // the waiting call was interrupted
)

// await waits up to yield for the child's task to end.
func (c *child) await(ctx context.Context, yield time.Duration) waitEnd {
	timer := time.NewTimer(yield)
	defer timer.Stop()
	select {
	case <-c.done:
		return finished
	case <-timer.C:
		return windowPassed
	case <-ctx.Done():
		return interrupted
	}
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
		return enginetool.Output(call, answer)
	}
	msg := fmt.Sprintf("The subagent (subagent_id: %s) ended with %s", c.id, enumword.Word(c.status))
	if c.message != "" {
		msg += ": " + c.message
	}
	if c.final != "" {
		msg += "\nIts last answer:\n" + c.final
	}
	return enginetool.Failed(call, "%s", msg)
}

// notice is the completion report of a background child.
func (c *child) notice() *penguinv1.OmniMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	detail := "finished"
	if c.message != "" {
		detail = c.message
	}
	out := c.final
	if out == "" {
		out = c.pending.String()
	}
	return loop.BackgroundDone("subagent", c.id, enumword.Word(c.status), detail, "The subagent's answer:\n"+loop.ReportTail(out))
}
