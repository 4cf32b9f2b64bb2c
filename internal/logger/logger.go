// Package logger owns one rule of the whole tree: a component given no
// logger discards its logs. Neither slog.Default nor standard error is
// ever used behind a caller's back, so a library user who passes nothing
// sees nothing, and a server passes the logger it configured. Every
// package's Logger option documents this as "nil discards".
package logger

import "log/slog"

// OrDiscard returns l, or a logger that discards everything when l is
// nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
