package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/resume"
	"github.com/penguin-agent/penguin/services/engine/store"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// task is what holds a busy session: a run of the agent loop, or a manual
// compaction.
type task struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{}
	retryNow chan struct{}

	// Guarded by the runtime's mu.
	compaction bool // a manual compaction, which takes no steering
	closed     bool // the task is ending: steering is refused
	waiting    bool // in a reconnect wait
	steering   []string
	notices    []*penguinv1.OmniMessage
	contextSeq int64 // session_meta of a context started by this task

	// result is a manual compaction's outcome, set before done closes.
	result loop.Result

	// run is the span of the Run call that started the task, which the
	// task's turns link to.
	run trace.SpanContext
	// stopLease stops the renewals of the task's run lease; set by claim.
	stopLease func()
}

// prepared is everything a task needs, read before it writes anything.
type prepared struct {
	row      *store.Session
	cfg      config
	st       *agentstate.State
	rs       *resume.State
	tools    *toolset
	settings loop.Settings
	mctx     *loop.Context
	// input is the carry-over: pending input from the log and the note.
	input []*penguinv1.OmniMessage
}

// RunSpec is a task to start.
type RunSpec struct {
	Prompt   string
	Images   []string
	Thinking penguinv1.ThinkingLevel
	Mode     penguinv1.ApprovalMode
	// Sender marks who wrote the prompt; unspecified is the human user.
	Sender penguinv1.Sender
	// Origin, for a subagent's task, is the chain prepended to the
	// origin of everything the task's approvals ask.
	Origin []string
	// Asker answers approvals instead of the session's watchers (a
	// subagent asks through its parent); nil means the watchers.
	Asker approval.Asker
	// ModeFunc, when set, supplies the approval mode at each decision (a
	// subagent follows its parent's).
	ModeFunc func() penguinv1.ApprovalMode
}

// Run starts a task on an idle session and sends its events until it ends
// or ctx ends; the task itself goes on when ctx ends.
func (m *Manager) Run(ctx context.Context, id string, spec RunSpec, send func(*penguinv1.RunEvent) error) error {
	if strings.TrimSpace(spec.Prompt) == "" && len(spec.Images) == 0 {
		return fmt.Errorf("%w: the prompt is empty", ErrInvalid)
	}
	rt, err := m.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer m.release(rt)
	_, from, err := rt.startRun(ctx, spec)
	if err != nil {
		return err
	}
	return rt.follow(ctx, from, send, isIdle, false)
}

// isIdle reports whether ev says the task ended.
func isIdle(ev *penguinv1.RunEvent) bool {
	st := ev.GetState()
	return st != nil && st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE
}

// claim makes t the session's task, or reports that one holds it already.
func (rt *Runtime) claim(ctx context.Context, t *task) error {
	m := rt.m
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return fmt.Errorf("%w: the engine is shutting down", ErrUnavailable)
	}
	rt.refs++ // the task's own reference
	m.tasks.Add(1)
	m.mu.Unlock()
	rt.mu.Lock()
	busy := rt.task != nil
	if !busy {
		rt.task = t
	}
	rt.mu.Unlock()
	if busy {
		rt.unclaim(nil)
		return fmt.Errorf("%w: session %s is already running a task; wait for it, Attach to watch it, or Abort it", ErrBusy, rt.id)
	}
	rt.resetLog()
	ok, err := m.store.AcquireLease(ctx, rt.id, m.opts.EngineID, m.opts.Address, m.opts.LeaseTTL)
	if err == nil && !ok {
		owner, addr, _, _ := m.store.LeaseHolder(ctx, rt.id)
		err = fmt.Errorf("%w: session %s is running on engine %s (%s)", ErrBusy, rt.id, owner, addr)
	}
	if err != nil {
		rt.unclaim(t)
		return err
	}
	// The lease is renewed from now on, while the task prepares (which
	// may wait for an environment) as while it runs.
	t.stopLease = rt.keepLease(t)
	m.metrics.runsActive.Inc()
	return nil
}

// unclaim undoes claim.
func (rt *Runtime) unclaim(t *task) {
	if t != nil {
		rt.mu.Lock()
		if rt.task == t {
			rt.task = nil
		}
		rt.mu.Unlock()
	}
	rt.m.tasks.Done()
	rt.m.release(rt)
}

func newTask() *task {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &task{ctx: ctx, cancel: cancel, done: make(chan struct{}), retryNow: make(chan struct{}, 1)}
}

// startRun claims the session, prepares and records the prompt, and starts
// the loop. It returns the sequence number just before the task's first
// event.
func (rt *Runtime) startRun(ctx context.Context, spec RunSpec) (*task, int64, error) {
	t := newTask()
	t.run = trace.SpanContextFromContext(ctx)
	if err := rt.claim(ctx, t); err != nil {
		return nil, 0, err
	}
	p, err := rt.prepare(ctx, spec.Thinking)
	if err != nil {
		rt.abandon(t, err)
		return nil, 0, err
	}
	from := rt.lastSequence()
	rt.mu.Lock()
	if spec.Mode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
		rt.mode = spec.Mode
	}
	rt.mu.Unlock()
	rt.setState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	err = rt.begin(t, p)
	if err == nil {
		err = rt.recordPrompt(p, spec)
	}
	if err == nil {
		// The prompt is on record before the task goes on: a Run that
		// returns without error has its input in the log.
		err = rt.flush()
	}
	if err != nil {
		rt.finish(t, p, loop.Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "the session log could not be written: " + err.Error(), Err: err})
		return nil, 0, err
	}
	if spec.Mode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED || p.row.Title == "" {
		if err := rt.m.updateRow(ctx, rt.id, func(r *store.Session, _ *config) {
			if spec.Mode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
				r.ApprovalMode = spec.Mode
			}
			if r.Title == "" {
				r.Title = title(spec.Prompt)
			}
		}); err != nil {
			rt.m.log.Warn("could not update the session row", "session", rt.id, "error", err)
		}
	}
	mode := spec.ModeFunc
	if mode == nil {
		mode = rt.approvalMode
	}
	var ask approval.Asker = asker{rt: rt, origin: spec.Origin}
	if spec.Asker != nil {
		ask = spec.Asker
	}
	deps := loop.Deps{
		LLM:      rt.m.opts.LLM,
		Tools:    p.tools,
		Approver: &approval.Gate{Mode: mode, Permission: p.tools.permission, Policy: rt.m.policy, Asker: ask},
		Emitter:  rt,
		Host:     &host{rt: rt, t: t, p: p},
		Observer: &turnObserver{tracer: rt.m.tracer, metrics: rt.m.metrics, session: rt.id, model: p.settings.Model, run: t.run},
	}
	if !p.cfg.SharedEnvironment {
		// A subagent sharing its parent's environment leaves the notices
		// to the parent.
		rt.watch(p.tools.client, p.tools.envID)
	}
	go func() {
		res := loop.Run(t.ctx, deps, p.settings, p.mctx, p.input)
		rt.finish(t, p, res)
	}()
	return t, from, nil
}

// abandon releases a task that failed before it wrote anything.
func (rt *Runtime) abandon(t *task, cause error) {
	t.stopLease()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := rt.m.store.ReleaseLease(ctx, rt.id, rt.m.opts.EngineID); err != nil {
		rt.m.log.Warn("could not release a run lease", "session", rt.id, "error", err)
	}
	t.cancel(cause)
	close(t.done)
	rt.m.metrics.runsActive.Dec()
	rt.unclaim(t)
}

// approvalMode returns the session's current approval mode.
func (rt *Runtime) approvalMode() penguinv1.ApprovalMode {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.mode
}

// prepare reads what a task needs: the row, the agent state, the context
// rebuilt from the log, and the environment with its tools. It writes
// nothing to the log.
func (rt *Runtime) prepare(ctx context.Context, thinking penguinv1.ThinkingLevel) (*prepared, error) {
	m := rt.m
	row, err := m.store.GetSession(ctx, rt.id)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(row.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPrecondition, err)
	}
	st, err := m.loadAgent(row.AgentState)
	if err != nil {
		return nil, err
	}
	rs, err := rt.rebuild(ctx, cfg.ContextSeq)
	if err != nil {
		return nil, err
	}
	ts, err := rt.newToolset(ctx, row, cfg, st)
	if err != nil {
		return nil, err
	}
	p := &prepared{row: row, cfg: cfg, st: st, rs: rs, tools: ts}
	p.settings = settings(st, row, cfg, rs.Meta, thinking, ts.defs)
	usage := row.Usage
	if usage == nil {
		usage = rs.Usage
	}
	p.mctx = &loop.Context{History: rs.History, Turns: rs.Turns, LastTotal: rs.LastTotal, Usage: usage}
	p.input = rs.Pending
	if cfg.Note != "" && cfg.NoteSeq == row.LastSequence {
		p.input = append(append([]*penguinv1.OmniMessage(nil), p.input...), loop.HarnessText(cfg.Note))
	}
	return p, nil
}

// rebuild reads the current context from the log.
func (rt *Runtime) rebuild(ctx context.Context, from int64) (*resume.State, error) {
	events, err := rt.m.store.ReadEvents(ctx, rt.id, max(from-1, 0), 0)
	if err != nil {
		return nil, err
	}
	rs := resume.Rebuild(events)
	if rs.Meta == nil && from > 0 {
		return rt.rebuild(ctx, 0)
	}
	if rs.Meta == nil {
		return nil, fmt.Errorf("%w: the log of session %s has no session_meta", ErrPrecondition, rt.id)
	}
	return rs, nil
}

// strandedOutput is the output recorded for a tool call whose engine
// stopped (a crash, a killed replica) before the call finished.
const strandedOutput = "[interrupted: the engine running this tool call stopped before it finished; whatever it did may or may not have happened]"

// begin records what a task owes the log before its input: the failed end
// of a compaction the engine died in, the outputs of tool calls the engine
// died in, and the tool list when it changed.
func (rt *Runtime) begin(t *task, p *prepared) error {
	for _, id := range p.rs.Stranded {
		out := omni.ToolCallOutput(id, strandedOutput, penguinv1.StopReason_STOP_REASON_ABORTED)
		if err := rt.Emit(t.ctx, out); err != nil {
			return err
		}
		for i, m := range p.input {
			if m.GetToolCallOutput().GetToolCallId() == id {
				p.input[i] = out
			}
		}
	}
	p.rs.Stranded = nil
	if oc := p.rs.OpenCompaction; oc != nil {
		end := &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
			Reason: oc.GetReason(), Mode: oc.GetMode(), Status: penguinv1.StopReason_STOP_REASON_FAILED,
			ErrorMessage: "the engine stopped during the compaction; the original context stands",
		}}}
		if err := rt.Emit(t.ctx, end); err != nil {
			return err
		}
		p.rs.OpenCompaction = nil
	}
	return nil
}

// recordPrompt records the prompt and, when the tools changed, the tool
// list, and adds them to the first request's input.
func (rt *Runtime) recordPrompt(p *prepared, spec RunSpec) error {
	var msgs []*penguinv1.OmniMessage
	if strings.TrimSpace(spec.Prompt) != "" {
		msgs = append(msgs, omni.SenderText(spec.Sender, spec.Prompt))
	}
	for i, img := range spec.Images {
		if p.cfg.Vision {
			msgs = append(msgs, omni.ImageURL(img))
			continue
		}
		// A text-only model cannot take the image; it learns there was one.
		msgs = append(msgs, omni.UserText(fmt.Sprintf("[attached image %d: %s]", i+1, describeURL(img))))
	}
	for _, m := range msgs {
		if err := rt.Emit(context.Background(), m); err != nil {
			return err
		}
	}
	p.input = append(p.input, msgs...)
	if !sameTools(p.rs.Tools, p.tools.defs) {
		if err := rt.Emit(context.Background(), omni.ToolListReady(p.tools.defs)); err != nil {
			return err
		}
	}
	return nil
}

func describeURL(u string) string {
	if strings.HasPrefix(u, "data:") {
		mime, _, _ := strings.Cut(strings.TrimPrefix(u, "data:"), ";")
		return "an inline " + mime + " image this model cannot view; describe_image needs a URL or a workspace path"
	}
	return u
}

// settings assembles a task's loop settings from the agent state, the
// session row and the context's session_meta.
func settings(st *agentstate.State, row *store.Session, cfg config, meta *penguinv1.SessionMeta, thinking penguinv1.ThinkingLevel, defs []*penguinv1.ToolDefinition) loop.Settings {
	c := st.Config
	maxTurns := c.MaxTurns
	switch {
	case cfg.MaxTurns > 0:
		maxTurns = int(cfg.MaxTurns)
	case cfg.MaxTurns < 0:
		maxTurns = -1
	}
	window := meta.GetModelContextWindow()
	if c.Model.ContextWindow > 0 {
		window = c.Model.ContextWindow
	}
	sessionThinking := row.ThinkingLevel
	if sessionThinking == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		sessionThinking = c.Model.ThinkingLevelProto()
	}
	if thinking == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		thinking = sessionThinking
	}
	timeout := c.Model.RequestTimeoutMS
	turns := 0
	if c.Compaction.Enabled && c.Compaction.TurnsThreshold > 0 {
		turns = int(c.Compaction.TurnsThreshold)
	}
	return loop.Settings{
		Model:            &penguinv1.ModelRef{Provider: row.Provider, ModelId: row.ModelID},
		SystemPrompt:     meta.GetSystemPrompt(),
		Tools:            defs,
		ThinkingLevel:    thinking,
		MaxTokens:        c.Model.MaxTokensProto(),
		RequestTimeoutMs: &timeout,
		ContextWindow:    c.Model.ContextWindow,
		MaxTurns:         maxTurns,
		Retry:            loop.Retry{MaxRetries: c.Retry.MaxAttempts, Base: c.Retry.BaseDelay, Cap: c.Retry.MaxDelay},
		Compaction: loop.Compaction{
			ContextThreshold: c.Compaction.EffectiveContextThreshold(window),
			TurnsThreshold:   turns,
			Mode:             c.Compaction.ModeProto(),
			Prompt:           c.Compaction.Prompt,
			RetryNote:        c.Compaction.RetryNote,
			ExtractSummary:   agentstate.ExtractSummary,
			WrapSummary:      agentstate.WrapContextSummary,
			ThinkingLevel:    sessionThinking,
		},
	}
}

// finish ends a task: steering that arrived too late is recorded for the
// next run, the row is updated, the lease released, and the watchers told
// how the task ended.
func (rt *Runtime) finish(t *task, p *prepared, res loop.Result) {
	m := rt.m
	rt.mu.Lock()
	left := t.steering
	t.steering = nil
	t.closed = true
	contextSeq := t.contextSeq
	rt.mu.Unlock()

	msg := res.Message
	for _, s := range left {
		if err := rt.Emit(context.Background(), loop.SteeringMessage(s)); err != nil {
			m.log.Error("lost steering text: the log could not be written", "session", rt.id, "error", err)
			res.Err = errors.Join(res.Err, err)
		}
	}
	if len(left) > 0 {
		msg = strings.TrimSpace(msg + fmt.Sprintf(" %d steering message(s) arrived after the task's last request; they were recorded and go to the model with the next run.", len(left)))
	}
	if res.Err != nil {
		m.log.Error("task stopped: the session log could not be written", "session", rt.id, "error", res.Err)
	}
	if err := rt.flush(); err != nil {
		res.Err = errors.Join(res.Err, err)
		if res.Status == penguinv1.StopReason_STOP_REASON_COMPLETED {
			res.Status = penguinv1.StopReason_STOP_REASON_FAILED
		}
		msg = strings.TrimSpace(msg + " The session log could not be written: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	rt.emitMu.Lock()
	last := rt.lastPersisted
	rt.emitMu.Unlock()
	if err := m.updateRow(ctx, rt.id, func(r *store.Session, c *config) {
		if p != nil && p.mctx.Usage != nil {
			r.Usage = proto.Clone(p.mctx.Usage).(*penguinv1.TokenCounts)
		}
		c.Note, c.NoteSeq = res.Note, last
		if contextSeq > 0 {
			c.ContextSeq = contextSeq
		}
	}); err != nil {
		m.log.Warn("could not update the session row after a task", "session", rt.id, "error", err)
	}
	t.stopLease()
	if err := m.store.ReleaseLease(ctx, rt.id, m.opts.EngineID); err != nil {
		m.log.Warn("could not release a run lease", "session", rt.id, "error", err)
	}
	cancel()
	t.cancel(nil)

	// The idle state event is queued before anyone can see the session
	// idle, so a watcher that stops at idle (Attach until_idle) gets it.
	rt.mu.Lock()
	rt.task = nil
	rt.state = penguinv1.SessionState_SESSION_STATE_IDLE
	rt.publishState(&penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: res.Status, Message: msg})
	rt.mu.Unlock()
	kind := "run"
	if t.compaction {
		kind = "compaction"
	}
	m.metrics.runs.WithLabelValues(kind, enumword.Word(res.Status)).Inc()
	m.metrics.runsActive.Dec()
	close(t.done)
	if p != nil {
		rt.settleWatch(p.tools.client)
	}
	m.tasks.Done()
	m.release(rt)
}

// keepLease renews the task's run lease until the returned stop is
// called. A renewal that finds the lease held by another replica means
// this one was cut off longer than the lease lasts and the session has
// moved on: the task is stopped, so that two replicas never write the
// session's log at once.
func (rt *Runtime) keepLease(t *task) (stop func()) {
	m := rt.m
	ctx, cancel := context.WithCancel(t.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(m.opts.LeaseTTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				ok, err := m.store.AcquireLease(ctx, rt.id, m.opts.EngineID, m.opts.Address, m.opts.LeaseTTL)
				switch {
				case err != nil && ctx.Err() == nil:
					m.log.Warn("could not renew a run lease", "session", rt.id, "error", err)
				case err == nil && !ok:
					owner, addr, _, _ := m.store.LeaseHolder(ctx, rt.id)
					m.log.Error("the run lease was taken over by another engine replica; stopping the task here",
						"session", rt.id, "owner", owner, "address", addr)
					t.cancel(&loop.Aborted{Reason: fmt.Sprintf("engine replica %s took the session over after this replica failed to renew its lease", owner)})
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// host is the session around a running loop.
type host struct {
	rt *Runtime
	t  *task
	p  *prepared
}

func (h *host) TakeInput() []*penguinv1.OmniMessage {
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	var out []*penguinv1.OmniMessage
	for _, s := range h.t.steering {
		out = append(out, loop.SteeringMessage(s))
	}
	out = append(out, h.t.notices...)
	h.t.steering, h.t.notices = nil, nil
	return out
}

func (h *host) SetState(s penguinv1.SessionState, retryIn time.Duration) {
	h.rt.setState(s, retryIn)
}

func (h *host) WaitRetry(ctx context.Context, d time.Duration) error {
	h.rt.mu.Lock()
	h.t.waiting = true
	h.rt.mu.Unlock()
	defer func() {
		h.rt.mu.Lock()
		h.t.waiting = false
		h.rt.mu.Unlock()
	}()
	// A RetryNow that came before this wait began is stale.
	select {
	case <-h.t.retryNow:
	default:
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-h.t.retryNow:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *host) StartContext(ctx context.Context) error {
	meta := proto.Clone(h.p.rs.Meta).(*penguinv1.SessionMeta)
	seq, err := h.rt.publish(ctx, &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: &penguinv1.OmniMessage{
		Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: meta},
	}}}, true)
	if err != nil {
		return err
	}
	h.rt.mu.Lock()
	h.t.contextSeq = seq
	h.rt.mu.Unlock()
	return h.rt.Emit(ctx, omni.ToolListReady(h.p.tools.defs))
}

// Steer queues text for the session's running task.
func (m *Manager) Steer(ctx context.Context, id, text string) error {
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("%w: the steering text is empty", ErrInvalid)
	}
	rt := m.loaded(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return err
		}
		if err := m.elsewhere(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%w: session %s is idle; start a Run instead", ErrNotRunning, id)
	}
	defer m.release(rt)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	t := rt.task
	if t == nil || t.closed || t.compaction {
		return fmt.Errorf("%w: session %s has no task to steer; start a Run instead", ErrNotRunning, id)
	}
	t.steering = append(t.steering, text)
	return nil
}

// Abort interrupts the session's task and waits until it has ended (or
// ctx ends). It reports false when no task was running.
func (m *Manager) Abort(ctx context.Context, id, reason string) (bool, error) {
	rt := m.loaded(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return false, err
		}
		return false, m.elsewhere(ctx, id)
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
	rt := m.loaded(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return false, err
		}
		return false, m.elsewhere(ctx, id)
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
	if err := rt.claim(ctx, t); err != nil {
		return 0, "", err
	}
	p, err := rt.prepare(ctx, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED)
	if err != nil {
		rt.abandon(t, err)
		return 0, "", err
	}
	if len(p.mctx.History) == 0 {
		rt.abandon(t, nil)
		return penguinv1.StopReason_STOP_REASON_FAILED, "nothing to compact: the context is empty", nil
	}
	rt.setState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	if err := rt.begin(t, p); err != nil {
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
