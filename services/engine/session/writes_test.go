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

// rowWrites is a store that counts the writes of session rows.
type rowWrites struct {
	store.Store
	n atomic.Int64
}

func (w *rowWrites) UpdateSession(ctx context.Context, s *store.Session) error {
	w.n.Add(1)
	return w.Store.UpdateSession(ctx, s)
}

// A task's end saves the session's sequence mark with its row; the unload
// that follows writes nothing more, and the next load still numbers above
// everything the first task numbered.
func TestUnloadAfterATaskWritesNoRow(t *testing.T) {
	var w *rowWrites
	r := newRig(t, func(o *session.Options) {
		w = &rowWrites{Store: o.Store}
		o.Store = w
	})
	r.llm.Generate = fake.Script(fake.NewReply().Text("one").Done(), fake.NewReply().Text("two").Done())
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
	ended := w.n.Load()
	eventually.True(t, "the session unloaded", func() bool { return r.mgr.Loaded() == 0 })
	if n := w.n.Load() - ended; n != 0 {
		t.Fatalf("the unload after the task wrote the row %d times, want 0", n)
	}
	run("second")
}
