package environment_test

import (
	"os"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// BenchmarkConfinementOverhead measures what confinement adds to
// exec_command: `true` through gRPC to its final output in an environment
// with sandbox none and in a confined one (workspace-write without
// network, the default), both in the same service, run in turn in every
// iteration with the order rotated. The condition is
// confined-ratio ≤ 1.10. Both sides use the shell snapshot and a
// terminal, as a model's commands do; the confined side starts its
// commands from its init's resident starter.
func BenchmarkConfinementOverhead(b *testing.B) {
	requireConfinement(b)
	h := start(b, environment.Options{Self: os.Getenv("PENGUIN_BENCH_SELF")})
	none := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE}).GetEnvironmentId()
	confined := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE}).GetEnvironmentId()
	ctx := testkit.Context(b, 10*time.Minute)
	exec := func(env string) time.Duration {
		t0 := time.Now()
		r, err := h.tryExec(ctx, env, "exec_command", `{"cmd":"true"}`)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(r.text(), "[exit code 0]") {
			b.Fatalf("output %q", r.text())
		}
		return time.Since(t0)
	}
	envs := []string{none, confined}
	for _, env := range envs {
		exec(env) // the first command of each pays for its shell snapshot
	}
	walls := make([][]time.Duration, len(envs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range envs {
			k := (i + j) % len(envs)
			walls[k] = append(walls[k], exec(envs[k]))
		}
	}
	b.StopTimer()
	pn, pc := p50(walls[0]), p50(walls[1])
	b.ReportMetric(float64(pn.Microseconds()), "none-p50-µs")
	b.ReportMetric(float64(pc.Microseconds()), "confined-p50-µs")
	b.ReportMetric(float64(pc)/float64(pn), "confined-ratio")
	b.ReportMetric(float64((pc - pn).Microseconds()), "added-p50-µs")
}
