// Package sessionwatch keeps watchers of the session list (the
// WatchSessions RPC behind the web app's sidebar) up to date. It hears of
// changes from two places: a decorator of the session store, which sees
// every session created, updated (title, usage) or deleted through this
// engine replica, and a hook the session runtime calls whenever a
// session's state changes (running, awaiting approval, idle with how the
// task ended).
//
// The hooks never block the engine: they only mark a session dirty. While
// anyone watches, one refresher goroutine reads each dirty session once
// (so a burst of changes costs one read) and hands the result to every
// watcher's bounded queue; a watcher whose queue is full is cut off with
// ErrFellBehind and starts again from a snapshot, because a session
// runtime must never wait for a slow browser. When a changed session
// cannot be read (the store is down), every watcher is ended with the
// store's error for the same reason: a list that can no longer follow the
// changes must not go on looking current.
package sessionwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Lister reads sessions: the session manager.
type Lister interface {
	List(ctx context.Context, pageSize int, token string, projects ...string) ([]*penguinv1.Session, string, error)
	Get(ctx context.Context, id string) (*penguinv1.Session, error)
}

// ErrFellBehind ends a watch whose queue overflowed.
var ErrFellBehind = errors.New("the session list watcher fell behind; watch again")

const (
	// queueLen bounds each watcher's queue of events.
	queueLen = 256
	// maxDirty bounds the set of sessions waiting to be read; past it the
	// watchers are cut off and start again from a snapshot.
	maxDirty = 4096
	// maxStatuses bounds the remembered task outcomes; past it the oldest
	// are forgotten (their sessions then show no last status).
	maxStatuses = 10000
	// DefaultSnapshot is the snapshot size of a watch that sets none.
	DefaultSnapshot = 100
	// readTimeout bounds one read of a dirty session.
	readTimeout = 10 * time.Second
)

// outcome is how a session's last task ended.
type outcome struct {
	status  penguinv1.StopReason
	message string
	seq     uint64 // for forgetting the oldest
}

// watcher is one WatchSessions call.
type watcher struct {
	queue chan *penguinv1.WatchSessionsResponse
	cut   chan struct{} // closed when the watcher is cut off, after err is set
	err   error
	once  sync.Once
}

// end cuts the watcher off with err, the first time only.
func (w *watcher) end(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.cut)
	})
}

func (w *watcher) fellBehind() { w.end(ErrFellBehind) }

// Hub fans session changes out to watchers.
type Hub struct {
	lister Lister
	log    *slog.Logger

	mu       sync.Mutex
	watchers map[*watcher]struct{}
	dirty    map[string]struct{}
	outcomes map[string]outcome
	outSeq   uint64
	wake     chan struct{}
	stop     chan struct{} // closes to end the refresher when the last watcher leaves
}

// New returns a Hub that reads sessions through lister.
func New(lister Lister, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		lister: lister, log: log,
		watchers: map[*watcher]struct{}{}, dirty: map[string]struct{}{}, outcomes: map[string]outcome{},
		wake: make(chan struct{}, 1),
	}
}

// Changed marks a session as changed. It never blocks.
func (h *Hub) Changed(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.markLocked(id)
}

func (h *Hub) markLocked(id string) {
	if len(h.watchers) == 0 {
		return
	}
	if len(h.dirty) >= maxDirty {
		// Too much to read one by one: every watcher starts again.
		for w := range h.watchers {
			w.fellBehind()
		}
		clear(h.dirty)
		return
	}
	h.dirty[id] = struct{}{}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// StateChanged records a session's state change, and how its task ended
// when it went idle. It never blocks; the session runtime calls it with
// its own locks held.
func (h *Hub) StateChanged(id string, ch *penguinv1.RunStateChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE && ch.GetStatus() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		h.outSeq++
		h.outcomes[id] = outcome{status: ch.GetStatus(), message: ch.GetMessage(), seq: h.outSeq}
		if len(h.outcomes) > maxStatuses {
			h.forgetOldestLocked()
		}
	} else if ch.GetState() == penguinv1.SessionState_SESSION_STATE_RUNNING {
		delete(h.outcomes, id)
	}
	h.markLocked(id)
}

func (h *Hub) forgetOldestLocked() {
	var oldest string
	var seq uint64
	for id, o := range h.outcomes {
		if oldest == "" || o.seq < seq {
			oldest, seq = id, o.seq
		}
	}
	delete(h.outcomes, oldest)
}

// Deleted tells the watchers a session is gone.
func (h *Hub) Deleted(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.outcomes, id)
	delete(h.dirty, id)
	h.broadcastLocked(&penguinv1.WatchSessionsResponse{Event: &penguinv1.WatchSessionsResponse_DeletedSessionId{DeletedSessionId: id}})
}

// broadcastLocked queues ev for every watcher, cutting off those whose
// queue is full.
func (h *Hub) broadcastLocked(ev *penguinv1.WatchSessionsResponse) {
	for w := range h.watchers {
		select {
		case w.queue <- ev:
		default:
			w.fellBehind()
		}
	}
}

// change describes a session with its remembered outcome.
func (h *Hub) change(s *penguinv1.Session) *penguinv1.WatchSessionsResponse {
	h.mu.Lock()
	o := h.outcomes[s.GetSessionId()]
	h.mu.Unlock()
	c := &penguinv1.SessionChange{Session: s}
	if s.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
		c.LastStatus, c.LastMessage = o.status, o.message
	}
	return &penguinv1.WatchSessionsResponse{Event: &penguinv1.WatchSessionsResponse_Session{Session: c}}
}

// Watch sends a snapshot of the newest snapshotSize sessions (zero means
// DefaultSnapshot), a snapshot_end, and then every change, until ctx ends,
// send fails, the watcher falls behind (ErrFellBehind), or a changed
// session cannot be read (the store's error).
func (h *Hub) Watch(ctx context.Context, snapshotSize int, send func(*penguinv1.WatchSessionsResponse) error) error {
	if snapshotSize <= 0 {
		snapshotSize = DefaultSnapshot
	}
	w := &watcher{queue: make(chan *penguinv1.WatchSessionsResponse, queueLen), cut: make(chan struct{})}
	h.join(w)
	defer h.leave(w)

	// Changes from now on are queued while the snapshot is read, so none
	// is missed; one that the snapshot already shows comes again, which an
	// upsert absorbs.
	list, _, err := h.lister.List(ctx, snapshotSize, "")
	if err != nil {
		return err
	}
	for _, s := range list {
		if err := send(h.change(s)); err != nil {
			return err
		}
	}
	if err := send(&penguinv1.WatchSessionsResponse{Event: &penguinv1.WatchSessionsResponse_SnapshotEnd{SnapshotEnd: &penguinv1.SnapshotEnd{}}}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.cut:
			return w.err
		case ev := <-w.queue:
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

// join adds a watcher, starting the refresher for the first one.
func (h *Hub) join(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers[w] = struct{}{}
	if len(h.watchers) == 1 {
		h.stop = make(chan struct{})
		go h.refresh(h.stop)
	}
}

// leave removes a watcher, ending the refresher with the last one.
func (h *Hub) leave(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
	if len(h.watchers) == 0 {
		close(h.stop)
		clear(h.dirty)
	}
}

// refresh reads dirty sessions and broadcasts them until stop closes. A
// batch it has taken is finished even after that, so no change taken from
// the dirty set is dropped when watchers come and go.
func (h *Hub) refresh(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-h.wake:
		}
		for _, id := range h.takeDirty() {
			h.refreshOne(id)
		}
	}
}

// takeDirty empties the dirty set.
func (h *Hub) takeDirty() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.dirty))
	for id := range h.dirty {
		ids = append(ids, id)
	}
	clear(h.dirty)
	return ids
}

func (h *Hub) refreshOne(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	s, err := h.lister.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Deleted meanwhile: Deleted has told the watchers.
		return
	case err != nil:
		// The list can no longer be kept true (a task that ended while
		// the store is down would show running forever): every watcher
		// is ended with the store's error and watches again, from a fresh
		// snapshot, once the store answers.
		h.log.Warn("session list: could not read a changed session; ending the watches", "session", id, "error", err)
		err = fmt.Errorf("the session list cannot be kept up to date: reading session %s: %w; watch again", id, err)
		h.mu.Lock()
		for w := range h.watchers {
			w.end(err)
		}
		h.mu.Unlock()
		return
	}
	ev := h.change(s)
	h.mu.Lock()
	h.broadcastLocked(ev)
	h.mu.Unlock()
}

// Store returns st with every session created, updated or deleted through
// it reported to the hub.
func (h *Hub) Store(st store.Store) store.Store { return &observed{Store: st, hub: h} }

// observed is a store that reports session changes to a Hub.
type observed struct {
	store.Store
	hub *Hub
}

func (o *observed) CreateSession(ctx context.Context, s *store.Session, first ...store.Event) error {
	err := o.Store.CreateSession(ctx, s, first...)
	if err == nil {
		o.hub.Changed(s.ID)
	}
	return err
}

func (o *observed) UpdateSession(ctx context.Context, s *store.Session) error {
	err := o.Store.UpdateSession(ctx, s)
	if err == nil {
		o.hub.Changed(s.ID)
	}
	return err
}

func (o *observed) ModifySession(ctx context.Context, id string, f func(*store.Session) error) error {
	err := o.Store.ModifySession(ctx, id, f)
	if err == nil {
		o.hub.Changed(id)
	}
	return err
}

func (o *observed) WriteSession(ctx context.Context, id string, w store.SessionWrite) error {
	err := o.Store.WriteSession(ctx, id, w)
	if err == nil && (w.Modify != nil || w.Patch != nil) {
		o.hub.Changed(id)
	}
	return err
}

func (o *observed) DeleteSession(ctx context.Context, id string) error {
	err := o.Store.DeleteSession(ctx, id)
	if err == nil {
		o.hub.Deleted(id)
	}
	return err
}
