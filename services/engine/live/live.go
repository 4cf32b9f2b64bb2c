// Package live holds the recent events of one session in memory and fans
// them out to any number of readers.
//
// The run that produces events must never wait for a reader, so the buffer
// is a bounded ring that readers walk with their own cursor: publishing is
// an append plus one broadcast for the events committed together, and a
// reader that lags so far that the event after its cursor has been evicted
// learns it from Read and must go back to the store (or be cut off). Events carry the session's sequence numbers,
// which the publisher hands out in increasing order; there may be gaps,
// where events were numbered but never published (they could not be
// recorded).
package live

import (
	"errors"
	"sort"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/proto"
)

// Default bounds of a buffer: enough for a long turn full of partials while
// keeping a running session's memory small.
const (
	DefaultMaxEvents = 4096
	DefaultMaxBytes  = 8 << 20
)

// ErrEvicted reports that the events right after a reader's cursor are no
// longer in the buffer.
var ErrEvicted = errors.New("live: events after the cursor were evicted from the buffer")

// ErrClosed reports that the buffer was closed: its session runtime was
// dropped.
var ErrClosed = errors.New("live: buffer closed")

// Buffer is a bounded ring of a session's most recent events.
type Buffer struct {
	maxEvents int
	maxBytes  int

	mu    sync.Mutex
	ring  []entry
	head  int // index of the oldest entry
	n     int // number of entries
	bytes int
	last  int64 // sequence of the newest event ever published
	// gone is the sequence of the newest event no longer buffered (evicted,
	// or published before the buffer began): a reader before it must go
	// to the store.
	gone   int64
	wake   chan struct{}
	closed bool
}

type entry struct {
	ev   *penguinv1.RunEvent
	size int
}

// New returns an empty buffer that holds at most maxEvents events and about
// maxBytes bytes of them (the newest event is always kept). last is the
// sequence number of the event just before the first one that will be
// published. Zero or negative bounds select the defaults.
func New(last int64, maxEvents, maxBytes int) *Buffer {
	if maxEvents <= 0 {
		maxEvents = DefaultMaxEvents
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Buffer{maxEvents: maxEvents, maxBytes: maxBytes, last: last, gone: last, wake: make(chan struct{})}
}

// Publish appends evs, whose sequences must rise above the last one, and
// wakes every waiting reader once. It never blocks on readers. The events
// a journal commits together are published in one call: a reader then
// wakes once for them and reads them all, and its stream sends them
// together, instead of waking for each event and racing the rest.
func (b *Buffer) Publish(evs ...*penguinv1.RunEvent) {
	if len(evs) == 0 {
		return
	}
	// The sizes are measured before the lock, which readers take too.
	var small [16]int
	sizes := small[:0]
	for _, ev := range evs {
		sizes = append(sizes, proto.Size(ev))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if b.ring == nil {
		b.ring = make([]entry, 0, 64)
	}
	for i, ev := range evs {
		b.appendLocked(entry{ev, sizes[i]})
	}
	b.broadcast()
}

// appendLocked adds e as the newest entry, evicting the oldest ones that
// leave no room for it.
func (b *Buffer) appendLocked(e entry) {
	for b.n > 0 && (b.n >= b.maxEvents || b.bytes+e.size > b.maxBytes) {
		b.evictOldest()
	}
	switch {
	case b.n < len(b.ring):
		b.ring[(b.head+b.n)%len(b.ring)] = e
	case b.head == 0 && len(b.ring) < b.maxEvents:
		b.ring = append(b.ring, e)
	default:
		// Grow a wrapped ring by unrolling it.
		grown := make([]entry, 0, min(2*len(b.ring)+1, b.maxEvents))
		for i := range b.n {
			grown = append(grown, b.ring[(b.head+i)%len(b.ring)])
		}
		b.ring, b.head = append(grown, e), 0
	}
	b.n++
	b.bytes += e.size
	b.last = e.ev.GetSequence()
}

func (b *Buffer) evictOldest() {
	e := &b.ring[b.head]
	b.bytes -= e.size
	b.gone = e.ev.GetSequence()
	*e = entry{}
	b.head = (b.head + 1) % len(b.ring)
	b.n--
}

// Wake wakes every waiting reader without publishing anything, for a
// reader that waits on the buffer until something else it checks (the
// journal's pending events) changes: that change may come with no event.
func (b *Buffer) Wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.broadcast()
	}
}

func (b *Buffer) broadcast() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// Close wakes every reader with ErrClosed and drops the events.
func (b *Buffer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	b.ring, b.n, b.head, b.bytes = nil, 0, 0, 0
	close(b.wake)
}

// Last returns the sequence number of the newest published event.
func (b *Buffer) Last() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Oldest returns the sequence number of the oldest event still buffered, or
// Last()+1 when the buffer is empty.
func (b *Buffer) Oldest() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.oldestLocked()
}

func (b *Buffer) oldestLocked() int64 {
	if b.n == 0 {
		return b.last + 1
	}
	return b.ring[b.head].ev.GetSequence()
}

// Read returns up to limit buffered events with a sequence above after, and
// a channel that is closed when a newer event is published (or the buffer
// closes). It returns ErrEvicted when an event right after the cursor was
// evicted, and ErrClosed once the buffer is closed.
func (b *Buffer) Read(after int64, limit int) ([]*penguinv1.RunEvent, <-chan struct{}, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, ErrClosed
	}
	if after >= b.last {
		return nil, b.wake, nil
	}
	if after < b.gone {
		return nil, b.wake, ErrEvicted
	}
	// The first buffered event above after; numbers may have gaps.
	start := sort.Search(b.n, func(i int) bool { return b.ring[(b.head+i)%len(b.ring)].ev.GetSequence() > after })
	count := b.n - start
	if limit > 0 && count > limit {
		count = limit
	}
	out := make([]*penguinv1.RunEvent, count)
	for i := range count {
		out[i] = b.ring[(b.head+start+i)%len(b.ring)].ev
	}
	return out, b.wake, nil
}
