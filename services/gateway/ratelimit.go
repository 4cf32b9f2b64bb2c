package gateway

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
)

// clientLimiter limits, per client, how often a route anyone may call
// runs: one token bucket (golang.org/x/time/rate) per remote address.
// GET /api/auth/oidc/start uses it, since each start keeps a sign-in in
// the engine's store for ten minutes and the store keeps at most 10,000:
// without a per-client limit one client could fill them and keep everyone
// else from signing in. An IPv6 client is keyed by its /64, which one
// host commonly holds whole.
//
// Memory is bounded: at most max buckets. When a new client would exceed
// it, the buckets that have refilled (their client has been quiet long
// enough to be back at a full burst, so forgetting them changes nothing)
// are dropped; if none has, every bucket is, which at worst gives each
// client one more burst.
type clientLimiter struct {
	every time.Duration
	burst int
	max   int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// newClientLimiter allows each client burst calls at once and one more
// every every, keeping at most max clients' buckets.
func newClientLimiter(every time.Duration, burst, max int) *clientLimiter {
	return &clientLimiter{every: every, burst: burst, max: max, buckets: map[string]*rate.Limiter{}}
}

// clientKey is what r's client is counted under.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String()
	}
	return ip.String()
}

// allow reports whether key may make a call now, and if not, how long
// until it may.
func (l *clientLimiter) allow(key string, now time.Time) (bool, time.Duration) {
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
func (l *clientLimiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.max {
		clear(l.buckets)
	}
}

// limit wraps h so that a client over l's rate is answered 429 Too Many
// Requests with Retry-After.
func (l *clientLimiter) limit(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := l.allow(clientKey(r), time.Now()); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
			writeError(w, codes.ResourceExhausted, "too many sign-ins started from this address; try again in a minute")
			return
		}
		h(w, r)
	}
}
