package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
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
// creating a new environment when the recorded one is gone: the
// environment service no longer knows it (it restarted, or the session
// was forked), or the replica that held it cannot be reached (its host is
// gone). A new environment comes from the environment service at large
// (Options.Environment, which may spread over several replicas), and the
// session is bound to the replica that created it from then on.
func (rt *Runtime) bindEnvironment(ctx context.Context, row *store.Session, cfg config, st *agentstate.State) (penguinv1.EnvironmentServiceClient, string, []*penguinv1.ToolInfo, error) {
	m := rt.m
	reason := ""
	if row.EnvironmentID != "" {
		client, err := m.envClient(row.EnvironmentAddr)
		if err != nil {
			return nil, "", nil, err
		}
		tools, err := m.listTools(ctx, client, row.EnvironmentID)
		switch status.Code(err) {
		case codes.OK:
			return client, row.EnvironmentID, tools, nil
		case codes.NotFound:
			reason = string(envtool.Missing)
		case codes.Unavailable:
			if ctx.Err() != nil {
				return nil, "", nil, ctx.Err()
			}
			reason = string(envtool.Unreachable)
			m.log.Warn("the replica of the session's environment cannot be reached; creating a fresh environment",
				"session", rt.id, "environment", row.EnvironmentID, "address", row.EnvironmentAddr, "error", err)
		default:
			return nil, "", nil, downstream("reach the session's environment", err)
		}
	}
	return rt.rebind(ctx, row, cfg, st, reason)
}

// rebind creates a fresh environment for the session and records it in
// the session's row. reason, when set, says why the old one was replaced.
func (rt *Runtime) rebind(ctx context.Context, row *store.Session, cfg config, st *agentstate.State, reason string) (penguinv1.EnvironmentServiceClient, string, []*penguinv1.ToolInfo, error) {
	m := rt.m
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
	if reason != "" {
		m.metrics.rebinds.WithLabelValues(reason).Inc()
		m.log.Info("the session has a fresh environment", "session", rt.id, "reason", reason, "environment", envID, "address", addr)
	}
	row.EnvironmentID, row.EnvironmentAddr = envID, addr
	return client, envID, resp.GetTools(), nil
}

// unreachableWait is how long a session waits for the replica of its
// environment to answer before it gives the environment up: long enough
// for a reconnect after a blip, short next to a task.
const unreachableWait = 3 * time.Second

// listTools lists an environment's tools. A replica that does not answer
// at once gets until unreachableWait to come back.
func (m *Manager) listTools(ctx context.Context, client penguinv1.EnvironmentServiceClient, envID string) ([]*penguinv1.ToolInfo, error) {
	resp, err := client.ListTools(ctx, &penguinv1.ListToolsRequest{EnvironmentId: envID})
	if status.Code(err) == codes.Unavailable && ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, unreachableWait)
		resp, err = client.ListTools(wctx, &penguinv1.ListToolsRequest{EnvironmentId: envID}, grpc.WaitForReady(true))
		cancel()
		if status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil {
			err = status.Errorf(codes.Unavailable, "no answer within %s: %v", unreachableWait, err)
		}
	}
	if err != nil {
		return nil, err
	}
	return resp.GetTools(), nil
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
