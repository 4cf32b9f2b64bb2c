package session

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/resume"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// prepared is everything a task needs, read before it writes anything.
type prepared struct {
	row   *store.Session
	cfg   config
	st    *agentstate.State
	rs    *resume.State
	tools *toolset
	// users are the sessions whose environment the task counts as in use
	// (idleEnvs): its own, and its parent's when it shares it.
	users    []string
	settings loop.Settings
	mctx     *loop.Context
	// input is the carry-over: pending input from the log and the note.
	input []*penguinv1.OmniMessage
}

// leasedRead is what the store read with the session's run lease
// (lease.TakeRead), and the mark of the environment disposals then
// (idleEnvs.quiet); a zero leasedRead has nothing.
type leasedRead struct {
	read      *store.LeaseRead
	disposals uint64
}

// model returns the project's settings of row's model as the store read
// them with row (PeekLease), and whether it did: read at the same moment
// as the row, they are as fresh as it is, and the task does not read
// them again. A row read again since (a disposal, a parent's
// environment) may name another model, so its settings are read anew.
func (l leasedRead) model(row *store.Session) (*store.ModelSetting, bool) {
	if r := l.with(row); r != nil && r.ModelRead {
		return r.Model, true
	}
	return nil, false
}

// with returns what the store read with row, nil when row is not the
// row it read: the agent's version in it (PeekLease) is as fresh as row
// for the agent it names (loadAgent).
func (l leasedRead) with(row *store.Session) *store.LeaseRead {
	if r := l.read; r != nil && r.Row == row {
		return r
	}
	return nil
}

// prepare reads what a task needs: the row, the agent state, the context
// rebuilt from the log, and the environment with its tools (for a goal,
// with the session's scratchpad). It writes nothing to the log.
//
// The environment counts as in use from here until the task's release
// (idleEnvs); the row is read once a disposal of it in progress has
// ended, so the task never binds an environment that is going away. The
// row read with the lease (leased) is that row too when no disposal was
// in progress then or has begun since, and the caller has not written
// the session since: it is not read again, nor is the log when the lease
// read it whole.
func (rt *Runtime) prepare(ctx context.Context, thinking penguinv1.ThinkingLevel, goal bool, leased leasedRead) (_ *prepared, err error) {
	m := rt.m
	var users []string
	defer func() {
		if err != nil {
			for _, id := range users {
				m.idleEnvs.release(id, true)
			}
		}
	}()
	waited, err := m.idleEnvs.use(ctx, rt.id)
	if err != nil {
		return nil, err
	}
	users = append(users, rt.id)
	var (
		row *store.Session
		log []store.Event // the whole log, when the lease read it so
	)
	if r := leased.read; r != nil {
		row = r.Row
		if r.Whole {
			log = r.Log
		}
	}
	if mark, _ := m.idleEnvs.quiet(rt.id); row == nil || waited || mark != leased.disposals {
		if row, err = m.store.GetSession(ctx, rt.id); err != nil {
			return nil, err
		}
	}
	cfg, err := parseConfig(row.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPrecondition, err)
	}
	if cfg.SharedEnvironment && row.ParentID != "" {
		waited, err := m.idleEnvs.use(ctx, row.ParentID)
		if err != nil {
			return nil, err
		}
		users = append(users, row.ParentID)
		if waited {
			// The parent's environment was being disposed of: the row
			// may name it still, and the child then gets its own.
			if row, err = m.store.GetSession(ctx, rt.id); err != nil {
				return nil, err
			}
		}
	}
	st, err := m.loadAgent(ctx, row.AgentState, leased.with(row))
	if err != nil {
		return nil, err
	}
	rs, err := rt.rebuild(ctx, cfg.ContextSeq, log)
	if err != nil {
		return nil, err
	}
	ts, err := rt.newToolset(ctx, row, cfg, st, rs.Tools, goal)
	if err != nil {
		return nil, err
	}
	p := &prepared{row: row, cfg: cfg, st: st, rs: rs, tools: ts, users: users}
	pm, ok := leased.model(row)
	if !ok {
		pm = m.projectModel(ctx, row.ProjectID, row.Provider, row.ModelID)
	}
	p.settings = settings(st, row, cfg, rs.Meta, thinking, ts.defs, pm)
	usage := row.Usage
	if usage == nil {
		usage = rs.Usage
	}
	p.mctx = &loop.Context{History: rs.History, Turns: rs.Turns, LastTotal: rs.LastTotal, Usage: usage}
	p.input = rs.Pending
	switch {
	case cfg.Note != "" && cfg.NoteSeq == row.LastSequence:
		p.input = append(append([]*penguinv1.OmniMessage(nil), p.input...), loop.HarnessText(cfg.Note))
	case len(rs.CutOff) > 0:
		// The engine stopped during a request (or between the attempts
		// of one) and left no note: the log says what the request had
		// produced.
		p.input = append(append([]*penguinv1.OmniMessage(nil), p.input...), loop.HarnessText(loop.CutOffBlock(rs.CutOff)))
	}
	return p, nil
}

// releaseEnvironment ends the task's use of its environment: the idle
// timeout of the session that owns it starts when no other task uses it.
func (p *prepared) releaseEnvironment(m *Manager, self string) {
	for _, id := range p.users {
		m.idleEnvs.release(id, id != self || p.tools.ownEnvironment())
	}
}

// rebuild reads the current context from the log: from the events of
// log, the whole log read a moment ago, when given.
func (rt *Runtime) rebuild(ctx context.Context, from int64, log []store.Event) (*resume.State, error) {
	after := max(from-1, 0)
	var events []store.Event
	if log != nil {
		i, _ := slices.BinarySearchFunc(log, after+1, func(e store.Event, seq int64) int { return cmp.Compare(e.Sequence, seq) })
		events = log[i:]
	} else {
		var err error
		if events, err = rt.m.store.ReadEvents(ctx, rt.id, after, 0); err != nil {
			return nil, err
		}
	}
	rs := resume.Rebuild(events)
	if rs.Meta == nil && from > 0 {
		return rt.rebuild(ctx, 0, log)
	}
	if rs.Meta == nil {
		return nil, fmt.Errorf("%w: the log of session %s has no session_meta", ErrPrecondition, rt.id)
	}
	return rs, nil
}

// begin records what a task owes the log before its input: the failed end
// of a compaction the engine died in, the outputs of tool calls the engine
// died in, and the tool list when it changed. A task that resumes the run
// (resumed) records no output for the calls that were waiting for
// approval: it asks for them again.
func (rt *Runtime) begin(t *task, p *prepared, resumed bool) error {
	for _, out := range p.rs.Stranded {
		if resumed && slices.ContainsFunc(p.rs.Unasked, func(c *penguinv1.ToolCall) bool {
			return c.GetToolCallId() == out.GetToolCallOutput().GetToolCallId()
		}) {
			continue
		}
		if err := rt.Emit(t.ctx, out); err != nil {
			return err
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

// recordPrompt records the prompt with its image messages (imageMessages)
// and, when the tools changed, the tool list, and adds them to the first
// request's input.
func (rt *Runtime) recordPrompt(p *prepared, spec RunSpec, images []*penguinv1.OmniMessage) error {
	var msgs []*penguinv1.OmniMessage
	if text := withSkills(spec.Skills, spec.Prompt); strings.TrimSpace(text) != "" {
		msgs = append(msgs, omni.SenderText(spec.Sender, text))
	}
	msgs = append(msgs, images...)
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

// settings assembles a task's loop settings from the agent state, the
// session row and the context's session_meta.
//
// The project's settings of the model (pm, nil for none) come after the
// agent's: the agent's model.context_window wins over the project's, which
// wins over the catalog's (the window in meta, or the gateway's table); the
// project's price is what the gateway computes the request's cost with.
func settings(st *agentstate.State, row *store.Session, cfg config, meta *penguinv1.SessionMeta, thinking penguinv1.ThinkingLevel, defs []*penguinv1.ToolDefinition, pm *store.ModelSetting) loop.Settings {
	c := st.Config
	maxTurns := c.MaxTurns
	switch {
	case cfg.MaxTurns > 0:
		maxTurns = int(cfg.MaxTurns)
	case cfg.MaxTurns < 0:
		maxTurns = -1
	}
	window := meta.GetModelContextWindow()
	given := c.Model.ContextWindow
	if given == 0 && pm != nil {
		given = pm.ContextWindow
	}
	if given > 0 {
		window = given
	}
	var price *penguinv1.ModelPrice
	if pm != nil && pm.Price != nil {
		price = &penguinv1.ModelPrice{Input: pm.Price.Input, Output: pm.Price.Output, CacheRead: pm.Price.CacheRead, CacheWrite: pm.Price.CacheWrite}
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
		Project:          row.ProjectID,
		SystemPrompt:     meta.GetSystemPrompt(),
		Tools:            defs,
		ThinkingLevel:    thinking,
		MaxTokens:        c.Model.MaxTokensProto(),
		RequestTimeoutMs: &timeout,
		ContextWindow:    given,
		Price:            price,
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
