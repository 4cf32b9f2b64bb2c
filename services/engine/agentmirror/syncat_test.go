package agentmirror_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// askCounts is an agent store that counts the times it is asked for an
// agent's version.
type askCounts struct {
	store.AgentStore
	gets atomic.Int64
}

func (c *askCounts) GetAgent(ctx context.Context, project, name string) (store.Agent, error) {
	c.gets.Add(1)
	return c.AgentStore.GetAgent(ctx, project, name)
}

// SyncAt brings a copy up to date from the version it is given, read with
// a task's row, without asking the store for it: the same version leaves
// the copy, a newer one (an edit through another replica) pulls it, zero
// (the agent deleted) removes the copy. A copy with changes of its own
// writes them and then asks, as SyncHeld does: the version given is
// older than its own write.
func TestSyncAt(t *testing.T) {
	ctx := t.Context()
	st := &askCounts{AgentStore: open(t)}
	root := t.TempDir()
	write(t, filepath.Join(root, "a", "system_config.yaml"), "max_turns: 3\n")
	m, err := agentmirror.New(st, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	dir := m.Dir(agentmirror.DefaultProject, "a")
	version := func() int64 {
		t.Helper()
		a, err := st.AgentStore.GetAgent(ctx, agentmirror.DefaultProject, "a")
		if err != nil {
			t.Fatal(err)
		}
		return a.Version
	}
	syncAt := func(v int64, asks int64) {
		t.Helper()
		before := st.gets.Load()
		if got, _, err := m.SyncAt(ctx, agentmirror.DefaultProject, "a", v); err != nil || got != dir {
			t.Fatalf("SyncAt(%d) = %q, %v; want %q", v, got, err, dir)
		}
		if n := st.gets.Load() - before; n != asks {
			t.Fatalf("SyncAt(%d) asked the store for the version %d times, want %d", v, n, asks)
		}
	}
	syncAt(version(), 0)
	syncAt(version(), 0) // a clean copy, as its last sync left it

	// An edit through another replica.
	if _, err := st.ChangeAgent(ctx, agentmirror.DefaultProject, "a", []store.AgentChange{{Path: "system_config.yaml", Data: []byte("max_turns: 7\n"), IfVersion: store.AnyVersion}}); err != nil {
		t.Fatal(err)
	}
	syncAt(version(), 0)
	if got := read(t, filepath.Join(dir, "system_config.yaml")); got != "max_turns: 7\n" {
		t.Fatalf("the copy's config after the edit: %q", got)
	}

	// A memory written in the copy, while the store's version was read
	// before the write.
	was := version()
	write(t, filepath.Join(dir, "memory", "user", "MEMORY.md"), "- fact\n")
	syncAt(was, 1)
	if _, files, err := st.ReadAgent(ctx, agentmirror.DefaultProject, "a"); err != nil || len(files) != 2 {
		t.Fatalf("the store holds %d files (%v) after the copy's write, want 2", len(files), err)
	}
	syncAt(version(), 0)
	if got := read(t, filepath.Join(dir, "memory", "user", "MEMORY.md")); got != "- fact\n" {
		t.Fatalf("the copy's memory: %q", got)
	}

	// Deleted through another replica.
	if err := st.DeleteAgent(ctx, agentmirror.DefaultProject, "a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SyncAt(ctx, agentmirror.DefaultProject, "a", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SyncAt of a deleted agent = %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted agent's copy is still there: %v", err)
	}
}
