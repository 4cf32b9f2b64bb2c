// Package e2etest holds what the end-to-end test packages (e2e and
// e2e/scaleout) share: building the penguin binary once, the environment of
// the processes they start, and small client helpers. It is imported by
// tests only.
package e2etest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// GoBuild runs `go build ARGS...` in the repository root repo and reports
// the compiler's output when it fails.
func GoBuild(ctx context.Context, repo string, args ...string) error {
	return goBuild(ctx, repo, nil, args...)
}

// GoBuildShipped builds the package pkg of the repository root repo into
// out as `make build` and the releases build it: without cgo (a static
// binary) and with -trimpath; only the version stamped with -ldflags is
// left out. The benchmarks measure that binary: a cgo build is
// dynamically linked, larger, and starts otherwise.
func GoBuildShipped(ctx context.Context, repo, out, pkg string) error {
	return goBuild(ctx, repo, []string{"CGO_ENABLED=0"}, "-trimpath", "-o", out, pkg)
}

// goBuild runs `go build ARGS...` in repo with env added to the
// environment.
func goBuild(ctx context.Context, repo string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = repo
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// BaseEnv is the environment of every penguin process a test starts: the
// pinned HOME, PATH and SHELL of proctest.Env, so nothing of the host's
// profile or files is read, and JSON logs that the harnesses read the
// listening addresses from.
func BaseEnv(t testing.TB) []string {
	return proctest.Env(t, "PENGUIN_LOG_FORMAT=json", "PENGUIN_LOG_LEVEL=info", "NO_COLOR=1")
}

// DialEngine returns an engine client for addr, presenting token when it
// is not empty; the connection closes when the test ends.
func DialEngine(t testing.TB, addr, token string) penguinv1.EngineServiceClient {
	t.Helper()
	conn, err := grpcclient.New(addr, grpcclient.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return penguinv1.NewEngineServiceClient(conn)
}

// History reads a session's whole persisted history, page by page.
func History(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, id string) []*penguinv1.RunEvent {
	t.Helper()
	var out []*penguinv1.RunEvent
	var after int64
	for {
		resp, err := engine.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id, AfterSequence: after})
		if err != nil {
			t.Fatalf("GetHistory %s: %v", id, err)
		}
		out = append(out, resp.GetEvents()...)
		if n := len(resp.GetEvents()); n > 0 {
			after = resp.GetEvents()[n-1].GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			return out
		}
	}
}
