package environment

import (
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// maxPendingNotices bounds the notices kept for a watcher yet to come.
const maxPendingNotices = 256

// notices fans an environment's asynchronous notices out to its watchers.
// Notices published while nobody watches are kept (the newest
// maxPendingNotices) and handed to the next watcher, so a background
// command that finishes between two watch calls is not lost.
type notices struct {
	mu      sync.Mutex
	subs    map[chan *penguinv1.WatchEnvironmentResponse]struct{}
	pending []*penguinv1.WatchEnvironmentResponse
	closed  bool
	done    chan struct{}
}

func newNotices() *notices {
	return &notices{subs: map[chan *penguinv1.WatchEnvironmentResponse]struct{}{}, done: make(chan struct{})}
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
	for ch := range h.subs {
		select {
		case ch <- n:
		default:
			// A watcher this far behind has stopped reading; the stream
			// is closed under it rather than blocking every publisher.
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns a channel of notices, starting with the pending ones,
// and a function that ends the subscription. The channel is closed when the
// environment is disposed.
func (h *notices) subscribe() (<-chan *penguinv1.WatchEnvironmentResponse, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan *penguinv1.WatchEnvironmentResponse, maxPendingNotices+64)
	if h.closed {
		close(ch)
		return ch, func() {}
	}
	for _, n := range h.pending {
		ch <- n
	}
	h.pending = nil
	h.subs[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
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
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
	close(h.done)
}
