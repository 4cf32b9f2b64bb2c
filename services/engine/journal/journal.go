// Package journal numbers the events of one loaded session, records those
// that belong in the session's log, and only then publishes them to the
// session's live buffer.
//
// Events are numbered when they are published and queued; one writer
// goroutine appends the queued events that belong in the log in one
// transaction (group commit) and then hands the whole batch to the live
// buffer, in sequence order. So nothing is seen before it is recorded, the
// live order, the log order and the numbering agree, and the agent loop
// never waits for the database on its way to the next request.
//
// The writer commits at durability points: a tool's output, a state
// change, or a Flush (the prompt's, a row change's such as an environment
// bound before a tool call runs, the task's end). An event to record that
// is none of these (a request's start, the model's messages, its request's
// end, an approval decision, a steering message) waits for the next
// durability point, up to Options.Linger or minLinger if that is longer,
// so that a task's events take a few transactions instead of one each: a
// model request's events go with the tool output, the binding or the
// task's end that follows them. Waiting delays what clients see by as much, never
// what is recorded before they see it, and never the loop, which does not
// wait for what it publishes. No writer runs while events wait: the
// durability point, a flush or the linger's end starts the one that
// commits them, and it hands each round to the live buffer in one
// publication, so that a commit costs one wake-up of the writer and one
// of each stream that follows the session.
//
// When a write fails, the journal refuses everything after it: an event
// that cannot be recorded must not be seen, and nothing after a gap in the
// log may be. The events of the failed batch and those queued behind it
// are dropped, never written later (the next task starts from the log as
// it is). Only announcements still pass (Announce): events that are never
// recorded anyway, above all the state change that tells every watcher
// the task ended, so that no stream waits for an event that cannot come.
// Reset clears the failure when a new task starts from the log.
//
// FlushWith commits a change of the session's row, and the release of its
// run lease, in the transaction of the queued events: a task's prompt and
// its title, or its last events, its end and its lease, are one commit.
//
// Claim has the journal's next commit take the session's run lease
// (store.SessionWrite.Claim): a task that read the session without the
// lease takes it with its prompt instead of in a commit of its own. Until
// that commit nothing is published to the session's stream, not even an
// announcement, so that no client follows a task that the store may yet
// refuse.
package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/live"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Appender is the part of the session store a journal writes to.
type Appender interface {
	AppendEvents(ctx context.Context, sessionID string, events ...store.Event) error
	WriteSession(ctx context.Context, sessionID string, w store.SessionWrite) error
}

// Options describe the journal of one session.
type Options struct {
	// Store records the events.
	Store Appender
	// Session is the session's id.
	Session string
	// Next is the first sequence number to hand out.
	Next int64
	// LastPersisted is the sequence of the log's last event.
	LastPersisted int64
	// Buffer receives the events once they are recorded.
	Buffer *live.Buffer
	// Linger is how long an event to record may wait for a durability
	// point to be recorded with; below minLinger, minLinger.
	Linger time.Duration
	// Timeout bounds one write of the log. A write is never cut short by
	// whoever published the events going away (an abort must still be
	// recorded), only by this.
	Timeout time.Duration
	// Logger is told when the log cannot be written.
	Logger *slog.Logger
	// OnFail, when set, is called once for each failure of the log (outside
	// the journal's lock), so that the session stops its task at once
	// rather than at its next event, which may be a long tool call away.
	OnFail func(error)
}

// Journal is the event writer of one session.
type Journal struct {
	store   Appender
	id      string
	buf     *live.Buffer
	linger  time.Duration
	timeout time.Duration
	log     *slog.Logger
	onFail  func(error)
	// kick wakes a writer that holds a batch back, when a durability
	// point or a Flush arrives.
	kick chan struct{}
	// timer ends a writer's hold (the linger); only the writer, of which
	// at most one runs, uses it.
	timer *time.Timer
	// lingerEnd starts the writer at the end of the linger of events held
	// back while no writer runs (armed under mu, see holdBackLocked).
	lingerEnd *time.Timer
	// published holds the events one round of the writer hands to the
	// live buffer; only the writer uses it, and it is kept between rounds
	// (up to keptQueue) so that a round allocates none.
	published []*penguinv1.RunEvent

	mu           sync.Mutex
	drained      *sync.Cond // signalled when the writer empties the queue
	next         int64
	queue        []queued
	writerActive bool
	// lingering says the writer waits for kick or its timer: only then
	// does a durability point send a kick, so that none is left over to
	// end a later hold for nothing.
	lingering bool
	// armed says lingerEnd is set to start the writer.
	armed bool
	// spare is the queue's previous backing array, emptied (up to
	// keptQueue), for the writer to hand back as the new queue when it
	// takes one.
	spare         []queued
	writeErr      error // the log failed: nothing more is published
	lastPersisted int64
	// urgent says the queue holds a durability point, or someone waits in
	// Flush: the writer takes it at once.
	urgent bool
	// held is when the oldest event to record in the queue was queued;
	// zero when there is none.
	held time.Time
	// with is the row change and lease release a FlushWith has the
	// writer commit with the queue; nil when there is none.
	with *rowWrite
	// claim is the lease the next commit takes (Claim); nil when there is
	// none. While it is set, the writer runs only for a Flush or a
	// FlushWith.
	claim *claim
}

// claim is a lease the journal's next commit takes.
type claim struct {
	lease *store.LeaseClaim
	// taken is called once the commit that took the lease is made.
	taken func()
}

// rowWrite is what one FlushWith has the writer commit with the queue.
type rowWrite struct {
	store.SessionWrite
	// done is set (under the journal's lock) once the round that took
	// the write has committed it, or dropped it because the log failed,
	// and published its events.
	done bool
}

// queued is an event waiting for the writer.
type queued struct {
	ev      *penguinv1.RunEvent
	persist bool
	// always marks an announcement, published even after the log failed.
	always bool
}

// New returns the journal Options describe.
func New(o Options) *Journal {
	j := &Journal{
		store:         o.Store,
		id:            o.Session,
		buf:           o.Buffer,
		linger:        max(o.Linger, minLinger),
		kick:          make(chan struct{}, 1),
		timeout:       o.Timeout,
		log:           o.Logger,
		onFail:        o.OnFail,
		next:          o.Next,
		lastPersisted: o.LastPersisted,
	}
	j.drained = sync.NewCond(&j.mu)
	return j
}

// Publish numbers ev and queues it for the writer, which appends its
// message to the log when persist is set and then hands it to the live
// buffer. It returns the number, or the log's error when an earlier write
// failed: then nothing is queued.
func (j *Journal) Publish(ev *penguinv1.RunEvent, persist bool) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.writeErr != nil {
		return 0, j.writeErr
	}
	return j.enqueueLocked(queued{ev: ev, persist: persist}), nil
}

// Announce numbers ev, which is never recorded, and queues it behind
// everything published before it. Unlike Publish it goes through after the
// log failed: a state change says what the session does whether or not its
// log can be written, and the one that says the task ended is what ends
// every stream that follows the task.
func (j *Journal) Announce(ev *penguinv1.RunEvent) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.enqueueLocked(queued{ev: ev, always: true})
}

// AnnounceWith numbers and queues ann, an announcement as Announce queues
// it, and ev right behind it as Publish(ev, false) would, in one step: no
// event of another goroutine falls between them. A state change and the
// event it is about must not be parted on any stream: the session's move
// into awaiting approval and the question that moved it come while the
// model request that asked is still publishing its own events (its tools
// start before it ends). ev is refused, with the log's error, once an
// earlier write failed; ann is queued anyway.
func (j *Journal) AnnounceWith(ann, ev *penguinv1.RunEvent) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.enqueueLocked(queued{ev: ann, always: true})
	if j.writeErr != nil {
		return 0, j.writeErr
	}
	return j.enqueueLocked(queued{ev: ev}), nil
}

func (j *Journal) enqueueLocked(q queued) int64 {
	seq := j.next
	j.next++
	q.ev.Sequence = seq
	j.queue = append(j.queue, q)
	if q.persist && j.held.IsZero() {
		j.held = time.Now()
	}
	if durabilityPoint(q) {
		j.urgent = true
	}
	switch {
	case j.claim != nil:
		// Held until the commit that takes the lease (Flush).
	case j.writerActive:
		if j.urgent {
			j.hurryLocked()
		}
	default:
		if wait := j.holdLocked(); wait > 0 {
			j.holdBackLocked(wait)
		} else {
			// Not hurried: what is queued behind it before the writer
			// runs may still be held back.
			j.startLocked()
		}
	}
	return seq
}

// holdBackLocked has the writer start once wait is over, unless a
// durability point or a flush starts it first. No writer runs meanwhile:
// a model request's events are queued with nothing woken, and the tool's
// output that follows them starts the writer that commits them all,
// where a writer started by the first of them would wait, and be woken
// again, for the tool's output.
func (j *Journal) holdBackLocked(wait time.Duration) {
	if j.armed {
		return
	}
	j.armed = true
	if j.lingerEnd == nil {
		j.lingerEnd = time.AfterFunc(wait, j.lingerOver)
	} else {
		j.lingerEnd.Reset(wait)
	}
}

// lingerOver runs when the linger of held-back events is over, in a
// goroutine of its own, which becomes the writer unless one runs already
// (a durability point came in between) or a claim holds the queue.
func (j *Journal) lingerOver() {
	j.mu.Lock()
	j.armed = false
	if j.writerActive || j.claim != nil || len(j.queue) == 0 {
		j.mu.Unlock()
		return
	}
	j.writerActive = true
	j.mu.Unlock()
	j.write()
}

// startNowLocked has the writer take the queue at once: it starts one
// unless one runs, and hurries it.
func (j *Journal) startNowLocked() {
	j.startLocked()
	j.hurryLocked()
}

// startLocked starts the writer unless it runs.
func (j *Journal) startLocked() {
	if j.armed {
		j.armed = false
		j.lingerEnd.Stop()
	}
	if !j.writerActive {
		j.writerActive = true
		go j.write()
	}
}

// durabilityPoint reports whether q is an event whose publication must
// not wait: a state change (what the session does now, such as the task's
// end or a wait before a reconnect) or a tool's output (the end of a step
// that may have taken long, after which the next request starts). Each is
// recorded, with everything queued before it, as soon as it comes. The
// end of a model request and an approval decision are none: within a
// task they are followed at once by a tool's output, the binding of an
// environment, the next request or the task's end, which a commit of
// their own would only precede by moments.
func durabilityPoint(q queued) bool {
	return q.always || q.ev.GetMessage().GetToolCallOutput() != nil
}

// minLinger is the shortest linger of a journal (Options.Linger): how long
// an event to record waits at least for a durability point. A model
// request's events come moments apart (a few hundred microseconds on a
// local model), so they go with the tool output or the task's end that
// follows them; a client sees the start of a request, and the partials
// behind it, that much later.
var minLinger = 2 * time.Millisecond

// hurryLocked makes the writer take the queue at once: a writer that
// holds the queue back is woken, one that does not will find urgent set.
func (j *Journal) hurryLocked() {
	j.urgent = true
	if j.lingering {
		j.lingering = false
		j.kick <- struct{}{} // never blocks: the writer took the last kick
	}
}

// holdLocked returns how much longer the writer should hold the queue
// back, waiting for a durability point: zero when it is to be written
// now.
func (j *Journal) holdLocked() time.Duration {
	if j.urgent || j.held.IsZero() || j.writeErr != nil {
		return 0
	}
	return max(time.Until(j.held.Add(j.linger)), 0)
}

// write drains the queue: each round appends what belongs in the log in
// one transaction and publishes the round in order. Once the log failed,
// a round publishes its announcements only.
func (j *Journal) write() {
	countWake()
	// published says the last round handed an event to the live buffer,
	// which woke its readers.
	published := false
	j.mu.Lock()
	for {
		if wait := j.holdLocked(); wait > 0 {
			j.lingering = true
			j.mu.Unlock()
			if j.timer == nil {
				j.timer = time.NewTimer(wait)
			} else {
				j.timer.Reset(wait)
			}
			kicked := false
			select {
			case <-j.kick:
				kicked = true
			case <-j.timer.C:
			}
			countWake()
			j.mu.Lock()
			if !kicked && !j.lingering {
				// A kick came after the timer fired: take it now, or it
				// would end the next hold at once.
				<-j.kick
			}
			j.lingering = false
			continue
		}
		j.urgent, j.held = false, time.Time{}
		if len(j.queue) == 0 && j.with == nil && j.claim == nil {
			// The writer goes idle under the same hold of the lock as
			// its last publication (below): a reader that saw the last
			// event in the buffer finds nothing pending, as nothing
			// would wake it again to ask once more. A last round that
			// published nothing (a row written on its own, a batch
			// dropped because the log failed) woke no one, so the
			// readers that found the journal pending are woken here,
			// to find it pending no more.
			j.writerActive = false
			j.drained.Broadcast()
			if !published {
				j.buf.Wake()
			}
			if j.timer != nil {
				// Under the lock: once it is let go, the next writer
				// may hold the queue back with this timer.
				j.timer.Stop()
			}
			j.mu.Unlock()
			return
		}
		batch, with, cl := j.queue, j.with, j.claim
		j.queue, j.spare, j.with, j.claim = j.spare, nil, nil, nil
		failed := j.writeErr != nil
		j.mu.Unlock()

		events := make([]store.Event, 0, len(batch))
		for _, q := range batch {
			if q.persist {
				events = append(events, store.Event{Sequence: q.ev.GetSequence(), Message: q.ev.GetMessage()})
			}
		}
		if (len(events) > 0 || with != nil || cl != nil) && !failed {
			ctx, cancel := context.WithTimeout(context.Background(), j.timeout)
			var err error
			if with == nil && cl == nil {
				err = j.store.AppendEvents(ctx, j.id, events...)
			} else {
				var w store.SessionWrite
				if with != nil {
					w = with.SessionWrite
				}
				w.Events = events
				if cl != nil {
					w.Claim = cl.lease
				}
				err = j.store.WriteSession(ctx, j.id, w)
			}
			cancel()
			if err == nil && cl != nil {
				cl.taken()
			}
			lost := errors.Is(err, store.ErrLeaseTaken)
			j.mu.Lock()
			switch {
			case lost:
				j.writeErr = fmt.Errorf("take the run lease of session %s: %w", j.id, err)
				failed = true
			case err != nil && len(events) == 0:
				j.writeErr = fmt.Errorf("record the row of session %s: %w", j.id, err)
				failed = true
			case err != nil:
				j.writeErr = fmt.Errorf("record events %d to %d of session %s: %w", events[0].Sequence, events[len(events)-1].Sequence, j.id, err)
				failed = true
			case len(events) > 0:
				j.lastPersisted = events[len(events)-1].Sequence
			}
			werr := j.writeErr
			j.mu.Unlock()
			if err != nil && !lost {
				j.log.Error("the session log could not be written; the session's task stops", "session", j.id, "error", err)
				if j.onFail != nil {
					j.onFail(werr)
				}
			}
		}
		// The round is published in one call, under the lock (see the
		// writer's going idle above): its readers wake once for it.
		pub := j.published[:0]
		for _, q := range batch {
			if !failed || q.always {
				pub = append(pub, q.ev)
			}
		}
		j.mu.Lock()
		j.buf.Publish(pub...)
		published = len(pub) > 0
		clear(pub)
		clear(batch)
		if cap(batch) <= keptQueue {
			j.published, j.spare = pub[:0], batch[:0]
		}
		if with != nil {
			with.done = true
			j.drained.Broadcast()
		}
		if f := afterPublish.Load(); f != nil {
			(*f)()
		}
	}
}

// keptQueue bounds the arrays a journal keeps between rounds (Journal.spare
// and Journal.published): a task's rounds hold a few events each, and a
// loaded session that once queued a long burst should not keep its arrays.
const keptQueue = 64

// afterPublish, when set (by tests only), runs right after the writer
// hands a batch to the live buffer, to widen the moment in which a reader
// of the buffer has seen the batch and asks the journal what is pending.
var afterPublish atomic.Pointer[func()]

// writerWoken, when set (by tests only), runs each time a writer starts
// or, holding the queue back, wakes: to count the hand-offs from the
// goroutines that publish to the writer.
var writerWoken atomic.Pointer[func()]

func countWake() {
	if f := writerWoken.Load(); f != nil {
		(*f)()
	}
}

// Flush has every queued event recorded and published at once, waits
// until they are, and returns the log's error if it failed.
func (j *Journal) Flush() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.claim != nil || j.writerActive || len(j.queue) > 0 {
		j.startNowLocked()
	}
	for j.writerActive {
		j.drained.Wait()
	}
	return j.writeErr
}

// FlushWith is Flush with a change of the session's row (w's Modify, as
// store.ModifySession's f: it sees the row with the queued events
// appended, and its Patch) and, unless w.ReleaseLease is empty, the
// release of that owner's run lease, committed in the same transaction
// as the queued events (which take the place of w.Events), or in one of
// their own when none is queued. So a task's end (its last
// events, its row, its lease) is one commit, and so is an environment
// bound during a task with the events queued meanwhile. It returns once
// that commit is made and its events published, without waiting for
// events queued after it. When the log failed before,
// it writes nothing and returns the failure, for the caller to write the
// row and release the lease on their own; when the commit fails, the log
// has failed as it would with events alone.
func (j *Journal) FlushWith(w store.SessionWrite) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.with != nil && j.writeErr == nil {
		// Another FlushWith's write is still to be taken.
		j.hurryLocked()
		j.drained.Wait()
	}
	if j.writeErr == nil {
		rw := &rowWrite{SessionWrite: w}
		j.with = rw
		j.startNowLocked()
		// The round that takes rw commits everything queued before it,
		// after the rounds before it: once it is done, all of that is
		// recorded and published. The writer may go on with events
		// queued since (a parallel tool's output), which this call does
		// not wait for.
		for !rw.done {
			j.drained.Wait()
		}
		return j.writeErr
	}
	j.settleLocked()
	return j.writeErr
}

// Reset waits for the writer and clears a failure of the log, before a
// new task that starts by reading the log again.
func (j *Journal) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.settleLocked()
	j.writeErr = nil
}

// settleLocked has what is queued, unless a claim holds it, written at
// once and waits until the writer is idle.
func (j *Journal) settleLocked() {
	if j.writerActive || (j.claim == nil && len(j.queue) > 0) {
		j.startNowLocked()
	}
	for j.writerActive {
		j.drained.Wait()
	}
}

// Claim has the next commit take the session's run lease (lease, as
// store.SessionWrite.Claim) and call taken once it is made. Until then
// the journal publishes nothing: its writer runs for the next Flush or
// FlushWith only, whose commit takes the lease with what is queued by
// then. When the store refuses the lease the log has failed (the error
// wraps store.ErrLeaseTaken), without calling OnFail: the task that
// claimed never started. DropClaim withdraws a claim not yet committed.
func (j *Journal) Claim(lease *store.LeaseClaim, taken func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.claim = &claim{lease: lease, taken: taken}
}

// DropClaim withdraws a claim that no commit has taken yet (a task that
// gave up before it wrote), and lets what was held back behind it go.
func (j *Journal) DropClaim() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.claim == nil {
		return
	}
	j.claim = nil
	if len(j.queue) > 0 || j.with != nil {
		j.startNowLocked()
	}
}

// Last returns the number of the newest event handed out.
func (j *Journal) Last() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next - 1
}

// LastPersisted returns the sequence of the newest event in the log.
func (j *Journal) LastPersisted() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastPersisted
}

// Pending reports whether events are queued and not yet published. When
// it turns false, the live buffer's readers are woken (by the writer's
// last publication, or without one), so that a reader may check Pending
// after reading the buffer and then wait on the buffer's channel.
func (j *Journal) Pending() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.writerActive || len(j.queue) > 0
}
