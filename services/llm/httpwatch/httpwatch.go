// Package httpwatch sits between the provider SDKs and net/http. The SDKs
// hide what the llm service needs to classify a failure and to notice a
// stalled stream: the response headers (Retry-After, the provider's request
// id), whether the request ever left the process, and when the last byte
// arrived. A [Doer] records those facts into the [Exchange] carried by the
// request's context, and adds the route's extra headers, so every adapter
// gets them the same way whichever SDK it uses.
package httpwatch

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/penguin-agent/penguin/services/llm/failure"
)

// Exchange records one provider request as seen on the wire. It is safe for
// concurrent use: the SDK's goroutine writes it while the adapter reads it.
type Exchange struct {
	sent     atomic.Bool
	complete atomic.Bool
	mu       sync.Mutex
	status   int
	header   http.Header
	activity func()
}

// NewExchange returns an Exchange that calls activity (when not nil) every
// time bytes of the response body arrive, so an idle watchdog can be fed.
func NewExchange(activity func()) *Exchange { return &Exchange{activity: activity} }

// Sent reports whether the request was handed to the HTTP client: false
// means the SDK rejected it before any provider I/O.
func (e *Exchange) Sent() bool { return e.sent.Load() }

// Response returns the status and headers of the response, zero and nil
// when none arrived.
func (e *Exchange) Response() (int, http.Header) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status, e.header
}

// Complete records that the response was read to its logical end (the
// provider's end marker). Closing the body then reads what little is left
// (the chunked-encoding terminator), so the connection goes back to the
// pool instead of being torn down; an SDK that stops at its end marker
// would otherwise cost every request a new connection.
func (e *Exchange) Complete() { e.complete.Store(true) }

type exchangeKey struct{}

// With returns ctx carrying ex for the [Doer].
func With(ctx context.Context, ex *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

func from(ctx context.Context) *Exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return ex
}

// Doer is an HTTP client for the SDKs (both take any value with a Do
// method). It sets the route's extra headers, then records the exchange.
type Doer struct {
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
	// Headers are set on every request, after the SDK's own, so a route can
	// add or override headers (an OpenRouter title, a gateway's key header).
	Headers http.Header
}

// Do sends req.
func (d *Doer) Do(req *http.Request) (*http.Response, error) {
	for k, vs := range d.Headers {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	ex := from(req.Context())
	if ex != nil {
		ex.sent.Store(true)
		if ex.activity != nil {
			ex.activity()
		}
	}
	c := d.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil || ex == nil {
		return resp, err
	}
	ex.mu.Lock()
	ex.status, ex.header = resp.StatusCode, resp.Header
	ex.mu.Unlock()
	if ex.activity != nil {
		ex.activity()
	}
	resp.Body = &activityBody{ReadCloser: resp.Body, touch: ex.activity, ex: ex}
	return resp, nil
}

// activityBody reports every successful read of a response body, and
// drains a completed response on Close.
type activityBody struct {
	io.ReadCloser
	touch func()
	ex    *Exchange
}

// Drain bounds: the rest of a completed stream is a few bytes already on
// the way, so anything bigger or slower is not worth a connection.
const (
	drainBytes = 4 << 10
	drainWait  = 100 * time.Millisecond
)

// Read reads and reports activity.
func (b *activityBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.touch != nil {
		b.touch()
	}
	return n, err
}

// Close drains a completed response (bounded in bytes and time), so its
// connection can be reused, then closes it.
func (b *activityBody) Close() error {
	if b.ex.complete.Load() {
		stop := time.AfterFunc(drainWait, func() { _ = b.ReadCloser.Close() })
		_, _ = io.Copy(io.Discard, io.LimitReader(b.ReadCloser, drainBytes))
		stop.Stop()
	}
	return b.ReadCloser.Close()
}

// Watchdog cancels a context when no activity is reported for its idle
// timeout, with [failure.ErrIdleTimeout] as the cause. Activity is a single
// atomic store, cheap enough to report on every body read; the timer only
// re-arms when it fires early.
type Watchdog struct {
	idle   time.Duration
	last   atomic.Int64
	timer  *time.Timer
	cancel context.CancelCauseFunc
	start  time.Time
}

// NewWatchdog returns a context that is cancelled after idle without
// activity, and the watchdog that is fed with [Watchdog.Touch]. With idle
// zero or less it never fires. Stop must be called when the request ends.
func NewWatchdog(ctx context.Context, idle time.Duration) (context.Context, *Watchdog) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watchdog{idle: idle, cancel: cancel, start: time.Now()}
	if idle > 0 {
		w.timer = time.AfterFunc(idle, w.fire)
	}
	return ctx, w
}

// Touch records activity now.
func (w *Watchdog) Touch() {
	if w.timer != nil {
		w.last.Store(int64(time.Since(w.start)))
	}
}

func (w *Watchdog) fire() {
	quiet := time.Since(w.start) - time.Duration(w.last.Load())
	if quiet >= w.idle {
		w.cancel(failure.ErrIdleTimeout)
		return
	}
	w.timer.Reset(w.idle - quiet)
}

// Stop releases the timer and the context.
func (w *Watchdog) Stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel(context.Canceled)
}
