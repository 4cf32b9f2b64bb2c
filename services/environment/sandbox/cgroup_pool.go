//go:build linux

package sandbox

import (
	"errors"
	"sync"
)

// maxPooledCgroups bounds the empty cgroups kept for reuse per parent:
// enough for the commands of a busy service to start into warm cgroups,
// few enough that a burst of hundreds leaves no crowd behind.
const maxPooledCgroups = 16

// cgroupPool keeps the emptied cgroups of finished commands for the next
// commands. Cloning a process into a cgroup that has never held one costs
// the kernel most of a millisecond (measured: clone3 into a fresh cgroup
// ~800 µs, into a reused one ~110 µs, without CLONE_INTO_CGROUP ~90 µs),
// which would otherwise be paid by every command. A cgroup carries no
// state a command could leave for the next (no limits are set on it, and
// it is only reused once empty and never killed), so reuse changes nothing
// but the cost.
type cgroupPool struct {
	mu   sync.Mutex
	free map[string][]*cgroup // by parent directory
}

var pool = &cgroupPool{free: map[string][]*cgroup{}}

// get returns an empty cgroup under parent: a pooled one when there is
// one still usable, else a new one.
func (p *cgroupPool) get(parent string) (*cgroup, error) {
	for {
		p.mu.Lock()
		list := p.free[parent]
		if len(list) == 0 {
			p.mu.Unlock()
			return newCgroup(parent)
		}
		c := list[len(list)-1]
		p.free[parent] = list[:len(list)-1]
		p.mu.Unlock()
		// A pooled cgroup that was removed behind the pool's back (an
		// operator, a sweep) cannot take a process: skip it.
		if pop, err := c.populated(); err == nil && !pop {
			return c, nil
		}
		_ = c.remove()
	}
}

// put takes back the cgroup of a finished command: kept for reuse when it
// is empty, was never killed and the pool has room; removed otherwise
// (killing what is left in it).
func (p *cgroupPool) put(parent string, c *cgroup) error {
	if pop, err := c.populated(); err == nil && !pop && !c.killed.Load() {
		p.mu.Lock()
		if len(p.free[parent]) < maxPooledCgroups {
			p.free[parent] = append(p.free[parent], c)
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
	}
	return c.remove()
}

// drain removes the pooled cgroups under parent, before parent itself is
// removed.
func (p *cgroupPool) drain(parent string) {
	p.mu.Lock()
	list := p.free[parent]
	delete(p.free, parent)
	p.mu.Unlock()
	for _, c := range list {
		_ = c.remove()
	}
}

// DrainCgroupPool removes the empty cgroups kept for reuse. A service calls
// it when it shuts down, so that it leaves no cgroup behind; cgroups in use
// are not affected, and later commands simply create new ones.
func DrainCgroupPool() error {
	pool.mu.Lock()
	free := pool.free
	pool.free = map[string][]*cgroup{}
	pool.mu.Unlock()
	var errs []error
	for _, list := range free {
		for _, c := range list {
			errs = append(errs, c.remove())
		}
	}
	return errors.Join(errs...)
}
