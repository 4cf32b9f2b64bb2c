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

// environmentReadyWait bounds a CreateEnvironment whose caller set no
// deadline, including the wait for the connection to be ready.
const environmentReadyWait = 30 * time.Second

// createEnvironment creates an environment and returns it with the client
// that reaches it. The call waits for the connection to be ready, within
// the caller's deadline: right after the environment service restarts,
// the connection is reconnecting, and failing at once would fail the
// session for a blip.
func (m *Manager) createEnvironment(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, penguinv1.EnvironmentServiceClient, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, environmentReadyWait)
		defer cancel()
	}
	resp, err := m.opts.Environment.CreateEnvironment(ctx, req, grpc.WaitForReady(true))
	if err != nil {
		return nil, nil, downstream("create the environment", err)
	}
	client, err := m.envClient(resp.GetAddress())
	if err != nil {
		return nil, nil, err
	}
	return resp, client, nil
}

// liveEnvironment returns the session's environment and its tools when
// the recorded one is still there. Otherwise it returns no environment
// and the reason to make a new one: empty when the session has none yet,
// or why the recorded one is gone: the environment service no longer
// knows it (it restarted, or the session was forked), or the replica that
// held it cannot be reached (its host is gone). A new environment comes
// from the environment service at large (Options.Environment, which may
// spread over several replicas), and the session is bound to the replica
// that created it from then on (rebind).
func (rt *Runtime) liveEnvironment(ctx context.Context, row *store.Session) (penguinv1.EnvironmentServiceClient, string, []*penguinv1.ToolInfo, envtool.Reason, error) {
	m := rt.m
	if row.EnvironmentID == "" {
		return nil, "", nil, "", nil
	}
	client, err := m.envClient(row.EnvironmentAddr)
	if err != nil {
		return nil, "", nil, "", err
	}
	tools, err := m.listTools(ctx, client, row.EnvironmentID)
	switch status.Code(err) {
	case codes.OK:
		return client, row.EnvironmentID, tools, "", nil
	case codes.NotFound:
		return nil, "", nil, envtool.Missing, nil
	case codes.Unavailable:
		if ctx.Err() != nil {
			return nil, "", nil, "", ctx.Err()
		}
		m.log.Warn("the replica of the session's environment cannot be reached; creating a fresh environment",
			"session", rt.id, "environment", row.EnvironmentID, "address", row.EnvironmentAddr, "error", err)
		return nil, "", nil, envtool.Unreachable, nil
	default:
		return nil, "", nil, "", downstream("reach the session's environment", err)
	}
}

// rebind creates a fresh environment for the session and records it in
// the session's row. reason, when set, says why the old one was replaced.
func (rt *Runtime) rebind(ctx context.Context, row *store.Session, cfg config, st *agentstate.State, reason string) (penguinv1.EnvironmentServiceClient, string, []*penguinv1.ToolInfo, error) {
	m := rt.m
	resp, client, err := rt.createConnecting(ctx, m.environmentSpec(rt.id, row.Workspace, st, cfg.SandboxMode))
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
