package environment_test

import (
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// GetEnvironmentDefaults reports the sandbox an environment that asks for none gets,
// as the service is configured.
func TestGetEnvironmentDefaults(t *testing.T) {
	for _, c := range []struct {
		opts    environment.Options
		mode    penguinv1.SandboxMode
		network penguinv1.NetworkAccess
	}{
		{environment.Options{DefaultSandbox: "read-only"}, penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY, penguinv1.NetworkAccess_NETWORK_ACCESS_NONE},
		{environment.Options{DefaultSandbox: "workspace-write", DefaultNetwork: "proxy"}, penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE, penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY},
		{environment.Options{DefaultSandbox: "none"}, penguinv1.SandboxMode_SANDBOX_MODE_NONE, penguinv1.NetworkAccess_NETWORK_ACCESS_HOST},
	} {
		h := start(t, c.opts)
		resp, err := h.client.GetEnvironmentDefaults(testkit.Context(t, 30*time.Second), &penguinv1.GetEnvironmentDefaultsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetSandboxMode() != c.mode || resp.GetNetwork() != c.network {
			t.Errorf("%+v: got %v %v, want %v %v", c.opts, resp.GetSandboxMode(), resp.GetNetwork(), c.mode, c.network)
		}
	}
}
