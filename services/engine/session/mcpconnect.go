package session

import (
	"context"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/protobuf/proto"
)

// MCP start-up belongs to a run. An environment connects its agent's MCP
// servers when it is made, and their tools are part of the list the model
// is offered, so an agent with MCP servers needs its environment before
// its first request. That environment is made by the task, after its
// input is recorded: the connection shows in the session's log and on its
// stream as an mcp_connect_begin / mcp_connect_end pair, followed by the
// tool list when it changed. Creating a session never connects them.

// mcpServerNames returns the names of the MCP servers req connects, in the
// order they are configured.
func mcpServerNames(req *penguinv1.CreateEnvironmentRequest) []string {
	var names []string
	for _, s := range req.GetTools().GetMcpServers() {
		names = append(names, s.GetName())
	}
	return names
}

// withoutMCP returns req without its MCP servers: what creating a session
// checks (the workspace, the sandbox, the other tools) without starting a
// server.
func withoutMCP(req *penguinv1.CreateEnvironmentRequest) *penguinv1.CreateEnvironmentRequest {
	if len(req.GetTools().GetMcpServers()) == 0 {
		return req
	}
	c := proto.Clone(req).(*penguinv1.CreateEnvironmentRequest)
	c.Tools.McpServers = nil
	return c
}

// createConnecting creates an environment for a task of the session. When
// req connects MCP servers, the wait is recorded as an mcp_connect_begin
// before it and an mcp_connect_end after it, with each server's result;
// an environment that could not be made at all fails every server with
// the reason, and a task aborted meanwhile ends the pair as aborted.
func (rt *Runtime) createConnecting(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, penguinv1.EnvironmentServiceClient, error) {
	m := rt.m
	names := mcpServerNames(req)
	if len(names) == 0 {
		return m.createEnvironment(ctx, req)
	}
	if err := rt.Emit(ctx, omni.McpConnectBegin(names)); err != nil {
		return nil, nil, err
	}
	began := time.Now()
	resp, client, err := m.createEnvironment(ctx, req)
	end := resp.GetMcp()
	switch {
	case err != nil && ctx.Err() != nil:
		end = &penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED}
	case err != nil:
		end = failedConnect(req, time.Since(began), "the environment could not be created: "+err.Error())
	case end == nil:
		end = failedConnect(req, time.Since(began), "the environment service did not report its MCP connections")
	}
	if eerr := rt.Emit(ctx, omni.McpConnectEnd(end)); eerr != nil {
		if err == nil {
			// The task stops: nothing more can be recorded, so the
			// environment would be nobody's.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_, _ = client.DisposeEnvironment(dctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
			cancel()
		}
		return nil, nil, eerr
	}
	return resp, client, err
}

// failedConnect is the end of a connection that failed for every server
// alike.
func failedConnect(req *penguinv1.CreateEnvironmentRequest, d time.Duration, why string) *penguinv1.McpConnectEnd {
	end := &penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED}
	for _, s := range req.GetTools().GetMcpServers() {
		end.Results = append(end.Results, &penguinv1.McpServerConnectResult{
			Server: s.GetName(), Transport: s.GetTransport(), Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
			DurationMs: d.Milliseconds(), Error: why,
		})
	}
	return end
}

// startTools makes the environment a task deferred to its start (see
// toolset.connect), now that its input is recorded, and records the tool
// list when it differs from the one the context last recorded. It
// reports stop with the task's result when the task cannot go on: the
// environment could not be made. An abort meanwhile is left to the loop,
// which records it.
func (rt *Runtime) startTools(t *task, p *prepared) (res loop.Result, stop bool) {
	ts := p.tools
	ts.mu.Lock()
	connect := ts.connect
	ts.mu.Unlock()
	if connect == nil {
		return loop.Result{}, false
	}
	if err := connect(t.ctx); err != nil {
		if t.ctx.Err() != nil {
			return loop.Result{}, false
		}
		return loop.Result{
			Status:  penguinv1.StopReason_STOP_REASON_FAILED,
			Message: "the session's environment could not be created: " + err.Error(),
		}, true
	}
	p.settings.Tools = ts.defs
	if !sameTools(p.rs.Tools, ts.defs) {
		if err := rt.Emit(t.ctx, omni.ToolListReady(ts.defs)); err != nil {
			return loop.Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "the session log could not be written: " + err.Error(), Err: err}, true
		}
	}
	return loop.Result{}, false
}
