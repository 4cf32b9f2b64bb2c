package session

import "errors"

// Errors the session layer reports; the gRPC layer maps them (and the
// store's errors) to status codes.
var (
	// ErrNotFound: the session, or the thing asked about in it, does not
	// exist.
	ErrNotFound = errors.New("not found")
	// ErrBusy: the session is running a task (or a compaction) already.
	ErrBusy = errors.New("session busy")
	// ErrNotRunning: the session has no task to steer, abort or approve.
	ErrNotRunning = errors.New("no task running")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnavailable: a service the engine depends on cannot be reached.
	ErrUnavailable = errors.New("unavailable")
	// ErrFellBehind: a watcher read too slowly and the events it had not
	// read yet were dropped from the live buffer; it can Attach again from
	// its last sequence.
	ErrFellBehind = errors.New("fell behind the live stream")
)
