package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CreateSpec describes a new session.
type CreateSpec struct {
	Model         *penguinv1.ModelRef
	Workspace     string
	ApprovalMode  penguinv1.ApprovalMode
	ThinkingLevel penguinv1.ThinkingLevel
	AgentState    string
	SystemPrompt  string
	MaxTurns      int32
	SandboxMode   penguinv1.SandboxMode
	// ProjectID is the project the session belongs to (the caller's
	// access was checked before); empty means store.DefaultProject.
	ProjectID string
	// ID, when set, is the new session's id (a schedule's run chooses it
	// when it is claimed, so that a replica that takes the run over
	// creates the same session); empty picks a fresh one.
	ID string
	// Title is the session's title; empty takes the first prompt's.
	Title string

	// For a subagent: its parent and the parent's environment, which the
	// child shares.
	ParentID        string
	Source          string
	EnvironmentID   string
	EnvironmentAddr string
	Depth           int

	// Read is what the store gave for this spec (ReadForNew) when the
	// caller read it already, with the memberships that authorized the
	// call; nil has Create read it.
	Read *store.NewSessionRead
}

// Create creates a session: its row and the session_meta that opens its
// log. Its environment is made at its first tool call. Its phases: the
// spec is checked, the environment spec is checked (checkEnvironment),
// the workspace is described and the prompt built (sessionMeta), then the
// row and the first event are recorded (record).
func (m *Manager) Create(ctx context.Context, spec CreateSpec) (*penguinv1.Session, error) {
	spec, err := m.admit(spec)
	if err != nil {
		return nil, err
	}
	read := spec.Read
	if read == nil {
		// A failed read leaves each part to its own read below, which
		// reports its failure as it did.
		read, _ = m.ReadForNew(ctx, spec, "")
	}
	var known *store.LeaseRead
	if read != nil && read.AgentRead {
		known = &store.LeaseRead{Agent: read.Agent, AgentRead: true, AgentVersion: read.AgentVersion}
	}
	st, err := m.loadAgent(ctx, spec.AgentState, known)
	if err != nil {
		return nil, err
	}
	if spec.Model, err = modelFor(spec.Model, st); err != nil {
		return nil, err
	}
	project := spec.ProjectID
	if project == "" {
		project = store.DefaultProject
	}
	window, vision := m.modelInfo(ctx, spec.Model, project, st, read)
	id := spec.ID
	if id == "" {
		id = newSessionID()
	}
	cfg := config{MaxTurns: spec.MaxTurns, SandboxMode: spec.SandboxMode, Vision: vision, Depth: spec.Depth, SeqHigh: 1, ContextSeq: 1}
	env, err := m.checkEnvironment(ctx, id, spec, st)
	if err != nil {
		return nil, err
	}
	cfg.SharedEnvironment = spec.EnvironmentID != ""
	resolved, instructions, err := m.describeWorkspace(ctx, env.workspace)
	if err != nil {
		env.dispose(ctx)
		return nil, err
	}
	if resolved != "" {
		// The environment's own spelling of the path, which names the
		// workspace's memory too.
		env.workspace = resolved
	}
	meta := sessionMeta(id, spec, st, env.workspace, window, instructions)
	row := &store.Session{
		ID:              id,
		Provider:        spec.Model.GetProvider(),
		ModelID:         spec.Model.GetModelId(),
		Workspace:       env.workspace,
		AgentState:      st.Dir,
		ApprovalMode:    spec.ApprovalMode,
		ThinkingLevel:   spec.ThinkingLevel,
		Title:           spec.Title,
		ParentID:        spec.ParentID,
		ProjectID:       spec.ProjectID,
		Source:          spec.Source,
		EnvironmentID:   env.id,
		EnvironmentAddr: env.addr,
		Config:          cfg.bytes(),
	}
	if err := m.record(ctx, row, meta); err != nil {
		env.dispose(ctx)
		return nil, err
	}
	if env.owned {
		m.idleEnvs.idle(id)
	}
	kind := "new"
	if spec.ParentID != "" {
		kind = "subagent"
	}
	m.metrics.sessionsCreated.WithLabelValues(kind).Inc()
	return m.toProto(row, penguinv1.SessionState_SESSION_STATE_IDLE), nil
}

// ReadForNew reads in one statement (store.ReadForNewSession) what
// creating a session of spec asks of the store: userID's memberships
// (none for ""), from which the caller's authorization decides the
// session's project; the version of the session's agent, when the engine
// keeps its agents in the store; and the settings of the model spec
// names, in its project and the memberships' ones. Three reads were made
// apart before, each its own read transaction.
func (m *Manager) ReadForNew(ctx context.Context, spec CreateSpec, userID string) (*store.NewSessionRead, error) {
	q := store.NewSessionQuery{UserID: userID, Provider: spec.Model.GetProvider(), ModelID: spec.Model.GetModelId(),
		Project: cmp.Or(spec.ProjectID, store.DefaultProject)}
	if a, ok := m.agentOf(spec.AgentState); ok {
		q.Agent = a
	}
	return m.store.ReadForNewSession(ctx, q)
}

// modelFor is a new session's model: the one the request names, else the
// agent's default (model.provider and model.model_id of its
// system_config.yaml), so that a default set through the agent API is
// what a session created without a model runs on.
func modelFor(named *penguinv1.ModelRef, st *agentstate.State) (*penguinv1.ModelRef, error) {
	if named.GetProvider() != "" {
		return named, nil
	}
	if ref := st.Config.Model.Ref(); ref.GetProvider() != "" && ref.GetModelId() != "" {
		return ref, nil
	}
	return nil, fmt.Errorf("%w: no model: name one, or set the agent's default model (model.provider and model.model_id)", ErrInvalid)
}

// admit refuses a spec while the engine shuts down or when it lacks what
// every session needs, and fills in the default approval mode.
func (m *Manager) admit(spec CreateSpec) (CreateSpec, error) {
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return spec, fmt.Errorf("%w: the engine is shutting down", ErrUnavailable)
	}
	if (spec.Model.GetProvider() == "") != (spec.Model.GetModelId() == "") {
		return spec, fmt.Errorf("%w: the model needs both a provider and a model id", ErrInvalid)
	}
	if strings.TrimSpace(spec.Workspace) == "" {
		return spec, fmt.Errorf("%w: the workspace is required", ErrInvalid)
	}
	if spec.ApprovalMode == penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
		spec.ApprovalMode = approval.DefaultMode
	}
	return spec, nil
}

// checkedEnvironment is what checkEnvironment leaves a new session: the
// workspace as the environment service resolved it, and the environment
// the check made if it kept one (owned) or the parent's a subagent shares.
type checkedEnvironment struct {
	m         *Manager
	session   string
	id, addr  string
	workspace string
	owned     bool
}

// dispose disposes of the environment the check made, if it kept one,
// when the session is not created after all.
func (e checkedEnvironment) dispose(ctx context.Context) {
	if !e.owned {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	e.m.disposeEnvironment(dctx, e.session, e.addr, e.id)
}

// checkEnvironment checks a new session's environment spec. The session's
// environment is made at its first tool call. Only a spec the environment
// service has not answered for yet (the first session of a workspace and
// agent on this replica) makes one now: it checks the workspace, the tools
// and the sandbox, resolves the workspace and lists the tools, and is then
// kept for the session's first task (or disposed of when idle). MCP
// servers are left out of the check: creating a session starts none. They
// connect when the session's first task starts (mcpconnect.go), in an
// environment of its own, so a check of an agent that has them is disposed
// of at once. A subagent shares its parent's environment and checks
// nothing.
func (m *Manager) checkEnvironment(ctx context.Context, id string, spec CreateSpec, st *agentstate.State) (checkedEnvironment, error) {
	env := checkedEnvironment{m: m, session: id, id: spec.EnvironmentID, addr: spec.EnvironmentAddr, workspace: spec.Workspace}
	if env.id != "" {
		return env, nil
	}
	req := m.environmentSpec(id, spec.Workspace, st, spec.SandboxMode)
	// A directory a client names by its absolute path must be there: a
	// typo must not become a new, empty workspace. A name relative to the
	// environment service's root is a workspace the service keeps, made
	// on first use.
	req.WorkspaceMustExist = filepath.IsAbs(spec.Workspace)
	check := withoutMCP(req)
	if f, ok := m.specs.get(check); ok {
		env.workspace = cmp.Or(f.workspace, env.workspace)
		return env, nil
	}
	resp, _, err := m.createEnvironment(ctx, check)
	if err != nil {
		return env, err
	}
	env.id, env.addr, env.owned = resp.GetEnvironmentId(), resp.GetAddress(), true
	env.workspace = cmp.Or(resp.GetWorkspace(), env.workspace)
	if check != req {
		env.dispose(ctx)
		env.id, env.addr, env.owned = "", "", false
	}
	return env, nil
}

// sessionMeta is the first event of a new session's log: its model, its
// workspace and its system prompt (the spec's own prompt, if it has one,
// in place of the agent's).
func sessionMeta(id string, spec CreateSpec, st *agentstate.State, workspace string, window int64, instructions []*penguinv1.InstructionFile) *penguinv1.SessionMeta {
	prompter := st
	if spec.SystemPrompt != "" {
		c := *st
		c.Config.SystemPrompt = spec.SystemPrompt
		prompter = &c
	}
	return &penguinv1.SessionMeta{
		SessionId:          id,
		Provider:           spec.Model.GetProvider(),
		ModelId:            spec.Model.GetModelId(),
		ModelContextWindow: window,
		SystemPrompt: prompter.SystemPrompt(agentstate.PromptVars{
			Workspace: workspace, Provider: spec.Model.GetProvider(), ModelID: spec.Model.GetModelId(), SessionID: id,
			WorkspaceInstructions: instructions,
		}),
		AgentState: st.Dir,
		Workspace:  workspace,
		Source:     spec.Source,
	}
}

// record writes a new session's row and its first event, in one
// transaction.
func (m *Manager) record(ctx context.Context, row *store.Session, meta *penguinv1.SessionMeta) error {
	first := store.Event{Sequence: 1, Message: &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: meta}}}
	return m.store.CreateSession(ctx, row, first)
}

// modelInfo returns the model's context window and whether it takes
// images, from the agent's settings, the project's settings of the model
// (read with the rest when read has them) and the gateway's model table,
// in that order. An
// unknown model gets no window (the default is assumed) and vision. The
// session's project's routes are asked about beside the global ones.
func (m *Manager) modelInfo(ctx context.Context, ref *penguinv1.ModelRef, project string, st *agentstate.State, read *store.NewSessionRead) (int64, bool) {
	window, vision := st.Config.Model.ContextWindow, true
	pm, ok := read.ModelSetting(project, ref.GetProvider(), ref.GetModelId())
	if !ok {
		pm = m.projectModel(ctx, project, ref.GetProvider(), ref.GetModelId())
	}
	if window == 0 && pm != nil {
		window = pm.ContextWindow
	}
	resp, err := m.opts.LLM.ListModels(ctx, &penguinv1.ListModelsRequest{Provider: ref.GetProvider(), Project: project})
	if err != nil {
		m.log.Warn("could not list the gateway's models; assuming a vision model with the default window", "model", ref.GetModelId(), "error", err)
		return window, vision
	}
	for _, mi := range resp.GetModels() {
		if mi.GetModel().GetProvider() == ref.GetProvider() && mi.GetModel().GetModelId() == ref.GetModelId() {
			if window == 0 {
				window = mi.GetContextWindow()
			}
			return window, mi.GetVision()
		}
	}
	return window, vision
}

// Delete deletes a session and its log, aborting its task first, and
// disposes of its environment unless it shares its parent's.
func (m *Manager) Delete(ctx context.Context, id string) error {
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return err
	}
	if _, err := m.Abort(ctx, id, "the session is being deleted"); err != nil {
		return err
	}
	m.idleEnvs.forget(id)
	cfg, _ := parseConfig(row.Config)
	if row.EnvironmentID != "" && !cfg.SharedEnvironment {
		m.disposeEnvironment(ctx, id, row.EnvironmentAddr, row.EnvironmentID)
	}
	if err := m.store.DeleteSession(ctx, id); err != nil {
		return err
	}
	if row.AgentState != "" {
		if err := scratchpad.For(row.AgentState, id).RemoveAll(); err != nil {
			m.log.Warn("could not remove a deleted session's scratchpad", "session", id, "error", err)
		}
		m.saveAgent(ctx, row.AgentState)
	}
	return nil
}

// Fork copies a session's log into a new session, cut back to the last
// completed turn at or before upTo (zero: the whole log). The copy gets
// its own environment, in the same workspace, at its first run.
func (m *Manager) Fork(ctx context.Context, id string, upTo int64) (*penguinv1.Session, error) {
	if upTo < 0 {
		return nil, fmt.Errorf("%w: up_to_sequence must not be negative", ErrInvalid)
	}
	src, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	events, err := m.store.ReadEvents(ctx, id, 0, 0)
	if err != nil {
		return nil, err
	}
	events = cutToTurn(events, upTo)
	if len(events) == 0 {
		return nil, fmt.Errorf("%w: session %s has no session_meta to fork from", ErrPrecondition, id)
	}
	newID := newSessionID()
	cfg, _ := parseConfig(src.Config)
	last := events[len(events)-1].Sequence
	cfg.SeqHigh, cfg.Note, cfg.NoteSeq, cfg.SharedEnvironment = last, "", 0, false
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Message.GetSessionMeta() != nil {
			cfg.ContextSeq = events[i].Sequence
			break
		}
	}
	row := &store.Session{
		ID: newID, Provider: src.Provider, ModelID: src.ModelID, Workspace: src.Workspace, AgentState: src.AgentState,
		ApprovalMode: src.ApprovalMode, ThinkingLevel: src.ThinkingLevel, Title: src.Title, Source: "fork", ProjectID: src.ProjectID,
		Config: cfg.bytes(), Usage: src.Usage,
	}
	if err := m.store.CreateSession(ctx, row); err != nil {
		return nil, err
	}
	copies := make([]store.Event, len(events))
	for i, e := range events {
		msg := e.Message
		if meta := msg.GetSessionMeta(); meta != nil {
			msg = proto.Clone(msg).(*penguinv1.OmniMessage)
			msg.GetSessionMeta().SessionId = newID
		}
		copies[i] = store.Event{Sequence: e.Sequence, Message: msg}
	}
	const batch = 500
	for i := 0; i < len(copies); i += batch {
		if err := m.store.AppendEvents(ctx, newID, copies[i:min(i+batch, len(copies))]...); err != nil {
			_ = m.store.DeleteSession(context.WithoutCancel(ctx), newID)
			return nil, err
		}
	}
	row.LastSequence = last
	m.metrics.sessionsCreated.WithLabelValues("fork").Inc()
	return m.toProto(row, penguinv1.SessionState_SESSION_STATE_IDLE), nil
}

// cutToTurn keeps the events up to upTo (all when zero), cut back to a
// turn boundary: after the last completed request, plus what followed it
// before the next request or compaction began (its tool results, a
// prompt). A log with no completed request keeps its head up to the first
// request. A call is never split from its output: when the outputs of the
// last completed request's tool calls are not all at or before upTo, that
// whole turn goes, and the cut falls before it.
func cutToTurn(events []store.Event, upTo int64) []store.Event {
	n := len(events)
	if upTo > 0 {
		n = 0
		for n < len(events) && events[n].Sequence <= upTo {
			n++
		}
	}
	events = events[:n]
	lastEnd, lastBegin, begin := -1, 0, 0
	for i, e := range events {
		if e.Message.GetRequestBegin() != nil {
			begin = i
		}
		if re := e.Message.GetRequestEnd(); re != nil && re.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
			lastEnd, lastBegin = i, begin
		}
	}
	open := map[string]bool{}
	for i := lastBegin; i < lastEnd; i++ {
		if c := events[i].Message.GetToolCall(); c != nil && len(events[i].Message.GetOrigin()) == 0 {
			open[c.GetToolCallId()] = true
		}
	}
	cut := lastEnd + 1
	for cut < len(events) {
		msg := events[cut].Message
		if msg.GetRequestBegin() != nil || msg.GetCompactionBegin() != nil {
			break
		}
		if o := msg.GetToolCallOutput(); o != nil && len(msg.GetOrigin()) == 0 {
			delete(open, o.GetToolCallId())
		}
		cut++
	}
	if len(open) > 0 {
		// The turn's outputs lie beyond upTo: keep what came before the
		// turn, itself cut back to a boundary.
		return cutToTurn(events[:lastBegin], 0)
	}
	return events[:cut]
}

// Shutdown stops accepting tasks and waits for the running ones to end, or
// for ctx to end. A durable task is handed over: it stops writing at once
// and its lease expires, so the replica that takes the lease (or this one
// restarted) resumes it. Any other task is aborted, recording its state
// (the abort event, its carry-over).
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	if !m.closing {
		close(m.stopping)
	}
	m.closing = true
	m.idleEnvs.stop()
	var tasks []*task
	var owners []*Runtime
	for _, rt := range m.runtimes {
		rt.mu.Lock()
		if rt.task != nil {
			tasks = append(tasks, rt.task)
			owners = append(owners, rt)
		}
		rt.mu.Unlock()
	}
	rts := make([]*Runtime, 0, len(m.runtimes))
	for _, rt := range m.runtimes {
		rts = append(rts, rt)
	}
	m.mu.Unlock()
	for i, t := range tasks {
		if !owners[i].handOver(t) {
			t.cancel(&abortShutdown)
		}
	}
	done := make(chan struct{})
	go func() {
		m.tasks.Wait()
		close(done)
	}()
	select {
	case <-done:
		for _, rt := range rts {
			rt.watcher.Stop()
		}
		// Wait for the watchers' streams to let go, so every runtime saves
		// its sequence mark while the store is still open.
		for m.Loaded() > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
		}
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("session: tasks still running at shutdown"), ctx.Err())
	}
}

// abortShutdown is the cause given to tasks aborted by a shutdown.
var abortShutdown = loop.Aborted{Reason: "the engine is shutting down"}

// projectModel returns the project's settings of a model, nil when it has
// none or they cannot be read (the catalog's then apply, and the failure
// is logged).
func (m *Manager) projectModel(ctx context.Context, project, provider, modelID string) *store.ModelSetting {
	if project == "" {
		project = store.DefaultProject
	}
	pm, err := m.store.GetModelSetting(ctx, project, provider, modelID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.log.Warn("could not read the project's model settings; using the catalog's", "project", project, "model", provider+"/"+modelID, "error", err)
		}
		return nil
	}
	return pm
}
