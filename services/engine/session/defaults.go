package session

import (
	"context"

	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/attach"
	"github.com/penguin-agent/penguin/services/engine/approval"
)

// Defaults returns what a new session gets when its creator leaves it
// unsaid: the sandbox the environment service applies (asked of it, since
// it alone knows what its host can enforce) and the approval mode a
// client with a person at it offers first.
func (m *Manager) Defaults(ctx context.Context) (*penguinv1.GetSessionDefaultsResponse, error) {
	ctx, cancel := readyWait(ctx)
	defer cancel()
	env, err := m.opts.Environment.GetEnvironmentDefaults(ctx, &penguinv1.GetEnvironmentDefaultsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return &penguinv1.GetSessionDefaultsResponse{
		SandboxMode: env.GetSandboxMode(), Network: env.GetNetwork(), InteractiveApprovalMode: approval.InteractiveMode,
		Attachments: attach.Limits(),
	}, nil
}
