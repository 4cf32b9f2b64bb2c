package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/penguin-agent/penguin/internal/clientlimit"
)

// clientKey is what r's client is counted under by a per-client limit
// (package clientlimit): the key of the address the request came from.
// When that address is one of the trusted proxies, the client is the
// nearest address in X-Forwarded-For that is not: each proxy appends the
// address it was called from, so read from the right, the addresses up to
// and including the first untrusted one were written by trusted proxies,
// and those further left by whoever sent the request, which could be
// anything. Without trusted proxies the header is never read.
func (g *Gateway) clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if g.trustedProxy(ip) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, ok := forwardedAddr(hops[i])
			if !ok {
				break
			}
			ip = hop
			if !g.trustedProxy(ip) {
				break
			}
		}
	}
	return clientlimit.Key(ip)
}

// forwardedAddr parses one entry of X-Forwarded-For: an address, or an
// address with a port as some proxies write it.
func forwardedAddr(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// trustedProxy reports whether ip is one of Options.TrustedProxies.
func (g *Gateway) trustedProxy(ip netip.Addr) bool {
	for _, p := range g.opts.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// limitOIDCStarts wraps h so that a client over the limit of sign-in
// starts (clientlimit.OIDCStarts) is answered 429 Too Many Requests with
// Retry-After.
func (g *Gateway) limitOIDCStarts(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := g.oidcStarts.Allow(g.clientKey(r), time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
			writeError(w, codes.ResourceExhausted, clientlimit.OIDCStartsRefused)
			return
		}
		h(w, r)
	}
}
