package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/services/engine"
)

// TestSetupRefusesNegativeDurations checks that a negative log linger or
// environment idle timeout is refused before anything opens, naming the
// setting and a value that would do.
func TestSetupRefusesNegativeDurations(t *testing.T) {
	// A client that never connects: Setup must refuse before any call.
	idle, err := grpc.NewClient("passthrough:///127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idle.Close() })
	base := func() engine.Config {
		return engine.Config{
			StoreURL: "sqlite:" + t.TempDir() + "/s.db", AgentState: t.TempDir(), Advertise: "127.0.0.1:1",
			LLM: idle, Environment: idle,
			Dial: func(string) (grpcclient.Conn, error) { return nil, nil },
		}
	}
	for _, c := range []struct {
		set  func(*engine.Config)
		want string
	}{
		{func(c *engine.Config) { c.LogLinger = -time.Millisecond }, "log linger -1ms is negative"},
		{func(c *engine.Config) { c.EnvironmentIdleTimeout = -time.Minute }, "environment idle timeout -1m0s is negative"},
	} {
		cfg := base()
		c.set(&cfg)
		_, err := engine.Setup(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Setup: %v, want an error containing %q", err, c.want)
		}
	}
}
