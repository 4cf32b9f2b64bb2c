package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/penguin-agent/penguin/internal/splice"
)

// NewProxy returns an HTTP proxy handler for sandboxed commands whose
// environment has proxied network access: CONNECT tunnels (https and
// anything else over TCP) and plain http requests in absolute form, each
// connection checked when it is dialed exactly as the client's are, so a
// command reaches public addresses and nothing internal (the service's
// own ports, the host's loopback, private and metadata addresses) unless
// o.Allow lists it. NoNetwork refuses everything.
//
// The standard library's httputil.ReverseProxy forwards plain requests;
// CONNECT is a byte copy after the checked dial, which no library would
// shorten.
func NewProxy(o Options) http.Handler {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: o.control}
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		if o.NoNetwork {
			return nil, fmt.Errorf("%w: this environment has no network access", ErrRefused)
		}
		return dialer.DialContext(ctx, network, address)
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  60 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           16,
		IdleConnTimeout:        30 * time.Second,
	}
	forward := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL },
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			refuse(w, err)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodConnect:
			tunnel(w, r, dial)
		case r.URL.IsAbs() && r.URL.Scheme == "http":
			forward.ServeHTTP(w, r)
		default:
			http.Error(w, "this is a forward proxy: send CONNECT, or an http request in absolute form", http.StatusBadRequest)
		}
	})
}

// refuse answers a request whose destination was refused or unreachable.
func refuse(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, ErrRefused) {
		code = http.StatusForbidden
	}
	http.Error(w, "penguin egress proxy: "+err.Error(), code)
}

// tunnel dials the CONNECT target through the checked dialer and copies
// bytes both ways until both sides are done.
func tunnel(w http.ResponseWriter, r *http.Request, dial func(context.Context, string, string) (net.Conn, error)) {
	up, err := dial(r.Context(), "tcp", r.Host)
	if err != nil {
		refuse(w, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "tunnelling is not supported on this connection", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// The reader holds what the client sent after its request, then
	// reads on from the connection.
	splice.Conns(down, buf.Reader, up)
}
