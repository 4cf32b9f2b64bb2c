// Package audit keeps the audit log: who did what, when, in which project
// (empty for an account or server event), to what, with what detail. A
// [Recorder] appends to the engine's store and keeps the log bounded: the
// newest Keep records, none older than MaxAge.
//
// Nothing secret goes into a record: no password, token, cookie, key or
// code, only ids and short descriptions. A failure to record is logged,
// not returned: the action it records has happened.
//
// Most records come from package access, which knows the caller (its
// Guard.Audit names the caller of a context as the actor); code that
// knows its actor itself calls [Recorder.Record].
package audit

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Defaults of the log's bounds.
const (
	// DefaultKeep is how many records the log keeps.
	DefaultKeep = 100000
	// DefaultMaxAge is how long a record is kept.
	DefaultMaxAge = 365 * 24 * time.Hour
	// pruneEvery is how many records a Recorder appends between two
	// prunings; the log may outgrow Keep by that many.
	pruneEvery = 500
)

// Log is where the records go: the store.
type Log interface {
	AppendAudit(ctx context.Context, r store.AuditRecord) error
	PruneAudit(ctx context.Context, keep int, before time.Time) (int64, error)
}

// Options bound the log.
type Options struct {
	// Keep is how many records to keep; zero means DefaultKeep.
	Keep int
	// MaxAge is how long to keep a record; zero means DefaultMaxAge.
	MaxAge time.Duration
	// Logger receives failures to record; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Recorder appends records. Create it with [New]; it is safe for
// concurrent use.
type Recorder struct {
	log  Log
	opts Options
	lg   *slog.Logger

	mu       sync.Mutex
	appended int
}

// New returns a Recorder writing to l.
func New(l Log, opts Options) *Recorder {
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{log: l, opts: opts, lg: logger.OrDiscard(opts.Logger)}
}

// Record appends r (its At is now when zero), and every so often prunes
// the log to its bounds. A record needs an Action.
func (r *Recorder) Record(ctx context.Context, rec store.AuditRecord) {
	ctx = context.WithoutCancel(ctx)
	if rec.At.IsZero() {
		rec.At = r.opts.Now()
	}
	if err := r.log.AppendAudit(ctx, rec); err != nil {
		r.lg.WarnContext(ctx, "could not write the audit log", "action", rec.Action, "error", err)
		return
	}
	r.mu.Lock()
	r.appended++
	due := r.appended%pruneEvery == 1
	r.mu.Unlock()
	if due {
		r.Prune(ctx)
	}
}

// Prune deletes what is beyond the log's bounds now.
func (r *Recorder) Prune(ctx context.Context) {
	if _, err := r.log.PruneAudit(ctx, r.opts.Keep, r.opts.Now().Add(-r.opts.MaxAge)); err != nil {
		r.lg.WarnContext(ctx, "could not prune the audit log", "error", err)
	}
}
