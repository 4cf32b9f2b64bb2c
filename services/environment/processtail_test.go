package environment_test

import (
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// ListProcesses shows each command's last output, whether or not the
// model read it: whole lines within the bound, a progress bar's last
// state, no escape sequences.
func TestListProcessesShowsTheOutputTail(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	// 300 lines are more than the tail keeps; the first must be gone.
	cmd := `echo first line; for i in $(seq 1 300); do echo line $i; done; printf 'progress 10%%\rprogress 100%%\n\033[31mred\033[0m\n'; sleep 30`
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": cmd, "yield_time_ms": 1500}))
	wantStop(t, r, ok, "[still running as process_id ")
	procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(procs.GetProcesses()) != 1 {
		t.Fatalf("ListProcesses: %v %v", procs, err)
	}
	tail := procs.GetProcesses()[0].GetOutputTail()
	if !strings.HasSuffix(tail, "line 299\nline 300\nprogress 100%\nred") || strings.Contains(tail, "first line") ||
		!strings.HasPrefix(tail, "line ") || strings.ContainsAny(tail, "\r\x1b") || len(tail) > 2048 {
		t.Fatalf("output tail = %q", tail)
	}
	// Reading the output (input_command) does not empty the tail.
	h.exec(env, "input_command", args(map[string]any{"process_id": procs.GetProcesses()[0].GetProcessId(), "yield_time_ms": 100}))
	again, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || again.GetProcesses()[0].GetOutputTail() != tail {
		t.Fatalf("after a read, output tail = %q, %v", again.GetProcesses()[0].GetOutputTail(), err)
	}
}
