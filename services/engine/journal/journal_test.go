package journal_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/journal"
	"github.com/penguin-agent/penguin/services/engine/live"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// gatedStore is a real SQLite store whose appends can be held at a gate
// or made to fail, and are counted.
type gatedStore struct {
	store.Store
	mu      sync.Mutex
	gate    chan struct{} // nil: appends pass
	entered chan struct{} // receives when an append reaches the gate
	fail    error
	appends int
}

func (g *gatedStore) AppendEvents(ctx context.Context, id string, events ...store.Event) error {
	if err := g.pass(); err != nil {
		return err
	}
	return g.Store.AppendEvents(ctx, id, events...)
}

func (g *gatedStore) WriteSession(ctx context.Context, id string, w store.SessionWrite) error {
	if err := g.pass(); err != nil {
		return err
	}
	return g.Store.WriteSession(ctx, id, w)
}

// pass counts a write, holds it at the gate, and returns the failure to
// report, if any.
func (g *gatedStore) pass() error {
	g.mu.Lock()
	gate, fail := g.gate, g.fail
	g.appends++
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	return fail
}

type rig struct {
	st  *gatedStore
	buf *live.Buffer
	j   *journal.Journal
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newLingeringRig(t, 0)
}

// newLingeringRig is newRig with events that are no durability point held
// back for up to linger.
func newLingeringRig(t *testing.T, linger time.Duration) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.CreateSession(ctx, &store.Session{ID: "s"}); err != nil {
		t.Fatal(err)
	}
	r := &rig{st: &gatedStore{Store: st, entered: make(chan struct{}, 16)}, buf: live.New(0, 0, 0)}
	r.j = journal.New(journal.Options{Store: r.st, Session: "s", Next: 1, Buffer: r.buf, Linger: linger, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = r.j.Flush() })
	return r
}

func msg(text string) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: omni.AssistantText(text)}}
}

func state(s penguinv1.SessionState) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: s}}}
}

func (r *rig) publish(t *testing.T, ev *penguinv1.RunEvent, persist bool) int64 {
	t.Helper()
	seq, err := r.j.Publish(ev, persist)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func (r *rig) buffered(t *testing.T) []int64 {
	t.Helper()
	evs, _, err := r.buf.Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, ev := range evs {
		seqs = append(seqs, ev.GetSequence())
	}
	return seqs
}

func (r *rig) logged(t *testing.T) []int64 {
	t.Helper()
	evs, err := r.st.ReadEvents(context.Background(), "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range evs {
		seqs = append(seqs, e.Sequence)
	}
	return seqs
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every event gets the next number; the live buffer sees all of them in
// order, the log only those that belong there.
func TestNumbersRecordsAndPublishesInOrder(t *testing.T) {
	r := newRig(t)
	for i, ev := range []*penguinv1.RunEvent{msg("a"), state(penguinv1.SessionState_SESSION_STATE_RUNNING), msg("b")} {
		if seq := r.publish(t, ev, ev.GetMessage() != nil); seq != int64(i+1) {
			t.Fatalf("event %d numbered %d", i, seq)
		}
	}
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.buffered(t); !equal(got, []int64{1, 2, 3}) {
		t.Fatalf("buffer holds %v", got)
	}
	if got := r.logged(t); !equal(got, []int64{1, 3}) {
		t.Fatalf("log holds %v", got)
	}
	if r.j.Last() != 3 || r.j.LastPersisted() != 3 || r.j.Pending() {
		t.Fatalf("Last %d, LastPersisted %d, Pending %v", r.j.Last(), r.j.LastPersisted(), r.j.Pending())
	}
}

// Nothing is seen before it is recorded, and what queues up during a slow
// write goes to the log in one append.
func TestNothingIsSeenBeforeItIsRecorded(t *testing.T) {
	r := newRig(t)
	gate := make(chan struct{})
	r.st.mu.Lock()
	r.st.gate = gate
	r.st.mu.Unlock()
	r.publish(t, msg("first"), true)
	<-r.st.entered // the writer holds the first event at the store
	for _, s := range []string{"second", "third", "fourth"} {
		r.publish(t, msg(s), true)
	}
	if got := r.buffered(t); len(got) != 0 {
		t.Fatalf("events %v were published before they were recorded", got)
	}
	if !r.j.Pending() {
		t.Fatal("Pending is false with four events queued")
	}
	r.st.mu.Lock()
	r.st.gate = nil
	r.st.mu.Unlock()
	close(gate)
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.buffered(t); !equal(got, []int64{1, 2, 3, 4}) {
		t.Fatalf("buffer holds %v", got)
	}
	if r.st.appends != 2 {
		t.Fatalf("%d appends for two rounds, want 2 (the events queued during the first write go together)", r.st.appends)
	}
}

// A failed write publishes nothing of its batch and refuses what follows,
// until Reset.
func TestAFailedWriteStopsTheJournal(t *testing.T) {
	r := newRig(t)
	r.publish(t, msg("kept"), true)
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	cut := r.failARound(t)
	if _, err := r.j.Publish(msg("after"), true); !errors.Is(err, cut) {
		t.Fatalf("Publish after the failure = %v, want the log's error", err)
	}
	if got := r.buffered(t); !equal(got, []int64{1}) {
		t.Fatalf("buffer holds %v, want only the recorded event", got)
	}
	r.failWith(nil)
	r.j.Reset()
	seq := r.publish(t, msg("again"), true)
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.logged(t); !equal(got, []int64{1, seq}) || seq != 3 {
		t.Fatalf("log after Reset holds %v (new event %d)", got, seq)
	}
}

// AnnounceWith queues its announcement and event next to each other, and
// after a failed write still queues the announcement (a state change goes
// out whatever the log) but refuses the event.
func TestAnnounceWithKeepsThePairAndRefusesAfterAFailure(t *testing.T) {
	r := newRig(t)
	r.publish(t, msg("before"), true)
	question := &penguinv1.RunEvent{Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{}}}
	seq, err := r.j.AnnounceWith(state(penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL), question)
	if err != nil || seq != 3 {
		t.Fatalf("AnnounceWith = %d, %v; want the question numbered 3, right behind its announcement", seq, err)
	}
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	cut := r.failARound(t)
	if _, err := r.j.AnnounceWith(state(penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL), question); !errors.Is(err, cut) {
		t.Fatalf("AnnounceWith after the failure = %v, want the log's error", err)
	}
	eventually.True(t, "the announcement published after the failure", func() bool { return equal(r.buffered(t), []int64{1, 2, 3, 5}) })
}

func event(m *penguinv1.OmniMessage) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: m}}
}

// failWith has the store fail every append with err from now on (nil:
// none).
func (r *rig) failWith(err error) {
	r.st.mu.Lock()
	r.st.fail = err
	r.st.mu.Unlock()
}

// failARound has the store fail, publishes an event to be recorded and
// checks that Flush returns the store's error, which it returns.
func (r *rig) failARound(t *testing.T) error {
	t.Helper()
	cut := errors.New("connection cut")
	r.failWith(cut)
	r.publish(t, msg("lost"), true)
	if err := r.j.Flush(); !errors.Is(err, cut) {
		t.Fatalf("Flush = %v, want the store's error", err)
	}
	return cut
}

// appendCount reads how many appends the store was asked for.
func (r *rig) appendCount() int {
	r.st.mu.Lock()
	defer r.st.mu.Unlock()
	return r.st.appends
}

// A model request's events wait for the next durability point (here the
// tool's output that follows them) and go to the log with it in one
// append; nothing of them is seen before. A state change is a durability
// point too.
func TestEventsWaitForADurabilityPoint(t *testing.T) {
	r := newLingeringRig(t, time.Minute)
	r.publish(t, event(omni.UserText("read hello.txt")), true)
	r.publish(t, event(omni.RequestBegin()), true)
	r.publish(t, msg("partial"), false)
	r.publish(t, event(omni.AssistantText("it says hello")), true)
	r.publish(t, event(omni.RequestEnd(penguinv1.StopReason_STOP_REASON_COMPLETED, "", 0, 0)), true)
	r.publish(t, event(omni.ApprovalDecision("call-1", penguinv1.Decision_DECISION_ALLOW)), true)
	// The writer holds all six, waiting for a durability point.
	time.Sleep(50 * time.Millisecond)
	if got := r.buffered(t); len(got) != 0 || r.appendCount() != 0 {
		t.Fatalf("before the durability point: published %v, %d appends", got, r.appendCount())
	}
	r.publish(t, event(omni.ToolCallOutput("call-1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED)), true)
	eventually.True(t, "the request's events published", func() bool { return len(r.buffered(t)) == 7 })
	if got := r.logged(t); !equal(got, []int64{1, 2, 4, 5, 6, 7}) {
		t.Fatalf("log holds %v", got)
	}
	if n := r.appendCount(); n != 1 {
		t.Fatalf("%d appends for a model request and its tool's output, want 1", n)
	}
	r.publish(t, event(omni.UserText("steer")), true)
	r.j.Announce(state(penguinv1.SessionState_SESSION_STATE_IDLE))
	eventually.True(t, "the state change published", func() bool { return len(r.buffered(t)) == 9 })
	if n := r.appendCount(); n != 2 {
		t.Fatalf("%d appends, want 2", n)
	}
}

// An event with no durability point after it is recorded once the linger
// is over, and at once on Flush.
func TestLingerIsBounded(t *testing.T) {
	r := newLingeringRig(t, 20*time.Millisecond)
	r.publish(t, event(omni.UserText("alone")), true)
	eventually.True(t, "the lone event published after the linger", func() bool { return len(r.buffered(t)) == 1 })

	r = newLingeringRig(t, time.Minute)
	r.publish(t, event(omni.UserText("flushed")), true)
	done := make(chan error, 1)
	go func() { done <- r.j.Flush() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush waited for the linger of a minute")
	}
	if got := r.logged(t); !equal(got, []int64{1}) {
		t.Fatalf("log after Flush holds %v", got)
	}
}

// FlushWith commits the queued events, the row change and the lease's
// release in one transaction; after a failure of the log it writes
// nothing and returns the failure.
func TestFlushWithIsOneCommit(t *testing.T) {
	// A linger holds the events (none is a durability point) until the
	// FlushWith, so that they are queued when it comes.
	r := newLingeringRig(t, time.Minute)
	ctx := t.Context()
	if ok, err := r.st.AcquireLease(ctx, "s", "me", "addr", time.Minute); err != nil || !ok {
		t.Fatalf("AcquireLease: %v, %v", ok, err)
	}
	commits := r.st.Store.(store.CommitCounter).Commits()
	for _, text := range []string{"first", "second", "third"} {
		r.publish(t, msg(text), true)
	}
	if got := r.buffered(t); len(got) != 0 || r.appendCount() != 0 {
		t.Fatalf("before FlushWith: published %v, %d appends", got, r.appendCount())
	}
	var sawLast int64
	err := r.j.FlushWith(store.SessionWrite{Modify: func(s *store.Session) error {
		sawLast, s.Title = s.LastSequence, "ended"
		return nil
	}, ReleaseLease: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.st.Store.(store.CommitCounter).Commits() - commits; n != 1 {
		t.Fatalf("%d commits for three events, the row and the lease, want 1", n)
	}
	if got := r.logged(t); !equal(got, []int64{1, 2, 3}) || sawLast != 3 {
		t.Fatalf("log holds %v; the row change saw last sequence %d, want 3", got, sawLast)
	}
	if row, err := r.st.GetSession(ctx, "s"); err != nil || row.Title != "ended" {
		t.Fatalf("row after FlushWith: %+v, %v", row, err)
	}
	if _, _, _, err := r.st.LeaseHolder(ctx, "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lease after FlushWith released it: %v, want ErrNotFound", err)
	}
	if got := r.buffered(t); !equal(got, []int64{1, 2, 3}) {
		t.Fatalf("buffer holds %v", got)
	}

	cut := r.failARound(t)
	r.failWith(nil)
	called := false
	err = r.j.FlushWith(store.SessionWrite{Modify: func(*store.Session) error { called = true; return nil }})
	if !errors.Is(err, cut) || called {
		t.Fatalf("FlushWith after a failure = %v (row changed: %v), want the failure and no write", err, called)
	}
}

// A reader that has seen the last queued event in the live buffer finds
// nothing pending any more, however late the writer is to go idle after
// it: nothing wakes a reader of the buffer once the last event is there,
// so a reader that saw it and still found the journal pending would wait
// for ever. That is how a stream following a task until it is idle (Attach
// until_idle) hung right after the task's idle event under load.
func TestNothingIsPendingOnceTheLastEventIsSeen(t *testing.T) {
	r := newRig(t)
	defer journal.DelayAfterPublish(50 * time.Millisecond)()
	var cursor int64
	for i := range 3 {
		r.publish(t, msg("an answer"), true)
		last := r.j.Announce(state(penguinv1.SessionState_SESSION_STATE_IDLE))
		for cursor < last {
			evs, wake, err := r.buf.Read(cursor, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				<-wake
				continue
			}
			cursor = evs[len(evs)-1].GetSequence()
		}
		if r.j.Pending() {
			t.Fatalf("round %d: the journal is pending after its last event %d was published", i, last)
		}
	}
}

// A reader that found the journal pending and waits on the live buffer is
// woken when the journal stops being pending, even by a round that
// published nothing: a row written on its own, or a batch dropped because
// the log failed. Without that wake a stream following a task until it is
// idle would wait for ever after a task whose end published no event.
func TestReadersAreWokenWhenNothingIsPendingAnyMore(t *testing.T) {
	for _, c := range []struct {
		name  string
		fail  error
		write func(r *rig) error
	}{
		{"a row written on its own", nil, func(r *rig) error {
			return r.j.FlushWith(store.SessionWrite{Modify: func(s *store.Session) error { s.Title = "row only"; return nil }})
		}},
		{"a batch dropped by a failed log", errors.New("connection cut"), func(r *rig) error {
			if _, err := r.j.Publish(msg("lost"), true); err != nil {
				return err
			}
			return r.j.Flush()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			gate := make(chan struct{})
			r.st.mu.Lock()
			r.st.gate, r.st.fail = gate, c.fail
			r.st.mu.Unlock()
			done := make(chan error, 1)
			go func() { done <- c.write(r) }()
			<-r.st.entered // the writer holds the round at the store
			evs, wake, err := r.buf.Read(0, 0)
			if err != nil || len(evs) != 0 {
				t.Fatalf("buffer before the write: %v, %v", evs, err)
			}
			if !r.j.Pending() {
				t.Fatal("Pending is false while the writer holds a round")
			}
			close(gate)
			select {
			case <-wake:
			case <-time.After(10 * time.Second):
				t.Fatal("a reader waiting on the buffer was not woken when the journal stopped being pending")
			}
			if err := <-done; !errors.Is(err, c.fail) {
				t.Fatalf("write = %v, want %v", err, c.fail)
			}
			if r.j.Pending() {
				t.Fatal("the journal is pending after its round")
			}
			if got := r.buffered(t); len(got) != 0 {
				t.Fatalf("buffer holds %v, want nothing", got)
			}
		})
	}
}

// FlushWith returns once its own commit is made and published, without
// waiting for events queued after it: a task that records its
// environment's binding before a tool call runs is not held up by a
// parallel tool's output still being written.
func TestFlushWithDoesNotWaitForLaterEvents(t *testing.T) {
	r := newRig(t)
	gate := make(chan struct{})
	r.st.mu.Lock()
	r.st.gate = gate
	r.st.mu.Unlock()
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release) // before the rig's Flush
	first := r.publish(t, msg("before"), true)
	<-r.st.entered // the writer holds the first event's round at the store
	done := make(chan error, 1)
	go func() {
		done <- r.j.FlushWith(store.SessionWrite{Modify: func(s *store.Session) error { s.Title = "bound"; return nil }})
	}()
	eventually.True(t, "FlushWith waits", func() bool { return r.j.Pending() })
	gate <- struct{}{} // the first round goes on
	<-r.st.entered     // the FlushWith's round reaches the store
	later := r.publish(t, msg("after"), true)
	gate <- struct{}{} // the FlushWith's round goes on
	<-r.st.entered     // the later event's round reaches the store, and stays
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FlushWith waited for an event queued after it")
	}
	if got := r.buffered(t); !equal(got, []int64{first}) {
		t.Fatalf("buffer holds %v once FlushWith returned, want [%d]", got, first)
	}
	if row, err := r.st.GetSession(t.Context(), "s"); err != nil || row.Title != "bound" {
		t.Fatalf("row once FlushWith returned: %+v, %v", row, err)
	}
	release()
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.logged(t); !equal(got, []int64{first, later}) {
		t.Fatalf("log holds %v", got)
	}
}

// A model request's events (its start, the model's message, its usage,
// its end, an approval decision) wait for what follows them even with no
// linger set, and go to the log in one commit with it: here a row change
// (the environment bound before the tool call runs); a tool's output is
// recorded at once. The wait is bounded.
func TestARequestsEventsWaitForWhatFollows(t *testing.T) {
	restore := journal.SetMinLinger(time.Minute)
	r := newRig(t)
	restore()
	r.publish(t, event(omni.RequestBegin()), true)
	r.publish(t, event(omni.AssistantText("reading it")), true)
	r.publish(t, event(omni.TokenUsage(&penguinv1.TokenCounts{Total: 3}, &penguinv1.TokenCounts{Total: 3})), true)
	r.publish(t, event(omni.RequestEnd(penguinv1.StopReason_STOP_REASON_COMPLETED, "", 1, 0)), true)
	decided := r.publish(t, event(omni.ApprovalDecision("call-1", penguinv1.Decision_DECISION_ALLOW)), true)
	time.Sleep(20 * time.Millisecond)
	if got := r.buffered(t); len(got) != 0 || r.appendCount() != 0 {
		t.Fatalf("before what follows: published %v, %d appends", got, r.appendCount())
	}
	if err := r.j.FlushWith(store.SessionWrite{Patch: &store.SessionPatch{Environment: &store.EnvironmentBinding{ID: "env-1"}}}); err != nil {
		t.Fatal(err)
	}
	if got := r.buffered(t); len(got) != int(decided) || r.appendCount() != 1 {
		t.Fatalf("after the row change: published %v, %d appends, want %d events in 1", got, r.appendCount(), decided)
	}
	out := r.publish(t, event(omni.ToolCallOutput("call-1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED)), true)
	eventually.True(t, "the tool's output published", func() bool { return len(r.buffered(t)) == int(out) })
	if got := r.logged(t); len(got) != int(out) {
		t.Fatalf("log holds %v", got)
	}

	defer journal.SetMinLinger(20 * time.Millisecond)()
	r = newRig(t)
	r.publish(t, event(omni.RequestEnd(penguinv1.StopReason_STOP_REASON_COMPLETED, "", 1, 0)), true)
	eventually.True(t, "a request's end with nothing after it published after the linger", func() bool { return len(r.buffered(t)) == 1 })
}

// A claimed journal publishes nothing, announcements and durability
// points included, until the Flush whose commit takes the lease with
// everything queued by then; taken is called once it is made.
func TestAClaimHoldsEverythingUntilTheCommitThatTakesTheLease(t *testing.T) {
	r := newRig(t)
	var taken atomic.Bool
	r.j.Claim(&store.LeaseClaim{Owner: "me", TTL: time.Minute}, func() { taken.Store(true) })
	r.publish(t, state(penguinv1.SessionState_SESSION_STATE_RUNNING), false)
	r.publish(t, msg("prompt"), true)
	r.publish(t, event(omni.ToolCallOutput("c1", "out", penguinv1.StopReason_STOP_REASON_COMPLETED)), true)
	time.Sleep(20 * time.Millisecond) // ten lingers
	if got := r.buffered(t); len(got) != 0 {
		t.Fatalf("published %v before the claim's commit, want nothing", got)
	}
	if got := r.logged(t); len(got) != 0 || taken.Load() {
		t.Fatalf("logged %v (lease taken: %v) before the Flush, want nothing", got, taken.Load())
	}
	if err := r.j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := r.logged(t), []int64{2, 3}; !equal(got, want) || !taken.Load() {
		t.Fatalf("logged %v (lease taken: %v), want %v and the lease", got, taken.Load(), want)
	}
	if got := r.buffered(t); !equal(got, []int64{1, 2, 3}) {
		t.Fatalf("published %v, want 1 to 3", got)
	}
	if owner, _, _, err := r.st.LeaseHolder(context.Background(), "s"); err != nil || owner != "me" {
		t.Fatalf("lease holder %q, %v; want me", owner, err)
	}
}

// A claim the store refuses is a failure of the log that records
// nothing: the events are dropped, the announcements published, and the
// error says the lease was taken.
func TestARefusedClaimRecordsNothing(t *testing.T) {
	r := newRig(t)
	if ok, err := r.st.AcquireLease(context.Background(), "s", "elsewhere", "", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r.j.Claim(&store.LeaseClaim{Owner: "me", TTL: time.Minute}, func() { t.Error("a refused claim was taken") })
	r.j.Announce(state(penguinv1.SessionState_SESSION_STATE_RUNNING))
	r.publish(t, msg("prompt"), true)
	if err := r.j.Flush(); !errors.Is(err, store.ErrLeaseTaken) {
		t.Fatalf("Flush = %v, want ErrLeaseTaken", err)
	}
	if got := r.logged(t); len(got) != 0 {
		t.Fatalf("logged %v, want nothing", got)
	}
	if got := r.buffered(t); !equal(got, []int64{1}) {
		t.Fatalf("published %v, want the announcement only", got)
	}
}

// A dropped claim lets what it held back go, as without a claim.
func TestADroppedClaimLetsTheQueueGo(t *testing.T) {
	r := newRig(t)
	r.j.Claim(&store.LeaseClaim{Owner: "me", TTL: time.Minute}, func() { t.Error("a dropped claim was taken") })
	r.publish(t, state(penguinv1.SessionState_SESSION_STATE_RUNNING), false)
	r.j.DropClaim()
	eventually.True(t, "the announcement published", func() bool { return equal(r.buffered(t), []int64{1}) })
	if _, _, _, err := r.st.LeaseHolder(context.Background(), "s"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a dropped claim took the lease: %v", err)
	}
}

// The events of one commit reach the live buffer together: a reader wakes
// once for them and reads them all, so that a stream sends a commit's
// events in one go rather than waking for the first and racing the writer
// for the rest. Before, each event woke the readers on its own, and a
// reader on another core read a commit's first events alone.
func TestACommitsEventsArePublishedTogether(t *testing.T) {
	r := newLingeringRig(t, time.Minute)
	const rounds, perRound = 10, 200
	// Each commit is perRound answers held back and the state change that
	// ends their hold; its last event is a multiple of perRound+1.
	last := int64(rounds * (perRound + 1))
	reads := make(chan []int64, 1)
	go func() {
		var seen []int64
		follow(r.buf, last, func(end int64) { seen = append(seen, end) })
		reads <- seen
	}()
	for range rounds {
		for range perRound {
			r.publish(t, msg("partial"), true)
		}
		r.j.Announce(state(penguinv1.SessionState_SESSION_STATE_RUNNING))
		if err := r.j.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	select {
	case seen = <-reads:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not see the last commit")
	}
	for _, s := range seen {
		if s%(perRound+1) != 0 {
			t.Fatalf("a read ended at event %d, within a commit (each ends at a multiple of %d)", s, perRound+1)
		}
	}
}

// A commit takes one hand-off to the writer: a model request's events are
// held with no writer running, and the tool's output that ends their hold
// starts the writer, or the linger's end does. Before, the first event
// to hold started a writer that waited and was woken again by the tool's
// output (two hand-offs), and a durability point that came while no
// writer held the queue left a kick behind that woke the next hold for
// nothing (three).
func TestACommitTakesOneHandOffToTheWriter(t *testing.T) {
	r := newLingeringRig(t, 200*time.Millisecond)
	wakes, restore := journal.CountWriterWakes()
	defer restore()
	round := func(what string, publish func(), published int) {
		t.Helper()
		wakes.Store(0)
		publish()
		eventually.True(t, what+" published", func() bool { return len(r.buffered(t)) == published })
		if err := r.j.Flush(); err != nil {
			t.Fatal(err)
		}
		if n := wakes.Load(); n != 1 {
			t.Fatalf("%s: the writer was started or woken %d times, want 1", what, n)
		}
	}
	round("a state change", func() { r.j.Announce(state(penguinv1.SessionState_SESSION_STATE_RUNNING)) }, 1)
	round("an answer held for the linger", func() { r.publish(t, msg("an answer"), true) }, 2)
	round("a request's events and the tool's output", func() {
		r.publish(t, event(omni.RequestBegin()), true)
		r.publish(t, msg("an answer"), true)
		r.publish(t, event(omni.ToolCallOutput("call-1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED)), true)
	}, 5)
}

// follow reads buf as a stream does, waking whenever events are
// published, until it has read the event last; it calls read with the last
// event of every read.
func follow(buf *live.Buffer, last int64, read func(end int64)) {
	for cursor := int64(0); cursor < last; {
		evs, wake, err := buf.Read(cursor, 0)
		if err != nil {
			return
		}
		if len(evs) == 0 {
			<-wake
			continue
		}
		cursor = evs[len(evs)-1].GetSequence()
		read(cursor)
	}
}

// nopStore records nothing, so that a benchmark measures the journal and
// the live buffer alone.
type nopStore struct{}

func (nopStore) AppendEvents(context.Context, string, ...store.Event) error { return nil }

func (nopStore) WriteSession(context.Context, string, store.SessionWrite) error { return nil }

// BenchmarkCommitRound measures a task's usual round: a model request's
// events held back, then the tool's output that commits and publishes
// them, with one reader following the live buffer as a Run's stream does.
// Of its allocations, one an event is the event itself.
func BenchmarkCommitRound(b *testing.B) {
	const perRound = 8
	buf := live.New(0, 0, 0)
	j := journal.New(journal.Options{Store: nopStore{}, Session: "s", Next: 1, Buffer: buf, Linger: time.Minute, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	answer := &penguinv1.RunEvent_Message{Message: omni.AssistantText("partial")}
	output := &penguinv1.RunEvent_Message{Message: omni.ToolCallOutput("call-1", "hello", penguinv1.StopReason_STOP_REASON_COMPLETED)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(buf, int64(b.N*(perRound+1)), func(int64) {})
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range perRound + 1 {
			ev := &penguinv1.RunEvent{Event: answer}
			if i == perRound {
				ev.Event = output
			}
			if _, err := j.Publish(ev, true); err != nil {
				b.Fatal(err)
			}
		}
		if err := j.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(perRound+1)), "ns/event")
}
