package session

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
	// ErrPrecondition: the session cannot do this in its current state
	// (its agent state no longer loads, say).
	ErrPrecondition = errors.New("failed precondition")
	// ErrInvalid: the request is malformed.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnavailable: a service the engine depends on cannot be reached.
	ErrUnavailable = errors.New("unavailable")
	// ErrFellBehind: a watcher read too slowly and the events it had not
	// read yet were dropped from the live buffer; it can Attach again from
	// its last sequence.
	ErrFellBehind = errors.New("fell behind the live stream")
	// ErrNotRecorded: the session log could not be written, so the task
	// stopped and what it did after the log's last event is not recorded.
	// It is a kind of ErrUnavailable: the store failed, and the session
	// runs again once the store is back.
	ErrNotRecorded = fmt.Errorf("%w: the session log could not be written", ErrUnavailable)
)

// downstream turns an error of the environment or llm service into the
// session layer's vocabulary.
func downstream(what string, err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return fmt.Errorf("%w: %s: %s", ErrInvalid, what, st.Message())
	case codes.FailedPrecondition, codes.PermissionDenied, codes.Unimplemented:
		return fmt.Errorf("%w: %s: %s", ErrPrecondition, what, st.Message())
	case codes.NotFound:
		return fmt.Errorf("%w: %s: %s", ErrNotFound, what, st.Message())
	case codes.Canceled, codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", what, err)
	default:
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, what, st.Message())
	}
}
