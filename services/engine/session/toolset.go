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
	// connect, while set, makes the task's environment: one that
	// connects MCP servers is made by the task once its input is recorded
	// (startTools), not while it prepares. Until then the model's tools
	// are the ones the context last recorded.
	connect func(ctx context.Context) error
}

func (ts *toolset) target() (envtool.Client, string) {
	return ts.binding()
}

// binding returns the task's environment and the client that reaches it;
// the id is empty while the task has none yet (connect).
func (ts *toolset) binding() (penguinv1.EnvironmentServiceClient, string) {
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
	if ok || client == nil {
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
// known is the tool list the context last recorded, offered until a
// deferred environment is made.
func (rt *Runtime) newToolset(ctx context.Context, row *store.Session, cfg config, st *agentstate.State, known []*penguinv1.ToolDefinition) (*toolset, error) {
	client, envID, infos, reason, err := rt.liveEnvironment(ctx, row)
	if err != nil {
		return nil, err
	}
	ts := &toolset{rt: rt, client: client, envID: envID}
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
	bind := func(infos []*penguinv1.ToolInfo) {
		ts.defs, ts.perms, ts.engine = nil, map[string]penguinv1.Permission{}, map[string]enginetool.Tool{}
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
	}
	switch {
	case envID != "":
		bind(infos)
	case len(st.ToolConfig().GetMcpServers()) > 0:
		bind(nil)
		ts.defs = known
		ts.connect = func(ctx context.Context) error {
			client, envID, infos, err := rt.rebind(ctx, row, cfg, st, string(reason))
			if err != nil {
				return err
			}
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.client, ts.envID, ts.connect = client, envID, nil
			bind(infos)
			return nil
		}
	default:
		if client, envID, infos, err = rt.rebind(ctx, row, cfg, st, string(reason)); err != nil {
			return nil, err
		}
		ts.client, ts.envID = client, envID
		bind(infos)
	}
	return ts, nil
}

// engineTool returns the engine's implementation of a tool, or nil when
// this session does not offer it: a subagent cannot start subagents of its
// own (depth 1).
func (rt *Runtime) engineTool(name string, ts *toolset, row *store.Session, cfg config, st *agentstate.State) enginetool.Tool {
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
