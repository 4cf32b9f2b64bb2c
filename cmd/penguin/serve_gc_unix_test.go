//go:build unix

package main

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// TestServeCollectsNothingBeforeReady starts `penguin serve` on a new
// home with the runtime's trace of its collections (GODEBUG=gctrace=1)
// and checks that no collection ran before the server logged itself
// ready: a server's start-up allocates more than the 4 MiB at which the
// runtime would first collect, and the collection's page faults are
// paid in its cold start (resident.HoldCollection, docs/performance.md).
func TestServeCollectsNothingBeforeReady(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, binary, "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--home", filepath.Join(dir, "home"), "--root", dir)
	cmd.Env = proctest.Env(t, "GODEBUG=gctrace=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var before []string
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		line := lines.Text()
		if strings.Contains(line, "penguin listening") {
			if len(before) > 0 {
				t.Errorf("the server collected before it was ready:\n%s", strings.Join(before, "\n"))
			}
			return
		}
		if strings.HasPrefix(line, "gc ") {
			before = append(before, line)
		}
	}
	t.Fatalf("the server ended before it was ready (%v); collections: %q", lines.Err(), before)
}
