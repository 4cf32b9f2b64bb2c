package environment

import (
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// maxPendingNotices bounds the notices kept for a watcher yet to come.
const maxPendingNotices = 256

// maxQueuedNotices bounds the notices queued for a watcher that does not
// read them; past it the watcher is dropped.
const maxQueuedNotices = maxPendingNotices + 64

// notices fans an environment's asynchronous notices out to its watchers.
// Notices published while nobody watches are kept (the newest
// maxPendingNotices) and handed to the next watcher, so a background
// command that finishes between two watch calls is not lost.
type notices struct {
	mu      sync.Mutex
	subs    map[*watcher]struct{}
	pending []*penguinv1.WatchEnvironmentResponse
	closed  bool
}

// watcher is one subscription: the notices queued for it, and a signal
// that there are some, or that it ended. Its queue grows with what is
// published, instead of a channel of the bound's size made for every
// watch (2.6 KiB each, one a task, and most watches see no notice).
type watcher struct {
	wake  chan struct{} // holds a value when queue or ended changed
	queue []*penguinv1.WatchEnvironmentResponse
	ended bool // dropped, unsubscribed or the environment disposed
}

func newNotices() *notices {
	return &notices{subs: map[*watcher]struct{}{}}
}

// signal wakes the watcher if it is not already due to wake.
func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// publish delivers n to every watcher, or keeps it for the next one.
func (h *notices) publish(n *penguinv1.WatchEnvironmentResponse) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if len(h.subs) == 0 {
		h.pending = append(h.pending, n)
		if len(h.pending) > maxPendingNotices {
			h.pending = h.pending[len(h.pending)-maxPendingNotices:]
		}
		return
	}
	for w := range h.subs {
		if len(w.queue) >= maxQueuedNotices {
			// A watcher this far behind has stopped reading; the stream
			// is closed under it rather than holding every notice for it.
			delete(h.subs, w)
			w.ended = true
		} else {
			w.queue = append(w.queue, n)
		}
		w.signal()
	}
}

// subscribe returns a watcher, whose queue starts with the pending
// notices; unsubscribe ends it. The watcher ends when the environment is
// disposed.
func (h *notices) subscribe() *watcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &watcher{wake: make(chan struct{}, 1)}
	if h.closed {
		w.ended = true
		return w
	}
	w.queue, h.pending = h.pending, nil
	h.subs[w] = struct{}{}
	return w
}

// unsubscribe ends the subscription w.
func (h *notices) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, w)
	w.ended = true
}

// take returns the notices queued for w, in the order published, and
// whether w goes on; when it does not, the notices are its last. Wait on
// w.wake for more.
func (h *notices) take(w *watcher) (batch []*penguinv1.WatchEnvironmentResponse, open bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	batch, w.queue = w.queue, nil
	return batch, !w.ended
}

// isClosed reports whether the environment's notices have ended.
func (h *notices) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// close ends every subscription.
func (h *notices) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for w := range h.subs {
		delete(h.subs, w)
		w.ended = true
		w.signal()
	}
}
