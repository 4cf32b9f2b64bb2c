package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/services/engine/session"
)

// With the real environment service: environments_active returns to 0
// once the sessions have been idle for the timeout, and a session's next
// tool call gets a fresh environment in the same workspace, where the
// files the old one wrote still are.
func TestIdleEnvironmentsReturnToZero(t *testing.T) {
	const sessions = 3
	var turns []emulator.Turn
	for i := range sessions {
		turns = append(turns,
			emulator.Turn{ToolCalls: []emulator.ToolCall{{Name: "exec_command", Arguments: `{"cmd":"echo kept-` + string(rune('a'+i)) + ` > kept-` + string(rune('a'+i)) + `.txt; echo written"}`}}},
			emulator.Turn{Text: "written"})
	}
	turns = append(turns,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{Name: "exec_command", Arguments: `{"cmd":"cat kept-a.txt"}`}}},
		emulator.Turn{Text: "read"})
	s := newRealStackWith(t, func(o *session.Options) { o.EnvironmentIdleTimeout = 50 * time.Millisecond }, turns...)
	active := func() float64 {
		return metrictest.Get(t, s.envMetrics, "penguin_environment_environments_active", nil)
	}
	var ids []string
	for range sessions {
		id := s.create(t, allowAll)
		ids = append(ids, id)
		outs := toolOutputs(s.run(t, id, "write a file"))
		if len(outs) != 1 || !strings.Contains(outs[0], "written") {
			t.Fatalf("tool outputs %q", outs)
		}
	}
	if n := active(); n == 0 {
		t.Fatal("no environment active right after the tasks")
	}
	eventually.True(t, "environments_active back at 0", func() bool { return active() == 0 })
	for i := range sessions {
		if _, err := os.Stat(filepath.Join(s.root, "ws", "kept-"+string(rune('a'+i))+".txt")); err != nil {
			t.Fatalf("the workspace lost a file with its environment: %v", err)
		}
	}
	outs := toolOutputs(s.run(t, ids[0], "read it back"))
	if len(outs) != 1 || !strings.Contains(outs[0], "kept-a") {
		t.Fatalf("the fresh environment's tool outputs %q, want the file the old one wrote", outs)
	}
	eventually.True(t, "environments_active back at 0 after the next task", func() bool { return active() == 0 })
	// One environment per task at least; the first session's, made when
	// it was created, may have gone before its task began. The engine
	// counts a disposal once the environment service has answered, a
	// moment after that service's own gauge went down.
	eventually.True(t, fmt.Sprintf("environments_idle_disposed_total at least %d", sessions+1), func() bool {
		return metrictest.Get(t, s.metrics, "penguin_engine_environments_idle_disposed_total", nil) >= sessions+1
	})
}

// toolOutputs returns the texts of a task's tool outputs.
func toolOutputs(evs []*penguinv1.RunEvent) []string {
	var out []string
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o != nil {
			out = append(out, o.GetOutput())
		}
	}
	return out
}
