// Package bytecache is a map bounded by the bytes of what it holds, for
// caches of texts a server sees again and again (the tool schemas of a
// session's requests) whose keys are not known ahead: when the next entry
// would pass the bound, the map starts over rather than tracking which
// entry is least recent, since the entries worth keeping come back at
// once. It is written here because the bound is the whole of it, about
// thirty lines.
package bytecache

import "sync"

// Map maps K to V within a bound on the bytes held; it is safe for
// concurrent use.
type Map[K comparable, V any] struct {
	max int

	mu    sync.Mutex
	m     map[K]V
	bytes int
}

// New returns a Map holding at most max bytes.
func New[K comparable, V any](max int) *Map[K, V] {
	return &Map[K, V]{max: max, m: map[K]V{}}
}

// Get returns the value kept for k, if any.
func (c *Map[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put keeps v for k, counted as size bytes. An entry over a sixteenth of
// the bound is not kept (one would crowd the others out); one that would
// pass the bound empties the map first.
func (c *Map[K, V]) Put(k K, v V, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max/16 {
		return
	}
	if _, ok := c.m[k]; ok {
		return
	}
	if c.bytes+size > c.max {
		clear(c.m)
		c.bytes = 0
	}
	c.m[k] = v
	c.bytes += size
}

// Bytes returns the bytes held.
func (c *Map[K, V]) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
