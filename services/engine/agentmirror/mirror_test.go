package agentmirror_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/store"
)

func open(t *testing.T) store.AgentStore {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.(store.AgentStore)
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTwoCopies syncs two working copies of one store's agent, as two
// replicas do: an edit through the store, a memory file written in one
// copy, a file deleted in one copy, and an edit that loses to a newer one.
func TestTwoCopies(t *testing.T) {
	ctx := t.Context()
	st := open(t)
	rootA, rootB := t.TempDir(), t.TempDir()
	write(t, filepath.Join(rootA, "default", "system_config.yaml"), "max_turns: 3\n")
	write(t, filepath.Join(rootA, "default", "memory", "user", "MEMORY.md"), "- old\n")
	write(t, filepath.Join(rootA, "scratch", "notes.txt"), "not an agent\n")
	a, err := agentmirror.New(st, rootA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.ListAgents(ctx, agentmirror.DefaultProject); len(list) != 1 || list[0].Name != "default" {
		t.Fatalf("adopted %+v, want the one directory with a system_config.yaml", list)
	}
	b, err := agentmirror.New(st, rootB, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirB, err := b.Sync(ctx, "default", "default")
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dirB, "memory", "user", "MEMORY.md")); got != "- old\n" {
		t.Fatalf("B's copy: %q", got)
	}
	// A model on A saves a memory and deletes the old index line's file.
	dirA := a.Dir("default", "default")
	write(t, filepath.Join(dirA, "memory", "user", "topic.md"), "---\nname: t\n---\nfact\n")
	if err := os.Remove(filepath.Join(dirA, "memory", "user", "MEMORY.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sync(ctx, "default", "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync(ctx, "default", "default"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dirB, "memory", "user", "topic.md")); got != "---\nname: t\n---\nfact\n" {
		t.Fatalf("B's memory: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dirB, "memory", "user", "MEMORY.md")); !os.IsNotExist(err) {
		t.Fatalf("a file deleted on A is still on B: %v", err)
	}
	// B edits the config by hand while the store gets a newer one: the
	// store's wins on B.
	_, files, _ := st.ReadAgent(ctx, "default", "default")
	var cfgVersion int64
	for _, f := range files {
		if f.Path == "system_config.yaml" {
			cfgVersion = f.Version
		}
	}
	if _, err := st.ChangeAgent(ctx, "default", "default", []store.AgentChange{{Path: "system_config.yaml", Data: []byte("max_turns: 9\n"), IfVersion: cfgVersion}}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dirB, "system_config.yaml"), "max_turns: 5\n")
	if _, err := b.Sync(ctx, "default", "default"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dirB, "system_config.yaml")); got != "max_turns: 9\n" {
		t.Fatalf("B's config after losing: %q", got)
	}
	if _, err := a.Sync(ctx, "default", "default"); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dirA, "system_config.yaml")); got != "max_turns: 9\n" {
		t.Fatalf("A's config: %q", got)
	}
	// Deleted through the store: a copy goes at its next sync.
	if err := st.DeleteAgent(ctx, "default", "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Sync(ctx, "default", "default"); err == nil {
		t.Fatal("sync of a deleted agent succeeded")
	}
	if _, err := os.Stat(dirA); !os.IsNotExist(err) {
		t.Fatalf("the deleted agent's copy is still there: %v", err)
	}
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	m, err := agentmirror.New(open(t), root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"reviewer":               "default/reviewer",
		filepath.Join(root, "x"): "default/x",
		filepath.Join(root, ".projects", "p", "y"): "p/y",
		filepath.Join(root, "x", "sub"):            "",
		"/elsewhere/agent":                         "",
		"../up":                                    "",
	} {
		p, a, ok := m.Resolve(ref)
		got := ""
		if ok {
			got = p + "/" + a
		}
		if got != want {
			t.Errorf("Resolve(%q) = %q, want %q", ref, got, want)
		}
	}
}
