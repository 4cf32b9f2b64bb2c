package session

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// describeWorkspace returns the workspace's absolute path as the
// environment resolves it (empty when it does not exist yet) and its
// AGENTS.md files, from its project root down to it, read through the
// environment service: the workspace lives on the environment's hosts, not
// necessarily on the engine's. The read needs no environment, so it costs
// a session nothing it would not otherwise have (and a session created
// before its environment still learns its workspace's real path).
//
// A workspace that does not exist yet has none (the environment creates
// it empty). An environment service too old to have the call is logged
// and the session goes on without them, so an engine upgraded first does
// not refuse every session; any other failure fails the session's
// creation, because its system prompt is fixed from then on and would
// silently lack the workspace's rules.
func (m *Manager) describeWorkspace(ctx context.Context, workspace string) (string, []*penguinv1.InstructionFile, error) {
	// Like CreateEnvironment, the read waits for a reconnecting
	// connection rather than failing the session for a blip.
	ctx, cancel := readyWait(ctx)
	defer cancel()
	resp, err := m.opts.Environment.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: workspace}, grpc.WaitForReady(true))
	switch status.Code(err) {
	case codes.OK:
		return resp.GetWorkspace(), resp.GetAgentsFiles(), nil
	case codes.NotFound:
		return "", nil, nil
	case codes.Unimplemented:
		m.log.Warn("the environment service cannot describe workspaces (an older version); the session's prompt has no workspace AGENTS.md", "workspace", workspace)
		return "", nil, nil
	}
	return "", nil, downstream("read the workspace's AGENTS.md files", err)
}
