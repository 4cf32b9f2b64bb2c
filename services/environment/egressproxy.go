package environment

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/penguin-agent/penguin/services/environment/egress"
)

// egressProxy is the service's HTTP proxy for environments with proxied
// network access, on a Unix socket in a private directory; each such
// environment's init forwards its loopback's proxy port there. It starts
// with the first such environment and stops with the service.
type egressProxy struct {
	allow []netip.Prefix

	mu     sync.Mutex
	path   string
	dir    string
	server *http.Server
	closed bool
}

// socket returns the proxy's socket, starting the proxy the first time.
func (p *egressProxy) socket() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", errors.New("the service is shutting down")
	}
	if p.server != nil {
		return p.path, nil
	}
	// A short path: a Unix socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "penguin-egress-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "proxy.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		os.RemoveAll(dir)
		return "", err
	}
	p.server = &http.Server{Handler: egress.NewProxy(egress.Options{Allow: p.allow}), ReadHeaderTimeout: 30 * time.Second}
	p.path, p.dir = path, dir
	go func() { _ = p.server.Serve(l) }()
	return path, nil
}

// close stops the proxy, cutting its connections, and removes its socket.
func (p *egressProxy) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.server != nil {
		_ = p.server.Close()
		os.RemoveAll(p.dir)
	}
}
