package environment

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// GetEnvironmentDefaults implements EnvironmentService.GetEnvironmentDefaults: the sandbox mode
// and network an environment gets when it asks for neither, as
// sandboxPolicy applies them.
func (s *Service) GetEnvironmentDefaults(context.Context, *penguinv1.GetEnvironmentDefaultsRequest) (*penguinv1.GetEnvironmentDefaultsResponse, error) {
	p, err := s.sandboxPolicy(&penguinv1.CreateEnvironmentRequest{}, s.root)
	if err != nil {
		return nil, err
	}
	return &penguinv1.GetEnvironmentDefaultsResponse{SandboxMode: modeToProto[p.Mode], Network: networkToProto[p.Network]}, nil
}
