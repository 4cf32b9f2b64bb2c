package engine_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when goroutines of the engine's own packages
// outlive the tests: every task, writer, watcher and follower must end.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := engineGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of the engine outlived the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// engineGoroutines waits up to d for the engine's goroutines to end and
// returns the stacks of those still running.
func engineGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "penguin/services/engine/session.") || strings.Contains(g, "penguin/services/engine/loop.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
