// Package clientlimit limits, per client address, how often a call that
// anyone may make runs: one token bucket (golang.org/x/time/rate) per
// client. It owns the limit on starting a sign-in with the identity
// provider ([OIDCStarts]), which the HTTP gateway applies to
// GET /api/auth/oidc/start and the engine to AuthService.BeginOIDCSignIn:
// each start keeps a sign-in in the engine's store for ten minutes and the
// store keeps at most 10,000, so without a per-client limit one client
// could fill them and keep everyone else from signing in.
package clientlimit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/peer"
)

// A client may start oidcStartBurst sign-ins at once and one more every
// oidcStartEvery: far more than a person needs, and, kept up for the ten
// minutes a sign-in is pending, a few hundred of the engine's 10,000. The
// buckets of at most oidcStartClients clients are kept.
const (
	oidcStartEvery   = 2 * time.Second
	oidcStartBurst   = 30
	oidcStartClients = 10000
)

// OIDCStartsRefused is the answer to a client over the limit of
// [OIDCStarts].
const OIDCStartsRefused = "too many sign-ins started from this address; try again in a minute"

// OIDCStarts returns a limiter of sign-in starts with the identity
// provider, with the defaults above.
func OIDCStarts() *Limiter {
	return New(oidcStartEvery, oidcStartBurst, oidcStartClients)
}

// Limiter keeps one token bucket per client key.
//
// Memory is bounded: at most max buckets. When a new client would exceed
// it, the buckets that have refilled (their client has been quiet long
// enough to be back at a full burst, so forgetting them changes nothing)
// are dropped; if none has, every bucket is, which at worst gives each
// client one more burst.
type Limiter struct {
	every time.Duration
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// New allows each client burst calls at once and one more every every,
// keeping at most max clients' buckets.
func New(every time.Duration, burst, max int) *Limiter {
	return &Limiter{every: every, burst: burst, max: max, buckets: map[string]*rate.Limiter{}}
}

// Key is what a client at ip is counted under: its address, or for IPv6
// its /64, which one host commonly holds whole.
func Key(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr().String()
	}
	return ip.String()
}

// PeerKey is the key of a gRPC call's client, and false when the peer
// has no IP address: the in-process transport (the gateway in front of
// this engine, which limits each of its own clients) or a Unix socket.
func PeerKey(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "", false
	}
	tcp, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return "", false
	}
	ip, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return "", false
	}
	return Key(ip), true
}

// Allow reports whether key may make a call now, and if not, how long
// until it may.
func (l *Limiter) Allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.sweep(now)
		}
		b = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.buckets[key] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, time.Duration((1 - b.TokensAt(now)) * float64(l.every))
}

// sweep drops the buckets that are full again, or all of them when none
// is.
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.max {
		clear(l.buckets)
	}
}
