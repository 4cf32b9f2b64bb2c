package environment

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// TestWithinAllocatesNothing checks within against the expression it
// replaced, and that it allocates nothing: it runs several times at every
// call that names a workspace.
func TestWithinAllocatesNothing(t *testing.T) {
	paths := []string{"/", "/a", "/a/", "/ab", "/a/b", "/a/b/c", "/ab/c", "/b", "/a/bc"}
	for _, p := range paths {
		for _, dir := range paths {
			p := filepath.Clean(p)
			want := p == dir || dir == "/" || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
			if got := within(p, dir); got != want {
				t.Errorf("within(%q, %q) = %v, want %v", p, dir, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		within("/srv/penguin/a-service-root-of-some-length/workspaces/ws", "/srv/penguin/a-service-root-of-some-length")
	}); n != 0 {
		t.Errorf("within allocates %.0f times", n)
	}
}

// TestCreateLeavesCommandEnvUnmade checks that CreateEnvironment does not
// make the commands' environment, which copies and sorts the service's
// own, and that a command still gets it: an environment made with a
// service environment of 2,000 variables allocates as much as one with
// 10, where the code before made a map and a sorted list of them all.
func TestCreateLeavesCommandEnvUnmade(t *testing.T) {
	allocs := map[int]float64{}
	for _, n := range []int{10, 2000} {
		env := make([]string, n)
		for i := range env {
			env[i] = fmt.Sprintf("VAR_%04d=value", i)
		}
		s, err := New(Options{Root: t.TempDir(), ScratchDir: t.TempDir(), Env: env})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		var e *Environment
		allocs[n] = testing.AllocsPerRun(20, func() {
			resp, err := s.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "ws", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
			if err != nil {
				t.Fatal(err)
			}
			e, _ = s.get(resp.GetEnvironmentId())
			if _, err := s.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()}); err != nil {
				t.Fatal(err)
			}
		})
		if got, _ := e.commandEnv(); len(got) != n+len(forcedEnv) {
			t.Errorf("the commands' environment has %d variables, want %d", len(got), n+len(forcedEnv))
		}
	}
	if allocs[2000] > allocs[10]+5 {
		t.Errorf("CreateEnvironment allocates %.0f times with 2,000 variables in the service's environment, %.0f with 10: it makes the commands' environment", allocs[2000], allocs[10])
	}
}
