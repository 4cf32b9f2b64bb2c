package environment_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/services/environment"
)

// TestAdvertisedAddress checks that CreateEnvironment tells the caller
// where the new environment lives: the replica's advertised address, or
// nothing for a replica that advertises none.
func TestAdvertisedAddress(t *testing.T) {
	h := start(t, environment.Options{Advertise: "10.0.0.7:7422"})
	if got := h.create(&penguinv1.CreateEnvironmentRequest{}).GetAddress(); got != "10.0.0.7:7422" {
		t.Fatalf("address = %q, want the advertised 10.0.0.7:7422", got)
	}
	plain := start(t, environment.Options{})
	if got := plain.create(&penguinv1.CreateEnvironmentRequest{}).GetAddress(); got != "" {
		t.Fatalf("address = %q without --advertise, want empty", got)
	}
}

// TestMetrics checks the environment's own metrics: tool runs by tool and
// stop reason (a made-up tool name counted as "unknown"), environments
// held, and command sessions still running.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := start(t, environment.Options{Registerer: reg})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	h.create(&penguinv1.CreateEnvironmentRequest{})

	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo hi"}`), ok, "hi")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"exit 3"}`), failed)
	wantStop(t, h.exec(env, "no_such_tool_"+nextCallID(), `{}`), failed, "Unknown tool")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"sleep 60","run_in_background":true}`), ok, "background")

	runs := func(tool, stop string) float64 {
		return metrictest.Get(t, reg, "penguin_environment_tool_runs_total", map[string]string{"tool": tool, "stop_reason": stop})
	}
	if got := runs("exec_command", "completed"); got != 2 {
		t.Errorf("completed exec_command runs = %v, want 2", got)
	}
	if got := runs("exec_command", "failed"); got != 1 {
		t.Errorf("failed exec_command runs = %v, want 1", got)
	}
	if got := runs("unknown", "failed"); got != 1 {
		t.Errorf("runs of unknown tools = %v, want 1", got)
	}
	if got := metrictest.Get(t, reg, "penguin_environment_environments_active", nil); got != 2 {
		t.Errorf("environments_active = %v, want 2", got)
	}
	if got := metrictest.Get(t, reg, "penguin_environment_environments_created_total", nil); got != 2 {
		t.Errorf("environments_created_total = %v, want 2", got)
	}
	if got := metrictest.Get(t, reg, "penguin_environment_command_sessions_active", nil); got != 1 {
		t.Errorf("command_sessions_active = %v with one background command, want 1", got)
	}

	if _, err := h.client.DisposeEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env}); err != nil {
		t.Fatal(err)
	}
	if got := metrictest.Get(t, reg, "penguin_environment_environments_active", nil); got != 1 {
		t.Errorf("environments_active after a dispose = %v, want 1", got)
	}
	if got := metrictest.Get(t, reg, "penguin_environment_command_sessions_active", nil); got != 0 {
		t.Errorf("command_sessions_active after the dispose = %v, want 0", got)
	}
}
