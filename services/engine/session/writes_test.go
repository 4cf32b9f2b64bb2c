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
	"google.golang.org/grpc"
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

// PeekLease reads the row too, with the lease's presence (a task's read
// before it claims the lease).
func (c *rowCounts) PeekLease(ctx context.Context, id string, agent store.AgentRef) (*store.LeaseRead, error) {
	c.reads.Add(1)
	return c.Store.PeekLease(ctx, id, agent)
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
// session from that row, and reads the row once more only to prepare the
// task, with the session's lease (or with its claim, PeekLease); without
// the row it reads it to load the session as well.
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

// rowWrites is a store that counts the changes of session rows made on
// their own (ModifySession) and those made in a commit of the log
// (WriteSession with a row change), and of the latter those that read
// the row back (with a Modify rather than a patch alone).
type rowWrites struct {
	store.Store
	alone, withLog, readBack atomic.Int64
}

func (c *rowWrites) ModifySession(ctx context.Context, id string, f func(*store.Session) error) error {
	c.alone.Add(1)
	return c.Store.ModifySession(ctx, id, f)
}

func (c *rowWrites) WriteSession(ctx context.Context, id string, w store.SessionWrite) error {
	if w.Modify != nil || w.Patch != nil {
		c.withLog.Add(1)
	}
	if w.Modify != nil {
		c.readBack.Add(1)
	}
	return c.Store.WriteSession(ctx, id, w)
}

// The environment made at a task's first tool call is bound in the row
// by a commit of the task's log (with whatever events are queued then),
// not by a row write of its own, and it is on record before the call
// runs: a replica taking the session over after a crash finds it.
func TestEnvironmentBoundInACommitOfTheLog(t *testing.T) {
	var w *rowWrites
	r := newRig(t, func(o *session.Options) {
		w = &rowWrites{Store: o.Store}
		o.Store = w
	})
	r.llm.Generate = fake.Script(fake.NewReply().ToolCall("c1", "read_file", `{}`).Done(), fake.NewReply().Text("read").Done())
	// The first session of a spec makes its environment at once, to learn
	// the tools; the second makes one at its first tool call.
	r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	var recorded atomic.Bool
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		recorded.Store(r.rowEnvironment(t, id) == req.GetEnvironmentId())
		return fake.Echo(req, stream)
	}
	alone, withLog, readBack := w.alone.Load(), w.withLog.Load(), w.readBack.Load()
	outs, _ := r.runTask(t, id, "read a file")
	checkEchoed(t, outs, 1)
	if !recorded.Load() {
		t.Fatal("the tool call ran before the row recorded its environment")
	}
	if n := w.alone.Load() - alone; n != 0 {
		t.Fatalf("the task wrote the row on its own %d times, want 0", n)
	}
	// The prompt's (with the title), the binding's and the end's.
	if n := w.withLog.Load() - withLog; n != 3 {
		t.Fatalf("the task changed the row in %d commits of its log, want 3", n)
	}
	// Each with a patch of the columns it changes, none reading the row
	// back to write it whole.
	if n := w.readBack.Load() - readBack; n != 0 {
		t.Fatalf("the task's commits read the row back %d times, want 0", n)
	}
}
