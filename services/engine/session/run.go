package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/loop"
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
	// steering holds the steering messages not yet given to the model,
	// each as its text block and its images (steerMessages).
	steering   [][]*penguinv1.OmniMessage
	notices    []*penguinv1.OmniMessage
	contextSeq int64 // session_meta of a context started by this task

	// prep is the run's preparation, once made: steering with images
	// needs its model and scratchpad. Guarded by the runtime's mu.
	prep *prepared

	// result is a manual compaction's outcome, set before done closes.
	result loop.Result

	// run is the span of the Run call that started the task, which the
	// task's turns link to.
	run trace.SpanContext
	// lease is the task's run lease, renewed while the task lasts; set by
	// claim.
	lease *lease.Lease
	// leased is what the store read with the lease, for prepare.
	leased leasedRead
	// agent is the agent the task expects the session to run, named by
	// the row its call read a moment ago (a session's agent state never
	// changes): claim's read without the lease takes its version too,
	// which prepare uses when the row read with it names that agent.
	agent store.AgentRef
	// durable tasks are handed over when the engine stops instead of
	// aborted (agentstate's durable_tasks); handover is set when that
	// happens. Guarded by the runtime's mu.
	durable  bool
	handover bool
	// goal marks a goal loop (goal.go): the task runs rounds until the
	// goal ends.
	goal bool
	// examined is set on the task with which a replica looks at a run
	// that was cut off (resume), and closed once the look has decided:
	// from then on the task runs the resumed run, or it is gone. Until
	// then a claim of the session waits instead of refusing it as busy.
	examined chan struct{}
}

// examining returns what closes when t, a look at a cut-off run, has
// decided; nil when t is no such look, or no longer.
func (t *task) examining() <-chan struct{} {
	if t.examined == nil {
		return nil
	}
	select {
	case <-t.examined:
		return nil
	default:
		return t.examined
	}
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
	// Goal, when set, makes the task a goal loop (goal.go).
	Goal *GoalSpec
	// Skills are skills the message pins (skills.go): the recorded
	// message starts with a [use_skills] block naming them.
	Skills []string
	// Row, when set, is the session's row as the call read it a moment
	// ago (to authorize it): a session not loaded yet is loaded from it
	// instead of reading it again. The task itself reads the row anew
	// once it holds the session's lease.
	Row *store.Session
}

// Run starts a task on an idle session and sends its events until it ends
// or ctx ends; the task itself goes on when ctx ends.
func (m *Manager) Run(ctx context.Context, id string, spec RunSpec, send func(*penguinv1.RunEvent) error) error {
	if strings.TrimSpace(spec.Prompt) == "" && len(spec.Images) == 0 && len(spec.Skills) == 0 {
		return fmt.Errorf("%w: the prompt is empty", ErrInvalid)
	}
	if err := checkSkillNames(spec.Skills); err != nil {
		return err
	}
	if spec.Goal != nil {
		if err := checkGoal(spec); err != nil {
			return err
		}
	}
	rt, err := m.acquireFrom(ctx, id, spec.Row)
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
// A task that only looks at a cut-off run (resume) is waited for, up to
// the end of ctx: right after a restart the engine looks at the runs a
// crash cut off, and a Run in that moment starts once the look is over,
// or finds the run it resumed busy, rather than being refused for it.
//
// With firstWrite, the session's run lease is taken by the task's first
// commit (its prompt's, startClaimed; or an environment's binding in its
// preparation) when no lease is on the session, instead of in a commit
// of its own before the task prepares: the preparation only reads and
// the journal publishes nothing until that commit, which the store
// refuses, writing nothing, when another replica took the lease or ran a
// task since the read (lease.Keeper.Claim), and which takes the version
// of t.agent too. A lease on the session (a run cut off) is taken at
// once, as without firstWrite.
func (rt *Runtime) claim(ctx context.Context, t *task, firstWrite bool) error {
	m := rt.m
	for {
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return fmt.Errorf("%w: the engine is shutting down", ErrUnavailable)
		}
		rt.refs++ // the task's own reference
		m.tasks.Add(1)
		m.mu.Unlock()
		rt.mu.Lock()
		holder := rt.task
		if holder == nil {
			rt.task = t
		}
		rt.mu.Unlock()
		if holder == nil {
			break
		}
		rt.unclaim(nil)
		look := holder.examining()
		if look == nil {
			return fmt.Errorf("%w: session %s is already running a task; wait for it, Attach to watch it, or Abort it", ErrBusy, rt.id)
		}
		select {
		case <-look:
		case <-ctx.Done():
			return fmt.Errorf("session %s: the engine was still looking at the run a stop cut off: %w", rt.id, ctx.Err())
		}
	}
	rt.journal.Reset()
	mark, quiet := m.idleEnvs.quiet(rt.id)
	var (
		l   *lease.Lease
		c   *store.LeaseClaim
		err error
	)
	if firstWrite {
		l, c, err = m.leases.Claim(ctx, rt.id, t.agent)
	} else {
		l, err = m.leases.Acquire(ctx, rt.id)
	}
	if held := (*lease.HeldError)(nil); errors.As(err, &held) {
		err = fmt.Errorf("%w: %v", ErrBusy, held)
	}
	if err != nil {
		rt.unclaim(t)
		return err
	}
	t.lease = l
	if read := l.TakeRead(); read != nil && quiet {
		t.leased = leasedRead{read: read, disposals: mark}
	}
	if c != nil {
		// The renewals start with the commit that takes the lease.
		rt.journal.Claim(c, func() {
			l.Taken()
			rt.keep(t)
		})
	} else {
		// The lease is renewed from now on, while the task prepares
		// (which may wait for an environment) as while it runs.
		rt.keep(t)
	}
	m.metrics.runsActive.Inc()
	return nil
}

// keep renews the task's lease until the task ends. A renewal that finds
// the lease taken means this replica was cut off longer than the lease
// lasts and the session has moved on: the task stops, so that two
// replicas never write the session's log at once.
func (rt *Runtime) keep(t *task) {
	t.lease.Keep(t.ctx, func(owner string) {
		t.cancel(&loop.Aborted{Reason: fmt.Sprintf("engine replica %s took the session over after this replica failed to renew its lease", owner)})
	})
}

// refused turns err, when it says the store refused the task's claim of
// the lease (store.ErrLeaseTaken), into ErrBusy naming the replica that
// holds it: another replica started a task on the session between this
// one's read and its first write.
func (rt *Runtime) refused(err error) error {
	if !errors.Is(err, store.ErrLeaseTaken) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return fmt.Errorf("%w: %v", ErrBusy, rt.m.leases.Refused(ctx, rt.id))
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
	if row := spec.Row; row != nil && row.ID == rt.id {
		t.agent, _ = rt.m.agentOf(row.AgentState)
	}
	if err := rt.claim(ctx, t, true); err != nil {
		return nil, 0, err
	}
	from, err := rt.startClaimed(ctx, t, spec)
	if err != nil {
		return nil, 0, err
	}
	return t, from, nil
}

// startClaimed is startRun once t holds the session: it prepares and
// records the prompt, and starts the loop.
func (rt *Runtime) startClaimed(ctx context.Context, t *task, spec RunSpec) (int64, error) {
	// Nothing has written the session since the lease read it.
	p, err := rt.prepare(ctx, spec.Thinking, spec.Goal != nil, t.leased)
	t.leased = leasedRead{}
	if err == nil {
		err = checkSkillsInstalled(p.st, spec.Skills)
	}
	if err != nil {
		rt.abandon(t, err)
		return 0, rt.refused(err)
	}
	var images []*penguinv1.OmniMessage
	if spec.Goal == nil {
		// A goal keeps its images with its objective (startGoal).
		if images, err = rt.imageMessages(ctx, p, spec.Images); err != nil {
			p.releaseEnvironment(rt.m, rt.id)
			rt.abandon(t, err)
			return 0, err
		}
	}
	rt.mu.Lock()
	t.prep = p
	rt.mu.Unlock()
	from := rt.journal.Last()
	rt.mu.Lock()
	if spec.Mode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
		rt.mode = spec.Mode
	}
	rt.mu.Unlock()
	rt.setState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	err = rt.begin(t, p, false)
	switch {
	case err != nil:
	case spec.Goal != nil:
		err = rt.startGoal(t, p, spec)
	default:
		err = rt.recordPrompt(p, spec, images)
	}
	switch {
	case err != nil:
	case spec.Mode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED || p.row.Title == "":
		// The prompt is on record before the task goes on: a Run that
		// returns without error has its input in the log. The row's
		// approval mode and title (for a session without one) go in the
		// same commit, a patch of those columns that does not read the
		// row back.
		err = rt.journal.FlushWith(store.SessionWrite{Patch: &store.SessionPatch{Title: title(spec.Prompt), ApprovalMode: spec.Mode}})
	default:
		err = rt.journal.Flush()
	}
	if err != nil {
		rt.finish(t, p, loop.Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Err: err})
		if errors.Is(err, store.ErrLeaseTaken) {
			return 0, rt.refused(err)
		}
		return 0, fmt.Errorf("%w; the prompt was not recorded, run it again once the store is back: %v", ErrNotRecorded, err)
	}
	rt.launch(t, p, spec, nil)
	return from, nil
}

// launch starts the loop of a claimed, prepared task whose input is on
// record. unasked are tool calls to ask for again before the first
// request (see loop.Resume).
func (rt *Runtime) launch(t *task, p *prepared, spec RunSpec, unasked []*penguinv1.ToolCall) {
	mode := spec.ModeFunc
	if mode == nil {
		mode = rt.approvalMode
	}
	ask := rt.board.Asker(spec.Origin)
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
	if p.tools.ownEnvironment() {
		env := p.tools.current()
		// A subagent sharing its parent's environment leaves the notices
		// to the parent; a task without an environment yet starts the
		// watch when it makes one (toolset.replace, toolset.connect).
		rt.watcher.Watch(env.client, env.id)
	}
	rt.mu.Lock()
	// A subagent's task is its parent's tool call: when the engine stops,
	// the parent's task is the one that goes on, and decides.
	t.durable = p.st.Config.DurableTasks && p.row.ParentID == ""
	rt.mu.Unlock()
	go func() {
		// The workspace as the turn found it, for its undo; a resumed
		// turn starts from where the cut-off one left the files.
		before := rt.turnCheckpoint(p, "")
		if res, stop := rt.startTools(t, p); stop {
			rt.recordTurnChange(t, p, before)
			rt.finish(t, p, res)
			return
		}
		// A goal resumed between rounds has nothing of its last round
		// left to run: its next decision comes first.
		res := loop.Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}
		if !t.goal || len(p.input) > 0 || len(unasked) > 0 {
			res = loop.Resume(t.ctx, deps, p.settings, p.mctx, unasked, p.input)
		}
		if t.goal {
			res = rt.runGoal(t, p, deps, res)
		}
		rt.recordTurnChange(t, p, before)
		rt.finish(t, p, res)
	}()
}

// abandon releases a task that failed before it wrote anything.
func (rt *Runtime) abandon(t *task, cause error) {
	rt.letGo(t, cause, t.lease.Release)
}

// letGo ends a task that never started its loop, giving its lease up
// with giveUp (Release, or Handover to leave the run on record).
func (rt *Runtime) letGo(t *task, cause error, giveUp func(context.Context) error) {
	// A claim no commit took goes with the task; what the journal held
	// back behind it is published.
	rt.journal.DropClaim()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := giveUp(ctx); err != nil {
		rt.m.log.Warn("could not give a run lease up", "session", rt.id, "error", err)
	}
	t.cancel(cause)
	close(t.done)
	rt.m.metrics.runsActive.Dec()
	rt.unclaim(t)
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
	handover := t.handover
	rt.mu.Unlock()
	if handover {
		rt.finishHandedOver(t, p, len(left))
		return
	}

	msg := res.Message
	for _, msg := range slices.Concat(left...) {
		if err := rt.Emit(context.Background(), msg); err != nil {
			m.log.Error("lost steering text: the log could not be written", "session", rt.id, "error", err)
			res.Err = errors.Join(res.Err, err)
		}
	}
	if len(left) > 0 {
		msg = strings.TrimSpace(msg + fmt.Sprintf(" %d steering message(s) arrived after the task's last request; they were recorded and go to the model with the next run.", len(left)))
	}
	// The sequence mark covers the idle event published below too. It is
	// saved with the row here, where every task ends, and not only when
	// the runtime unloads: an unload may come after the store is gone (a
	// watcher letting go after the engine closed it), and a mark behind
	// the log reads, at the next load, as a crash and leaves a gap.
	high := rt.journal.Last() + 1
	var end *taskEnd
	// ended is the row's change, a patch that the store makes without
	// reading the row back.
	ended := func() *store.SessionPatch {
		patch := &store.SessionPatch{Config: endChanges(high, end, res.Note, contextSeq)}
		if p != nil && p.mctx.Usage != nil {
			patch.Usage = proto.Clone(p.mctx.Usage).(*penguinv1.TokenCounts)
		}
		return patch
	}
	saved := false
	if res.Err == nil {
		// The task's last events, its row and its lease are one commit.
		end = &taskEnd{Sequence: high, Status: res.Status, Message: msg}
		res.Err = t.lease.ReleaseWith(func(owner string) error {
			return rt.journal.FlushWith(store.SessionWrite{Patch: ended(), ReleaseLease: owner})
		})
		saved = res.Err == nil
	} else {
		// The failed log publishes what it still can (the announcements
		// queued) before the end is announced.
		_ = rt.journal.Flush()
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	switch {
	case saved:
	case errors.Is(res.Err, store.ErrLeaseTaken):
		// Another replica took the session between this task's read and
		// its first commit, which wrote nothing: the row and the lease
		// are that replica's to write.
		m.log.Info("another engine replica started a task on the session first", "session", rt.id, "error", res.Err)
		res.Status = penguinv1.StopReason_STOP_REASON_FAILED
		msg = "another engine replica started a task on the session first; this task did not start and nothing of it was recorded"
		end = &taskEnd{Sequence: high, Status: res.Status, Message: msg, NotRecorded: true}
	default:
		// However the loop ended (an abort, a failure, a completion whose
		// last events were lost), what the watchers must hear is that the
		// task's work after the log's last event is not recorded. The row
		// and the lease are written on their own.
		m.log.Error("task stopped: the session log could not be written", "session", rt.id, "error", res.Err)
		res.Status = penguinv1.StopReason_STOP_REASON_FAILED
		msg = fmt.Sprintf("the session log could not be written, so the task stopped; events after sequence %d were not recorded (%v)", rt.journal.LastPersisted(), res.Err)
		end = &taskEnd{Sequence: high, Status: res.Status, Message: msg, NotRecorded: true}
		if err := m.store.WriteSession(ctx, rt.id, store.SessionWrite{Patch: ended()}); err != nil {
			m.log.Warn("could not update the session row after a task", "session", rt.id, "error", err)
		} else {
			saved = true
		}
		if err := t.lease.Release(ctx); err != nil {
			m.log.Warn("could not release a run lease", "session", rt.id, "error", err)
		}
	}
	if saved {
		// The mark is saved: unloading need not write the row again.
		rt.seqSaved = max(rt.seqSaved, high)
	}
	cancel()
	t.cancel(nil)

	// The idle state event is queued before anyone can see the session
	// idle, so a watcher that stops at idle (Attach until_idle) gets it.
	rt.mu.Lock()
	rt.task = nil
	rt.state = penguinv1.SessionState_SESSION_STATE_IDLE
	rt.publishState(end.event().GetState())
	rt.mu.Unlock()
	kind := "run"
	if t.compaction {
		kind = "compaction"
	}
	m.metrics.runs.WithLabelValues(kind, enumword.Word(res.Status)).Inc()
	m.metrics.runsActive.Dec()
	close(t.done)
	if p != nil {
		if env := p.tools.current(); env.id != "" {
			rt.watcher.Settle(env.client)
		}
		p.releaseEnvironment(m, rt.id)
	}
	m.tasks.Done()
	m.release(rt)
}

// finishHandedOver ends a task that was handed over: what it recorded is
// flushed to the log before its lease expires, so the replica that takes
// the lease reads all of it; nothing else is written, neither the row nor
// an end state, because the task goes on there.
func (rt *Runtime) finishHandedOver(t *task, p *prepared, steering int) {
	m := rt.m
	if steering > 0 {
		m.log.Warn("steering that had not reached the model is lost with the handover", "session", rt.id, "messages", steering)
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	if err := rt.journal.Flush(); err != nil {
		m.log.Error("could not record the end of a handed-over task; its last events are lost", "session", rt.id, "error", err)
	}
	if err := t.lease.Handover(ctx); err != nil {
		m.log.Warn("could not hand a run lease over; the run resumes once it expires", "session", rt.id, "error", err)
	}
	cancel()
	// The watchers here learn that the run waits for its next owner; the
	// stream of each then ends, as this replica stops (follow).
	rt.mu.Lock()
	rt.task = nil
	rt.state = penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER
	rt.publishState(&penguinv1.RunStateChange{State: rt.state})
	rt.mu.Unlock()
	m.metrics.runsActive.Dec()
	close(t.done)
	if p != nil {
		if env := p.tools.current(); env.id != "" {
			rt.watcher.Settle(env.client)
		}
		p.releaseEnvironment(m, rt.id)
	}
	m.tasks.Done()
	m.release(rt)
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
	out := slices.Concat(h.t.steering...)
	out = append(out, h.t.notices...)
	h.t.steering, h.t.notices = nil, nil
	return out
}

// SetState reports what the task does. The wait before a reconnect is
// open to RetryNow before it is announced: a client that answers the
// retry_wait event with RetryNow at once cuts this wait short (a RetryNow
// from before, for an earlier wait, is dropped here).
func (h *host) SetState(s penguinv1.SessionState, retryIn time.Duration) {
	if s == penguinv1.SessionState_SESSION_STATE_RETRY_WAIT {
		h.rt.mu.Lock()
		h.t.waiting = true
		select {
		case <-h.t.retryNow:
		default:
		}
		h.rt.mu.Unlock()
	}
	h.rt.setState(s, retryIn)
}

// WaitRetry waits d, or until RetryNow, after SetState announced the wait.
func (h *host) WaitRetry(ctx context.Context, d time.Duration) error {
	h.rt.mu.Lock()
	h.t.waiting = true
	h.rt.mu.Unlock()
	defer func() {
		h.rt.mu.Lock()
		h.t.waiting = false
		h.rt.mu.Unlock()
	}()
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
	if h.rt.sealed.Load() {
		return errHandedOver
	}
	meta := proto.Clone(h.p.rs.Meta).(*penguinv1.SessionMeta)
	seq, err := h.rt.journal.Publish(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: &penguinv1.OmniMessage{
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
