// Package splice copies bytes both ways between two connections: what a
// forwarder does once it has the two ends (the sandbox's loopback proxy
// port and the egress proxy's CONNECT tunnel). It is two io.Copy calls;
// it lives here so that both keep the same half-close behaviour.
package splice

import (
	"io"
	"net"
	"sync"
)

// Conns copies from a to b and from b to a until both directions end.
// aIn reads what a sends: a itself, or a buffer in front of it that holds
// bytes already read. When one direction ends, the write half of its
// destination is closed where the connection has one, so the other side
// sees the end of its input while its answer may still flow back.
func Conns(a net.Conn, aIn io.Reader, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, aIn)
		closeWrite(b)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
