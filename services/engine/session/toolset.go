package session

import (
	"context"
	"fmt"
	"slices"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/enginetool/agentfiles"
	"github.com/penguin-agent/penguin/services/engine/enginetool/describeimage"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// toolset is the tools of one task: the environment's, filtered for the
// model, plus the engine's own. It implements loop.Tools.
//
// The environment is made at the first call that needs one when the task
// started without one (bindEnvironment): concurrent first calls make one
// environment between them, since binding is held while it is made.
type toolset struct {
	rt   *Runtime
	defs []*penguinv1.ToolDefinition
	// shared marks the environment of a subagent's parent, which the
	// parent owns (and disposes of when idle).
	shared bool
	// binding is a one-slot semaphore held while an environment is made.
	binding chan struct{}
	// rebind makes a new environment for the session and records it.
	rebind func(ctx context.Context, why envtool.Reason) (envBinding, []*penguinv1.ToolInfo, error)
	// connect, while set, makes the task's environment when the task
	// starts: one that connects MCP servers is made once the task's input
	// is recorded (startTools), not while it prepares. Until then the
	// model's tools are the ones the context last recorded.
	connect func(ctx context.Context) error

	mu     sync.Mutex
	env    envBinding
	perms  map[string]penguinv1.Permission
	engine map[string]enginetool.Tool
	exec   *envtool.Executor
}

// current returns the environment the task uses now; its id is empty
// before the first call that needed one.
func (ts *toolset) current() envBinding {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.env
}

func (ts *toolset) target() (envtool.Client, string) {
	b := ts.current()
	return b.client, b.id
}

// ensure returns the task's environment, making it when the task has none
// yet.
func (ts *toolset) ensure(ctx context.Context) (envBinding, error) {
	if b := ts.current(); b.id != "" {
		return b, nil
	}
	return ts.replace(ctx, "", "")
}

// replace makes a new environment for the session, unless the one the
// caller saw (gone; empty for none) was replaced already by a concurrent
// call; why, when set, says why the old one is replaced.
func (ts *toolset) replace(ctx context.Context, gone string, why envtool.Reason) (envBinding, error) {
	select {
	case ts.binding <- struct{}{}:
	case <-ctx.Done():
		return envBinding{}, ctx.Err()
	}
	defer func() { <-ts.binding }()
	if b := ts.current(); b.id != gone {
		return b, nil
	}
	b, _, err := ts.rebind(ctx, why)
	if err != nil {
		return envBinding{}, err
	}
	ts.mu.Lock()
	ts.env, ts.shared = b, false
	ts.mu.Unlock()
	ts.rt.watcher.Watch(b.client, b.id)
	return b, nil
}

// recreate replaces the environment gone (envtool.Executor).
func (ts *toolset) recreate(ctx context.Context, why envtool.Reason, gone string) error {
	_, err := ts.replace(ctx, gone, why)
	return err
}

// runInEnvironment runs a call in the environment, made first when the
// task has none yet.
func (ts *toolset) runInEnvironment(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	if _, err := ts.ensure(ctx); err != nil {
		if ctx.Err() != nil {
			return omni.ToolCallOutput(call.GetToolCallId(), loop.CallAborted, penguinv1.StopReason_STOP_REASON_ABORTED)
		}
		return omni.ToolCallOutput(call.GetToolCallId(), "the session's environment could not be created: "+err.Error(), penguinv1.StopReason_STOP_REASON_FAILED)
	}
	return ts.exec.Execute(ctx, call, forward)
}

// Execute routes a call to the engine's own tool or to the environment.
func (ts *toolset) Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	ts.mu.Lock()
	et := ts.engine[call.GetName()]
	ts.mu.Unlock()
	if et != nil {
		return et.Execute(ctx, call, forward)
	}
	if !slices.ContainsFunc(ts.defs, func(d *penguinv1.ToolDefinition) bool { return d.GetName() == call.GetName() }) {
		return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("There is no tool named %q.", call.GetName()), penguinv1.StopReason_STOP_REASON_FAILED)
	}
	return ts.runInEnvironment(ctx, call, forward)
}

// permission returns a tool's permission for approval modes: from the
// tool lists, else asked of the environment, when there is one.
func (ts *toolset) permission(ctx context.Context, name string) penguinv1.Permission {
	ts.mu.Lock()
	p, ok := ts.perms[name]
	env := ts.env
	ts.mu.Unlock()
	if ok || env.id == "" {
		return p
	}
	resp, err := env.client.GetToolPermission(ctx, &penguinv1.GetToolPermissionRequest{EnvironmentId: env.id, Name: name})
	if err != nil {
		return penguinv1.Permission_PERMISSION_UNSPECIFIED
	}
	return resp.GetPermission()
}

// ownEnvironment reports whether the task uses an environment its session
// owns (not its parent's), which is then the session's to dispose of when
// idle.
func (ts *toolset) ownEnvironment() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.env.id != "" && !ts.shared
}

// newToolset builds the task's tools: the environment's filtered for the
// model class, then the engine's own (no subagent tools for a subagent).
// known is the tool list the context last recorded, offered until an
// environment made when the task starts (connect) says what it has.
func (rt *Runtime) newToolset(ctx context.Context, row *store.Session, cfg config, st *agentstate.State, known []*penguinv1.ToolDefinition, goal bool) (*toolset, error) {
	env, infos, reason, err := rt.bindEnvironment(ctx, row, cfg, st)
	if err != nil {
		return nil, err
	}
	ts := &toolset{rt: rt, env: env, shared: cfg.SharedEnvironment && env.id == row.EnvironmentID && env.id != "",
		binding: make(chan struct{}, 1)}
	ts.rebind = func(ctx context.Context, why envtool.Reason) (envBinding, []*penguinv1.ToolInfo, error) {
		row := *row
		return rt.rebind(ctx, &row, cfg, st, string(why))
	}
	ts.exec = &envtool.Executor{Target: ts.target, Recreate: ts.recreate}
	bind := func(infos []*penguinv1.ToolInfo) {
		ts.defs, ts.perms, ts.engine = nil, map[string]penguinv1.Permission{}, map[string]enginetool.Tool{}
		tools := st.Config.Tools
		for _, ti := range tools.FilterEnvironmentTools(infos, cfg.Vision) {
			if slices.Contains(agentconfig.EngineToolNames(), ti.GetDefinition().GetName()) {
				continue
			}
			ts.defs = append(ts.defs, ti.GetDefinition())
			ts.perms[ti.GetDefinition().GetName()] = ti.GetPermission()
		}
		for _, spec := range tools.EngineTools(cfg.Vision) {
			et := rt.engineTool(spec.Name, ts, row, cfg, st, goal)
			if et == nil {
				continue
			}
			ts.defs = append(ts.defs, spec.Definition())
			ts.perms[spec.Name] = spec.PermissionProto()
			ts.engine[spec.Name] = et
		}
	}
	bind(infos)
	if env.id == "" && len(st.ToolConfig().GetMcpServers()) > 0 {
		ts.defs = known
		ts.connect = func(ctx context.Context) error {
			b, infos, err := ts.rebind(ctx, envtool.Reason(reason))
			if err != nil {
				return err
			}
			ts.mu.Lock()
			ts.env, ts.shared, ts.connect = b, false, nil
			bind(infos)
			ts.mu.Unlock()
			ts.rt.watcher.Watch(b.client, b.id)
			return nil
		}
	}
	return ts, nil
}

// engineTool returns the engine's implementation of a tool, or nil when
// this session does not offer it: a subagent cannot start subagents of its
// own (depth 1), and the agent-file tools follow the skills and memory
// switches, plus the session's scratchpad while a goal runs (its control
// file is there).
func (rt *Runtime) engineTool(name string, ts *toolset, row *store.Session, cfg config, st *agentstate.State, goal bool) enginetool.Tool {
	switch name {
	case agentconfig.ToolReadAgentFile, agentconfig.ToolWriteAgentFile, agentconfig.ToolDeleteAgentFile:
		// Reading serves skills and memory; with both off there is
		// nothing the prompt points to. Writing serves memory.
		var own enginetool.Tool
		if st.Config.Memory.Enabled || (name == agentconfig.ToolReadAgentFile && st.Config.Skills.Enabled) {
			own = agentfiles.For(name, st.Files(row.Workspace).WithModelCheck(rt.m.modelCheck(row.ProjectID)))
		}
		if goal {
			own = agentfiles.WithScratchpad(name, own, scratchpad.For(st.Dir, row.ID))
		}
		if own == nil {
			return nil
		}
		if name == agentconfig.ToolReadAgentFile {
			return own
		}
		return rt.m.savingAgent(own, st.Dir)
	}
	if name == agentconfig.ToolDescribeImage {
		return &describeimage.Tool{
			LLM: rt.m.opts.LLM, Vision: st.Config.Model.VisionModel.Proto(), TimeoutMs: st.Config.Model.RequestTimeoutMS, Project: row.ProjectID,
			Environment: enginetool.Func(ts.runInEnvironment), Scratchpad: scratchpad.For(st.Dir, row.ID),
		}
	}
	if cfg.Depth > 0 {
		return nil
	}
	return rt.m.subagents.For(&parent{rt: rt, row: row, tools: ts}, rt.m.log).Tool(name)
}

// savingAgent makes a tool that changes the agent's files write them to
// the store as soon as it has run, when the agent is one of the store's:
// memory a model saves on this replica is in the next session's prompt on
// any other. A failure to reach the store leaves the change in the
// working copy, which the next task's sync writes.
func (m *Manager) savingAgent(t enginetool.Tool, dir string) enginetool.Tool {
	if m.opts.Agents == nil {
		return t
	}
	if _, _, ok := m.opts.Agents.Resolve(dir); !ok {
		return t
	}
	return enginetool.Func(func(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
		out := t.Execute(ctx, call, forward)
		m.saveAgent(context.WithoutCancel(ctx), dir)
		return out
	})
}

// saveAgent writes to the store what changed in the working copy dir of an
// agent the store holds (nothing for a plain directory); a failure is
// logged, and the next task's sync retries it.
func (m *Manager) saveAgent(ctx context.Context, dir string) {
	if m.opts.Agents == nil {
		return
	}
	project, agent, ok := m.opts.Agents.Resolve(dir)
	if !ok {
		return
	}
	if _, err := m.opts.Agents.Sync(ctx, project, agent); err != nil {
		m.log.Warn("an agent's changed files could not be written to the store; the next task retries", "agent", agent, "error", err)
	}
}

func sameTools(a, b []*penguinv1.ToolDefinition) bool {
	return slices.EqualFunc(a, b, func(x, y *penguinv1.ToolDefinition) bool {
		return x.GetName() == y.GetName() && x.GetDescription() == y.GetDescription() && x.GetParameters() == y.GetParameters()
	})
}
