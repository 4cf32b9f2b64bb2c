package engine_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// heldLog is a store whose first read of one session's log, once armed,
// waits until the test lets it go: the engine's look at a cut-off run of
// that session (which reads the log to rebuild the run) then lasts as
// long as the test needs.
type heldLog struct {
	store.Store
	session string
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	let     func() // closes release, once
}

func newHeldLog() *heldLog {
	h := &heldLog{entered: make(chan struct{}), release: make(chan struct{})}
	h.let = sync.OnceFunc(func() { close(h.release) })
	return h
}

// option wraps the manager's store.
func (h *heldLog) option(o *session.Options) { h.Store, o.Store = o.Store, h }

// arm holds the next read of session's log.
func (h *heldLog) arm(session string) {
	h.session = session
	h.armed.Store(true)
}

func (h *heldLog) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	// armed is read first: it orders the read of session after arm.
	if h.armed.Load() && id == h.session && h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Store.ReadEvents(ctx, id, after, limit)
}

// look starts the engine's look for cut-off runs and returns once the
// look at the session's run is reading its log. The read goes on at the
// latest when the test ends, before the engine stops: a failed test does
// not hold the stop.
func (h *heldLog) look(t *testing.T, e *env, id string) {
	t.Helper()
	t.Cleanup(h.let)
	h.arm(id)
	e.mgr.StartResuming()
	ctx := e.ctx()
	select {
	case <-h.entered:
	case <-ctx.Done():
		t.Fatal("the engine never looked at the cut-off run")
	}
}

// A Run while the engine looks at a run a crash cut off waits for the look
// (up to the caller's deadline) instead of being refused as busy, and
// starts once the look has let the session go.
func TestRunWaitsForTheLookAtACutOffRun(t *testing.T) {
	held := newHeldLog()
	e := newEnv(t, held.option)
	// Not durable: the look finds nothing to resume and lets go.
	writeConfig(t, e.agentDir, testConfig+"durable_tasks: false\n")
	e.llm.Generate = fake.Script(fake.NewReply().Text("done").Done())
	id := e.create(allowAll)
	// The run looks cut off: the lease of an engine that is gone, expired.
	ctx := e.ctx()
	if ok, err := e.store.AcquireLease(ctx, id, "engine-gone", "", time.Millisecond); err != nil || !ok {
		t.Fatalf("planting the lease of a dead engine: %v, %v", ok, err)
	}
	eventually.True(t, "the dead engine's lease to expire", func() bool {
		ids, err := e.store.StaleLeases(ctx, "nobody")
		return err == nil && slices.Contains(ids, id)
	})
	held.look(t, e, id)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := runErr(short, e, id); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a Run during the look ended with %v, want it to wait until its deadline", err)
	}

	type result struct {
		evs []*penguinv1.RunEvent
		err error
	}
	done := make(chan result, 1)
	go func() {
		evs, err := runErr(ctx, e, id)
		done <- result{evs, err}
	}()
	held.let()
	r := <-done
	if r.err != nil {
		t.Fatalf("the Run that waited for the look: %v", r.err)
	}
	if st := end(t, r.evs); st.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the Run that waited for the look ended %v", st)
	}
}

// A Run that waited while the engine looked at a cut-off run that it then
// resumes is refused as busy: the session runs the resumed task.
func TestRunAfterTheLookResumedTheRunIsBusy(t *testing.T) {
	e := newEnv(t)
	id := e.create(allowAll)
	// The resumed task stays in its request until the engine stops.
	blockedRun(t, e, id, fake.NewReply().PartialOnly("still at it").Hook(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	e.stop()
	held := newHeldLog()
	e.start(held.option)
	held.look(t, e, id)
	ctx := e.ctx()
	done := make(chan error, 1)
	go func() {
		_, err := runErr(ctx, e, id)
		done <- err
	}()
	held.let()
	if err := <-done; status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a Run while the resumed task runs ended with %v, want FAILED_PRECONDITION (busy)", err)
	}
	r, err := e.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil || r.GetSession().GetState() != penguinv1.SessionState_SESSION_STATE_RUNNING {
		t.Fatalf("the session after the look: %v, %v; want the resumed task running", r.GetSession().GetState(), err)
	}
}

// runErr runs a prompt and returns its events and how the stream ended.
func runErr(ctx context.Context, e *env, id string) ([]*penguinv1.RunEvent, error) {
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "next"})
	if err != nil {
		return nil, err
	}
	return enginetest.Collect(stream)
}
