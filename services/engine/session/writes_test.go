package session_test

import (
	"context"
	"sync/atomic"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// rowCounts is a store that counts the reads and the writes of session
// rows.
type rowCounts struct {
	store.Store
	reads, writes atomic.Int64
}

func (c *rowCounts) GetSession(ctx context.Context, id string) (*store.Session, error) {
	c.reads.Add(1)
	return c.Store.GetSession(ctx, id)
}

func (c *rowCounts) UpdateSession(ctx context.Context, s *store.Session) error {
	c.writes.Add(1)
	return c.Store.UpdateSession(ctx, s)
}

// countingRig is a rig whose store counts row reads and writes, with a
// model that answers two prompts.
func countingRig(t *testing.T) (*rig, *rowCounts) {
	t.Helper()
	var c *rowCounts
	r := newRig(t, func(o *session.Options) {
		c = &rowCounts{Store: o.Store}
		o.Store = c
	})
	r.llm.Generate = fake.Script(fake.NewReply().Text("one").Done(), fake.NewReply().Text("two").Done())
	return r, c
}

// A task's end saves the session's sequence mark with its row; the unload
// that follows writes nothing more, and the next load still numbers above
// everything the first task numbered.
func TestUnloadAfterATaskWritesNoRow(t *testing.T) {
	r, w := countingRig(t)
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	var last int64
	run := func(prompt string) {
		t.Helper()
		err := r.mgr.Run(t.Context(), id, session.RunSpec{Prompt: prompt}, func(ev *penguinv1.RunEvent) error {
			if ev.GetSequence() <= last {
				t.Errorf("event numbered %d after %d", ev.GetSequence(), last)
			}
			last = ev.GetSequence()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	run("first")
	ended := w.writes.Load()
	eventually.True(t, "the session unloaded", func() bool { return r.mgr.Loaded() == 0 })
	if n := w.writes.Load() - ended; n != 0 {
		t.Fatalf("the unload after the task wrote the row %d times, want 0", n)
	}
	run("second")
}

// A Run given the row its caller just read (to authorize it) loads the
// session from that row, and reads the row once more only when it holds
// the session's lease, to prepare the task; without the row it reads it
// to load the session as well.
func TestRunLoadsFromTheRowItIsGiven(t *testing.T) {
	r, reads := countingRig(t)
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	for _, given := range []bool{true, false} {
		eventually.True(t, "the session unloaded", func() bool { return r.mgr.Loaded() == 0 })
		spec := session.RunSpec{Prompt: "go"}
		if given {
			row, err := reads.Store.GetSession(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			spec.Row = row
		}
		before := reads.reads.Load()
		if err := r.mgr.Run(t.Context(), id, spec, func(*penguinv1.RunEvent) error { return nil }); err != nil {
			t.Fatal(err)
		}
		want := int64(2)
		if given {
			want = 1
		}
		if n := reads.reads.Load() - before; n != want {
			t.Fatalf("a Run (row given: %v) read the row %d times, want %d", given, n, want)
		}
	}
}
