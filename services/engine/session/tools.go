package session

import (
	"context"
	"fmt"
	"slices"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EngineTool is a tool the engine runs itself instead of the environment
// (the subagent tools, describe_image).
type EngineTool interface {
	Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage
}

// toolset is the tools of one task: the environment's, filtered for the
// model, plus the engine's own. It implements loop.Tools.
type toolset struct {
	rt   *Runtime
	defs []*penguinv1.ToolDefinition

	mu     sync.Mutex
	client penguinv1.EnvironmentServiceClient
	envID  string
	perms  map[string]penguinv1.Permission
	engine map[string]EngineTool
	// recreate makes a new environment when the old one is gone.
	recreate func(ctx context.Context) error
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

// environmentSpec is what a new environment is made of.
func (m *Manager) environmentSpec(sessionID, workspace string, st *agentstate.State, sandbox penguinv1.SandboxMode) *penguinv1.CreateEnvironmentRequest {
	return &penguinv1.CreateEnvironmentRequest{
		Workspace:     workspace,
		Tools:         st.ToolConfig(),
		CommandPolicy: m.opts.CommandPolicy,
		SandboxMode:   sandbox,
		Vault:         st.Vault,
		Label:         sessionID,
	}
}

// createEnvironment creates an environment and returns it with the client
// that reaches it.
func (m *Manager) createEnvironment(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, penguinv1.EnvironmentServiceClient, error) {
	resp, err := m.opts.Environment.CreateEnvironment(ctx, req)
	if err != nil {
		return nil, nil, downstream("create the environment", err)
	}
	client, err := m.envClient(resp.GetAddress())
	if err != nil {
		return nil, nil, err
	}
	return resp, client, nil
}

// bindEnvironment returns the session's environment and its tools,
// creating a new environment when the recorded one is gone (the
// environment service restarted, or the session was forked).
func (rt *Runtime) bindEnvironment(ctx context.Context, row *store.Session, cfg config, st *agentstate.State) (penguinv1.EnvironmentServiceClient, string, []*penguinv1.ToolInfo, error) {
	m := rt.m
	if row.EnvironmentID != "" {
		client, err := m.envClient(row.EnvironmentAddr)
		if err != nil {
			return nil, "", nil, err
		}
		resp, err := client.ListTools(ctx, &penguinv1.ListToolsRequest{EnvironmentId: row.EnvironmentID})
		if err == nil {
			return client, row.EnvironmentID, resp.GetTools(), nil
		}
		if status.Code(err) != codes.NotFound {
			return nil, "", nil, downstream("reach the session's environment", err)
		}
	}
	resp, client, err := m.createEnvironment(ctx, m.environmentSpec(rt.id, row.Workspace, st, cfg.SandboxMode))
	if err != nil {
		return nil, "", nil, err
	}
	envID, addr := resp.GetEnvironmentId(), resp.GetAddress()
	if err := m.updateRow(ctx, rt.id, func(r *store.Session, c *config) {
		r.EnvironmentID, r.EnvironmentAddr = envID, addr
		c.SharedEnvironment = false
	}); err != nil {
		return nil, "", nil, err
	}
	row.EnvironmentID, row.EnvironmentAddr = envID, addr
	return client, envID, resp.GetTools(), nil
}

// newToolset builds the task's tools: the environment's filtered for the
// model class, then the engine's own (no subagent tools for a subagent).
func (rt *Runtime) newToolset(ctx context.Context, row *store.Session, cfg config, st *agentstate.State) (*toolset, error) {
	client, envID, infos, err := rt.bindEnvironment(ctx, row, cfg, st)
	if err != nil {
		return nil, err
	}
	ts := &toolset{rt: rt, client: client, envID: envID, perms: map[string]penguinv1.Permission{}, engine: map[string]EngineTool{}}
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
	ts.recreate = func(ctx context.Context) error {
		row := *row
		row.EnvironmentID = ""
		client, envID, _, err := rt.bindEnvironment(ctx, &row, cfg, st)
		if err != nil {
			return err
		}
		ts.mu.Lock()
		ts.client, ts.envID = client, envID
		ts.mu.Unlock()
		return nil
	}
	ts.exec = &envtool.Executor{Target: ts.target, Recreate: ts.recreate}
	return ts, nil
}

// engineTool returns the engine's implementation of a tool, or nil when
// this session does not offer it.
func (rt *Runtime) engineTool(name string, ts *toolset, row *store.Session, cfg config, st *agentstate.State) EngineTool {
	switch name {
	case agentstate.ToolDescribeImage:
		return &describeImage{llm: rt.m.opts.LLM, ts: ts, vision: st.Config.Model.VisionModel.Proto(), timeoutMs: st.Config.Model.RequestTimeoutMS}
	}
	return rt.subagentTool(name, row, cfg)
}

func sameTools(a, b []*penguinv1.ToolDefinition) bool {
	return slices.EqualFunc(a, b, func(x, y *penguinv1.ToolDefinition) bool {
		return x.GetName() == y.GetName() && x.GetDescription() == y.GetDescription() && x.GetParameters() == y.GetParameters()
	})
}
