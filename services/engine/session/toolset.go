package session

import (
	"context"
	"fmt"
	"slices"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/enginetool/agentfiles"
	"github.com/penguin-agent/penguin/services/engine/enginetool/describeimage"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// toolset is the tools of one task: the environment's, filtered for the
// model, plus the engine's own. It implements loop.Tools.
type toolset struct {
	rt   *Runtime
	defs []*penguinv1.ToolDefinition

	mu     sync.Mutex
	client penguinv1.EnvironmentServiceClient
	envID  string
	perms  map[string]penguinv1.Permission
	engine map[string]enginetool.Tool
	// recreate makes a new environment when the old one is gone.
	recreate func(ctx context.Context, why envtool.Reason) error
	exec     *envtool.Executor
}

func (ts *toolset) target() (envtool.Client, string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.client, ts.envID
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
	return ts.exec.Execute(ctx, call, forward)
}

// permission returns a tool's permission for approval modes: from the
// tool lists, else asked of the environment.
func (ts *toolset) permission(ctx context.Context, name string) penguinv1.Permission {
	ts.mu.Lock()
	p, ok := ts.perms[name]
	client, envID := ts.client, ts.envID
	ts.mu.Unlock()
	if ok {
		return p
	}
	resp, err := client.GetToolPermission(ctx, &penguinv1.GetToolPermissionRequest{EnvironmentId: envID, Name: name})
	if err != nil {
		return penguinv1.Permission_PERMISSION_UNSPECIFIED
	}
	return resp.GetPermission()
}

// newToolset builds the task's tools: the environment's filtered for the
// model class, then the engine's own (no subagent tools for a subagent).
func (rt *Runtime) newToolset(ctx context.Context, row *store.Session, cfg config, st *agentstate.State) (*toolset, error) {
	client, envID, infos, err := rt.bindEnvironment(ctx, row, cfg, st)
	if err != nil {
		return nil, err
	}
	ts := &toolset{rt: rt, client: client, envID: envID, perms: map[string]penguinv1.Permission{}, engine: map[string]enginetool.Tool{}}
	ts.recreate = func(ctx context.Context, why envtool.Reason) error {
		row := *row
		client, envID, _, err := rt.rebind(ctx, &row, cfg, st, string(why))
		if err != nil {
			return err
		}
		ts.mu.Lock()
		ts.client, ts.envID = client, envID
		ts.mu.Unlock()
		return nil
	}
	ts.exec = &envtool.Executor{Target: ts.target, Recreate: ts.recreate}
	tools := st.Config.Tools
	for _, ti := range tools.FilterEnvironmentTools(infos, cfg.Vision) {
		if slices.Contains(agentstate.EngineToolNames(), ti.GetDefinition().GetName()) {
			continue
		}
		ts.defs = append(ts.defs, ti.GetDefinition())
		ts.perms[ti.GetDefinition().GetName()] = ti.GetPermission()
	}
	for _, spec := range tools.EngineTools(cfg.Vision) {
		et := rt.engineTool(spec.Name, ts, row, cfg, st)
		if et == nil {
			continue
		}
		ts.defs = append(ts.defs, spec.Definition())
		ts.perms[spec.Name] = spec.PermissionProto()
		ts.engine[spec.Name] = et
	}
	return ts, nil
}

// engineTool returns the engine's implementation of a tool, or nil when
// this session does not offer it: a subagent cannot start subagents of its
// own (depth 1), and the agent-file tools follow the skills and memory
// switches.
func (rt *Runtime) engineTool(name string, ts *toolset, row *store.Session, cfg config, st *agentstate.State) enginetool.Tool {
	switch name {
	case agentstate.ToolReadAgentFile:
		// Reading serves skills and memory; with both off there is
		// nothing the prompt points to.
		if !st.Config.Skills.Enabled && !st.Config.Memory.Enabled {
			return nil
		}
		return agentfiles.For(name, st.Files(row.Workspace))
	case agentstate.ToolWriteAgentFile, agentstate.ToolDeleteAgentFile:
		if !st.Config.Memory.Enabled {
			return nil
		}
		return agentfiles.For(name, st.Files(row.Workspace))
	}
	if name == agentstate.ToolDescribeImage {
		return &describeimage.Tool{
			LLM: rt.m.opts.LLM, Vision: st.Config.Model.VisionModel.Proto(), TimeoutMs: st.Config.Model.RequestTimeoutMS,
			Environment: ts.exec,
		}
	}
	if cfg.Depth > 0 {
		return nil
	}
	return rt.m.subagents.For(&parent{rt: rt, row: row}, rt.m.log).Tool(name)
}

func sameTools(a, b []*penguinv1.ToolDefinition) bool {
	return slices.EqualFunc(a, b, func(x, y *penguinv1.ToolDefinition) bool {
		return x.GetName() == y.GetName() && x.GetDescription() == y.GetDescription() && x.GetParameters() == y.GetParameters()
	})
}
