package engine_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/eventually"
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
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var leaked []string
	_ = eventually.Wait(ctx, func() bool {
		buf := make([]byte, 1<<22)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if ownGoroutine(g) {
				leaked = append(leaked, g)
			}
		}
		return len(leaked) == 0
	})
	return strings.Join(leaked, "\n\n")
}

// ownPackages are the engine's packages that start goroutines of their
// own.
var ownPackages = []string{"session", "loop", "journal", "lease", "envwatch", "enginetool/subagent"}

// ownGoroutine reports whether the stack g runs code of the engine's own
// packages.
func ownGoroutine(g string) bool {
	for _, p := range ownPackages {
		if strings.Contains(g, "penguin/services/engine/"+p+".") {
			return true
		}
	}
	return false
}
