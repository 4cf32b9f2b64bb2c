package environment

import (
	"sync"

	"github.com/penguin-agent/penguin/services/environment/checkpoint"
)

// heldStores keeps the checkpoint store of each workspace that a live
// environment works in open from one checkpoint to the next: opening a
// store took seven system calls (its two directories opened and one
// closed, a stat, a look at each of its directories, the close at the
// end) at every walked checkpoint, and a session checkpoints its
// workspace at every turn's start. A kept store is checked before each
// use (checkpoint.Store.Reusable) and opened again when its directory
// changed. It is closed when the last environment of its workspace is
// disposed, so a workspace no environment works in holds no descriptor.
//
// Only one checkpoint uses a store at a time (checkpointMu); a store in
// use is out of the table, and goes back to it (or is closed, when its
// workspace's environments ended meanwhile) when that checkpoint ends.
type heldStores struct {
	mu sync.Mutex
	m  map[string]*heldStore // by resolved workspace
}

type heldStore struct {
	envs int               // live environments of the workspace
	st   *checkpoint.Store // nil until a checkpoint opened it, and while one uses it
}

// hold counts one more live environment of the workspace ws (resolved)
// and returns what ends it, which may be called more than once.
func (h *heldStores) hold(ws string) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*heldStore{}
	}
	e := h.m[ws]
	if e == nil {
		e = &heldStore{}
		h.m[ws] = e
	}
	e.envs++
	var once sync.Once
	return func() { once.Do(func() { h.release(ws) }) }
}

// release counts one environment of ws fewer, closing its kept store
// after the last.
func (h *heldStores) release(ws string) {
	h.mu.Lock()
	e := h.m[ws]
	e.envs--
	if e.envs > 0 {
		h.mu.Unlock()
		return
	}
	delete(h.m, ws)
	h.mu.Unlock()
	if e.st != nil {
		e.st.Close()
	}
}

// take returns the store kept open for ws, nil when there is none; the
// caller gives it back with put.
func (h *heldStores) take(ws string) *checkpoint.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[ws]
	if e == nil {
		return nil
	}
	st := e.st
	e.st = nil
	return st
}

// put keeps st, the store of ws, open for the next checkpoint while an
// environment works in ws, and closes it otherwise.
func (h *heldStores) put(ws string, st *checkpoint.Store) {
	h.mu.Lock()
	if e := h.m[ws]; e != nil && e.st == nil {
		e.st = st
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	st.Close()
}

// open counts the stores kept open, for the tests.
func (h *heldStores) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.m {
		if e.st != nil {
			n++
		}
	}
	return n
}
