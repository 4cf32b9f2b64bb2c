package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// agentStore returns st's AgentStore, failing when it has none.
func agentStore(t *testing.T, st store.Store) store.AgentStore {
	t.Helper()
	as, ok := st.(store.AgentStore)
	if !ok {
		t.Fatalf("%T does not implement store.AgentStore", st)
	}
	return as
}

// testAgents covers creating, reading, changing (with its version
// conditions), renaming and deleting agents, and the error vocabulary.
func testAgents(t *testing.T, ctx context.Context, st store.Store) {
	as := agentStore(t, st)
	if _, err := as.CreateAgent(ctx, "", "a", nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("create with no project: %v, want ErrInvalid", err)
	}
	a, err := as.CreateAgent(ctx, "p", "a", []store.AgentFile{{Path: "system_config.yaml", Data: []byte("max_turns: 3\n")}, {Path: "empty", Data: nil}})
	if err != nil || a.Version != 1 {
		t.Fatalf("create: %+v, %v", a, err)
	}
	if _, err := as.CreateAgent(ctx, "p", "a", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	if _, err := as.CreateAgent(ctx, "q", "a", nil); err != nil {
		t.Fatalf("same name in another project: %v", err)
	}
	got, files, err := as.ReadAgent(ctx, "p", "a")
	if err != nil || got.Version != 1 || len(files) != 2 || files[0].Path != "empty" || files[0].Data == nil || string(files[1].Data) != "max_turns: 3\n" {
		t.Fatalf("read: %+v %+v %v", got, files, err)
	}
	// A change based on the current version applies; one based on an
	// older version is refused, naming the current one, and changes
	// nothing else of its call.
	a, err = as.ChangeAgent(ctx, "p", "a", []store.AgentChange{{Path: "system_config.yaml", Data: []byte("max_turns: 4\n"), IfVersion: 1}})
	if err != nil || a.Version != 2 {
		t.Fatalf("change: %+v, %v", a, err)
	}
	_, err = as.ChangeAgent(ctx, "p", "a", []store.AgentChange{
		{Path: "AGENTS.md", Data: []byte("x"), IfVersion: store.Absent},
		{Path: "system_config.yaml", Data: []byte("max_turns: 5\n"), IfVersion: 1},
	})
	var conflict *store.AgentConflict
	if !errors.Is(err, store.ErrConflict) || !errors.As(err, &conflict) || conflict.Path != "system_config.yaml" || conflict.Current != 2 {
		t.Fatalf("stale change: %v, want a conflict naming version 2", err)
	}
	if _, files, _ = as.ReadAgent(ctx, "p", "a"); len(files) != 2 {
		t.Fatalf("a refused change wrote something: %+v", files)
	}
	if _, err := as.ChangeAgent(ctx, "p", "a", []store.AgentChange{{Path: "empty", Data: []byte("y"), IfVersion: store.Absent}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over an existing file: %v, want ErrConflict", err)
	}
	a, err = as.ChangeAgent(ctx, "p", "a", []store.AgentChange{{Path: "empty", Delete: true, IfVersion: store.AnyVersion}, {Path: "AGENTS.md", Data: []byte("hi")}})
	if err != nil || a.Version != 3 {
		t.Fatalf("delete and add: %+v, %v", a, err)
	}
	if _, err := as.ChangeAgent(ctx, "p", "nope", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("change of an unknown agent: %v", err)
	}
	if _, err := as.ChangeAgent(ctx, "p", "a", []store.AgentChange{{Path: "x"}, {Path: "x"}}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("one path twice: %v", err)
	}
	if err := as.RenameAgent(ctx, "p", "a", "b"); err != nil {
		t.Fatal(err)
	}
	b, files, err := as.ReadAgent(ctx, "p", "b")
	if err != nil || b.Version != 4 || len(files) != 2 {
		t.Fatalf("renamed: %+v %+v %v", b, files, err)
	}
	if _, err := as.GetAgent(ctx, "p", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old name after rename: %v", err)
	}
	if _, err := as.CreateAgent(ctx, "p", "c", nil); err != nil {
		t.Fatal(err)
	}
	if err := as.RenameAgent(ctx, "p", "b", "c"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	list, err := as.ListAgents(ctx, "p")
	if err != nil || len(list) != 2 || list[0].Name != "b" || list[1].Name != "c" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := as.DeleteAgent(ctx, "p", "b"); err != nil {
		t.Fatal(err)
	}
	if err := as.DeleteAgent(ctx, "p", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := as.CreateAgent(ctx, "p", "b", nil); err != nil {
		t.Fatalf("recreate after delete: %v", err)
	}
	if _, files, _ := as.ReadAgent(ctx, "p", "b"); len(files) != 0 {
		t.Fatalf("a deleted agent's files outlived it: %+v", files)
	}
}

// testAgentConcurrentChanges races changes of one file based on the same
// version: exactly one wins, and the others get ErrConflict.
func testAgentConcurrentChanges(t *testing.T, ctx context.Context, st store.Store) {
	as := agentStore(t, st)
	if _, err := as.CreateAgent(ctx, "p", "a", []store.AgentFile{{Path: "f", Data: []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = as.ChangeAgent(ctx, "p", "a", []store.AgentChange{{Path: "f", Data: fmt.Appendf(nil, "%d", i+1), IfVersion: 1}})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("a losing change: %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d changes won, want 1", won)
	}
}
