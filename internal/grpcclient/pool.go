package grpcclient

import (
	"errors"
	"sync"
)

// Pool keeps one connection per target, opened on first use. The engine
// uses one for the replicas it learns about at run time: environment
// replicas at the addresses they advertise, and other engine replicas it
// forwards calls to. It is safe for concurrent use.
type Pool struct {
	dial func(target string) (Conn, error)

	mu     sync.Mutex
	conns  map[string]Conn
	closed bool
}

// NewPool returns a pool that opens its connections with dial.
func NewPool(dial func(target string) (Conn, error)) *Pool {
	return &Pool{dial: dial, conns: map[string]Conn{}}
}

// errPoolClosed is returned by Get after Close.
var errPoolClosed = errors.New("grpcclient: pool closed")

// Get returns the connection to target, opening it when there is none
// yet. Like [New] it does not wait for the peer: a replica that is down
// fails the first call, not Get.
func (p *Pool) Get(target string) (Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	if c := p.conns[target]; c != nil {
		return c, nil
	}
	c, err := p.dial(target)
	if err != nil {
		return nil, err
	}
	p.conns[target] = c
	return c, nil
}

// Close closes every connection; later calls of Get fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for target, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, target)
	}
	return errors.Join(errs...)
}
