//go:build linux

package netns

import (
	"io"
	"net"
	"sync"
)

// Forward makes target, an address of the root namespace such as
// PostgreSQL on 127.0.0.1:5432, reachable from every host of the network:
// it listens on a free port of the gateway address and copies each
// connection to a new connection to target. It returns the address hosts
// dial. The forwarder, and every connection through it, closes when the
// test ends.
func (n *Network) Forward(target string) string {
	n.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(n.Gateway().String(), "0"))
	if err != nil {
		n.t.Fatalf("netns: forward %s: %v", target, err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	n.t.Cleanup(f.close)
	return ln.Addr().String()
}

// forwarder copies connections from ln to target.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func (f *forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

// track records c so close can end it; it reports false (closing c) once
// the forwarder is closed.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// pipe copies between c and a new connection to the target until either
// side closes.
func (f *forwarder) pipe(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	if !f.track(up) {
		return
	}
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so the other direction can finish its last bytes.
		if t, ok := dst.(*net.TCPConn); ok {
			_ = t.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// close stops accepting and ends every connection.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	f.wg.Wait()
}
