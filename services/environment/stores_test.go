package environment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/checkpoint"
)

// TestCheckpointStoreKeptOpen checks that the checkpoint store of a
// workspace that a live environment works in is opened once for its
// checkpoints, not at each (seven system calls each), that a store whose
// directory was cleared meanwhile, whole or in part, is opened again and
// keeps every checkpoint's contents, and that disposing of the last
// environment closes it: no descriptor is left.
func TestCheckpointStoreKeptOpen(t *testing.T) {
	root, scratch := t.TempDir(), t.TempDir()
	s, err := New(Options{Root: root, ScratchDir: scratch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ws := filepath.Join(s.Root(), "ws")
	file := filepath.Join(ws, "a.txt")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	opens := 0
	openCheckpointStore = func(parent *os.Root, dir string) (*checkpoint.Store, error) {
		opens++
		return checkpoint.Open(parent, dir)
	}
	t.Cleanup(func() { openCheckpointStore = checkpoint.Open })
	ctx := context.Background()
	n := 0
	// take changes the file and checkpoints the workspace, as a
	// turn's start does (always a walk).
	take := func() string {
		t.Helper()
		n++
		if err := os.WriteFile(file, []byte(fmt.Sprintf("version %d\n", n)), 0o644); err != nil {
			t.Fatal(err)
		}
		resp, err := s.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetCheckpoint()
	}
	fds := openFiles(t)
	take()
	take()
	if opens != 2 || s.stores.open() != 0 {
		t.Fatalf("without an environment, two checkpoints opened the store %d times and %d stores are kept; want 2 and none", opens, s.stores.open())
	}

	env, err := s.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: ws, SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	if err != nil {
		t.Fatal(err)
	}
	opens = 0
	ids := []string{take(), take(), take()}
	if opens != 1 || s.stores.open() != 1 {
		t.Fatalf("with an environment, three checkpoints opened the store %d times and %d stores are kept; want once and one", opens, s.stores.open())
	}
	// Waited for past the racy window, the store's directory is known by
	// its stamp.
	time.Sleep(50 * time.Millisecond)
	ids = append(ids, take())
	if opens != 1 {
		t.Fatalf("a store known by its stamp was opened again (%d opens)", opens)
	}

	// Cleared from outside, in part and then whole: opened again, and
	// every checkpoint taken since has its contents.
	stores := filepath.Join(scratch, "workspace-checkpoints")
	dirs, err := os.ReadDir(stores)
	if err != nil || len(dirs) != 1 {
		t.Fatalf("the checkpoint stores: %v, %v", dirs, err)
	}
	for i, clear := range []string{filepath.Join(stores, dirs[0].Name(), "objects"), stores} {
		if err := os.RemoveAll(clear); err != nil {
			t.Fatal(err)
		}
		before := opens
		from, to := take(), take()
		if opens != before+1 {
			t.Fatalf("clear %d: the store was opened %d times after its directory was removed, want once", i, opens-before)
		}
		diff, err := s.DiffCheckpoints(ctx, &penguinv1.DiffCheckpointsRequest{Workspace: ws, From: from, To: to, WithDiff: true})
		if err != nil || len(diff.GetFiles()) != 1 || diff.GetFiles()[0].GetBinary() {
			t.Fatalf("clear %d: the diff of the checkpoints taken since: %v, %v", i, diff, err)
		}
		ids = append(ids, from, to)
	}
	if _, err := s.RestoreCheckpoint(ctx, &penguinv1.RestoreCheckpointRequest{Workspace: ws, From: ids[len(ids)-1], To: ids[len(ids)-2]}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != fmt.Sprintf("version %d\n", n-1) {
		t.Fatalf("restored: %q, %v", got, err)
	}

	if _, err := s.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env.GetEnvironmentId()}); err != nil {
		t.Fatal(err)
	}
	if s.stores.open() != 0 || len(s.stores.m) != 0 {
		t.Fatalf("after the environment's disposal, %d stores are kept open (%d workspaces held)", s.stores.open(), len(s.stores.m))
	}
	if got := openFiles(t); got != fds {
		t.Fatalf("%d descriptors open after the environment's disposal, %d before it was made", got, fds)
	}
}

// openFiles counts this process's open descriptors; -1 where they cannot
// be listed.
func openFiles(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return -1
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}
