package session

import (
	"context"
	"fmt"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// envClient returns the client for an environment reached at addr.
func (m *Manager) envClient(addr string) (penguinv1.EnvironmentServiceClient, error) {
	if addr == "" || m.opts.DialEnvironment == nil {
		return m.opts.Environment, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.envClients[addr]; c != nil {
		return c, nil
	}
	c, err := m.opts.DialEnvironment(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: environment replica %s: %v", ErrUnavailable, addr, err)
	}
	m.envClients[addr] = c
	return c, nil
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

// environmentReadyWait bounds a call to the environment service at large
// (CreateEnvironment, DescribeWorkspace) whose caller set no deadline,
// including the wait for the connection to be ready.
const environmentReadyWait = 30 * time.Second

// readyWait bounds ctx by environmentReadyWait when it has no deadline, for
// a call made with grpc.WaitForReady.
func readyWait(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, environmentReadyWait)
}

// createEnvironment creates an environment and returns it with the client
// that reaches it. The call waits for the connection to be ready, within
// the caller's deadline: right after the environment service restarts,
// the connection is reconnecting, and failing at once would fail the
// session for a blip. What the service answered is remembered for the
// spec (envSpecs).
func (m *Manager) createEnvironment(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, penguinv1.EnvironmentServiceClient, error) {
	ctx, cancel := readyWait(ctx)
	defer cancel()
	resp, err := m.opts.Environment.CreateEnvironment(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return nil, nil, downstream("create the environment", err)
	}
	m.specs.put(req, resp)
	client, err := m.envClient(resp.GetAddress())
	if err != nil {
		return nil, nil, err
	}
	return resp, client, nil
}

// disposeEnvironment disposes of the environment envID, reached at addr,
// of session id. A failure is logged: the environment is gone from the
// session either way, and its replica disposes of it when it stops.
func (m *Manager) disposeEnvironment(ctx context.Context, id, addr, envID string) {
	client, err := m.envClient(addr)
	if err == nil {
		_, err = client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: envID})
	}
	if err != nil {
		m.log.Warn("could not dispose of a session's environment", "session", id, "environment", envID, "error", err)
	}
}

// envBinding is the environment a session's tools run in: the client
// that reaches its replica, its id and the address recorded for it. The
// zero envBinding is no environment yet.
type envBinding struct {
	client penguinv1.EnvironmentServiceClient
	id     string
	addr   string
}

// bindEnvironment returns the session's environment and its tools. A
// session without an environment whose spec the environment service
// already answered for (envSpecs) gets the tools alone: its environment
// is made at its first tool call. One whose agent has MCP servers gets
// neither, and reason: its environment is made when its task starts
// (toolset.connect), since the servers' tools are only known once they
// answer. Otherwise a new environment is made now, also when the
// recorded one is gone: the environment service no longer knows it (it
// restarted), or the replica that held it cannot be reached (its host is
// gone); reason says which. A new environment comes from the environment
// service at large (Options.Environment, which may spread over several
// replicas), and the session is bound to the replica that created it
// from then on.
func (rt *Runtime) bindEnvironment(ctx context.Context, row *store.Session, cfg config, st *agentstate.State) (_ envBinding, _ []*penguinv1.ToolInfo, reason string, _ error) {
	m := rt.m
	if row.EnvironmentID != "" {
		client, err := m.envClient(row.EnvironmentAddr)
		if err != nil {
			return envBinding{}, nil, "", err
		}
		tools, err := m.listTools(ctx, client, row.EnvironmentID)
		switch status.Code(err) {
		case codes.OK:
			return envBinding{client: client, id: row.EnvironmentID, addr: row.EnvironmentAddr}, tools, "", nil
		case codes.NotFound:
			reason = string(envtool.Missing)
		case codes.Unavailable:
			if ctx.Err() != nil {
				return envBinding{}, nil, "", ctx.Err()
			}
			reason = string(envtool.Unreachable)
			m.log.Warn("the replica of the session's environment cannot be reached; creating a fresh environment",
				"session", rt.id, "environment", row.EnvironmentID, "address", row.EnvironmentAddr, "error", err)
		default:
			return envBinding{}, nil, "", downstream("reach the session's environment", err)
		}
	}
	spec := m.environmentSpec(rt.id, row.Workspace, st, cfg.SandboxMode)
	switch {
	case len(spec.GetTools().GetMcpServers()) > 0:
		return envBinding{}, nil, reason, nil
	case row.EnvironmentID == "":
		if f, ok := m.specs.get(spec); ok {
			return envBinding{}, f.tools, "", nil
		}
	}
	b, tools, err := rt.rebind(ctx, row, cfg, st, reason)
	return b, tools, "", err
}

// rebind creates a fresh environment for the session and records it in
// the session's row. reason, when set, says why the old one was replaced.
//
// It is called by a task that holds the session (its preparation, or a
// tool call that needs an environment), so the row is written through the
// task's journal: in the commit of the events queued meanwhile (at a first
// tool call, often the end of the model request that asked for it), and
// on record before the call runs, so that a replica taking the session
// over after a crash finds the environment and what the call left in it.
// A log that failed writes nothing, and the binding fails with it; a
// commit of the binding that fails is a failure of the log, which stops
// the task as a failed event's would.
func (rt *Runtime) rebind(ctx context.Context, row *store.Session, cfg config, st *agentstate.State, reason string) (envBinding, []*penguinv1.ToolInfo, error) {
	m := rt.m
	resp, client, err := rt.createConnecting(ctx, m.environmentSpec(rt.id, row.Workspace, st, cfg.SandboxMode))
	if err != nil {
		return envBinding{}, nil, err
	}
	b := envBinding{client: client, id: resp.GetEnvironmentId(), addr: resp.GetAddress()}
	// The binding is a patch of the two columns, which the store writes
	// without reading the row back. A session that shared its parent's
	// environment has one of its own from now on: only then does the
	// config change too (the mark is set when the session is created and
	// never again, so a task that read it unset needs no change).
	patch := &store.SessionPatch{Environment: &store.EnvironmentBinding{ID: b.id, Addr: b.addr}}
	if cfg.SharedEnvironment {
		patch.Config = []store.ConfigChange{{Key: configSharedEnvironment}}
	}
	if err := rt.journal.FlushWith(store.SessionWrite{Patch: patch}); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		m.disposeEnvironment(dctx, rt.id, b.addr, b.id)
		cancel()
		return envBinding{}, nil, err
	}
	if reason != "" {
		m.metrics.rebinds.WithLabelValues(reason).Inc()
		m.log.Info("the session has a fresh environment", "session", rt.id, "reason", reason, "environment", b.id, "address", b.addr)
	}
	row.EnvironmentID, row.EnvironmentAddr = b.id, b.addr
	return b, resp.GetTools(), nil
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
