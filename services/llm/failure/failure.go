// Package failure turns everything that can go wrong in a provider call into
// a typed *Error and then into an LLMOutcome: HTTP statuses, provider error
// bodies, broken connections, stalled or truncated streams, unparsable
// chunks, and the caller's own cancellation. It is the one place that decides
// what is transient (timeout, malformed), what needs a person (auth), and
// what was the caller's choice (aborted), so every adapter classifies alike.
package failure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Sentinel causes for the contexts the service itself ends, so that a
// deadline set by the gateway reads as a timeout and not as the caller
// hanging up.
var (
	// ErrRequestTimeout ends a request that ran past its request timeout.
	ErrRequestTimeout = errors.New("request timeout")
	// ErrIdleTimeout ends a stream that sent nothing for the idle timeout.
	ErrIdleTimeout = errors.New("idle stream timeout")
)

// Error is a classified provider failure: the outcome status, the typed
// code, and the facts the engine needs to react (HTTP status, Retry-After,
// the provider's request id). It wraps the underlying error for %w chains.
type Error struct {
	// Status is the outcome status: timeout, malformed, aborted, failed or
	// auth.
	Status penguinv1.StopReason
	// Code is the provider-neutral failure class.
	Code penguinv1.FailureCode
	// Message is the human-readable detail.
	Message string
	// HTTPStatus is the provider's HTTP status; zero when there was none.
	HTTPStatus int
	// RetryAfter is the wait the provider asked for; zero when absent.
	RetryAfter time.Duration
	// RequestID is the provider's request id; empty when absent.
	RequestID string
	// Permanent marks a deterministic rejection before any provider I/O:
	// it fails the same way on every attempt.
	Permanent bool
	// Err is the underlying error, if any.
	Err error
}

// Error returns the detail with the code, for logs and %w chains.
func (e *Error) Error() string {
	code := strings.TrimPrefix(e.Code.String(), "FAILURE_CODE_")
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("%s (HTTP %d): %s", code, e.HTTPStatus, e.Message)
	}
	return fmt.Sprintf("%s: %s", code, e.Message)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Outcome renders the failure as the last frame of a stream.
func (e *Error) Outcome() *penguinv1.LLMOutcome {
	return &penguinv1.LLMOutcome{
		Status:            e.Status,
		Message:           e.Message,
		Code:              e.Code,
		HttpStatus:        int32(e.HTTPStatus),
		RetryAfterMs:      e.RetryAfter.Milliseconds(),
		ProviderRequestId: e.RequestID,
		Permanent:         e.Permanent,
	}
}

// New returns a failure with the given class and detail.
func New(status penguinv1.StopReason, code penguinv1.FailureCode, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unsupported returns the permanent failure for an option the model cannot
// take (such as a thinking level), reported before any provider I/O.
func Unsupported(format string, args ...any) *Error {
	e := New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNSUPPORTED, format, args...)
	e.Permanent = true
	return e
}

// Completed returns the outcome of a request that ended normally.
func Completed() *penguinv1.LLMOutcome {
	return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}
}

// Cancelled classifies a context that is done: a cause set by the service
// (request or idle timeout, an injected *Error) wins; anything else means
// the caller went away, which is an abort. It returns nil while ctx is
// live.
func Cancelled(ctx context.Context) *Error {
	if ctx.Err() == nil {
		return nil
	}
	cause := context.Cause(ctx)
	var fe *Error
	switch {
	case errors.As(cause, &fe):
		return fe
	case errors.Is(cause, ErrRequestTimeout):
		return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TIMEOUT,
			Message: "the request ran past its request timeout", Err: cause}
	case errors.Is(cause, ErrIdleTimeout):
		return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TIMEOUT,
			Message: "the provider sent nothing for the idle-stream timeout", Err: cause}
	case errors.Is(cause, context.DeadlineExceeded):
		// A deadline the caller set (a gRPC deadline) is still a timeout:
		// the request did not finish in the time it was given.
		return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TIMEOUT,
			Message: "the caller's deadline passed", Err: cause}
	default:
		return &Error{Status: penguinv1.StopReason_STOP_REASON_ABORTED, Code: penguinv1.FailureCode_FAILURE_CODE_ABORTED,
			Message: "the caller cancelled the request", Err: cause}
	}
}

// credentialWording is what makes a 403 an explicit credential failure:
// the provider says the key or token is what it refuses, or that the key
// lacks a permission (OpenAI's "insufficient permissions … Missing
// scopes", Anthropic's permission_error type).
var credentialWording = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:api[\s_-]?key|credentials?|authenticat\w*|unauthori[sz]ed|(?:access|bearer|auth)[\s_-]?token|invalid[\s_-]token|permission_error|insufficient[\s_-]permissions?|missing[\s_-]scopes?)\b`)
})

// HTTP classifies a provider's HTTP error response. detail is the provider's
// error text (message, type and code joined), used only to tell a
// context-window overflow or an exhausted quota from other rejections.
func HTTP(status int, header http.Header, detail string, now time.Time) *Error {
	e := &Error{HTTPStatus: status, Message: httpMessage(status, detail), RequestID: RequestID(header), RetryAfter: RetryAfter(header, now)}
	switch {
	case status == http.StatusUnauthorized || (status == http.StatusForbidden && credentialWording().MatchString(detail)):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH
	case status == http.StatusForbidden:
		// A bare 403 (a region block, a gateway's policy page, an
		// account flag) is not an explicit credential failure: it is
		// failed, which the engine's reconnect ladder retries like any
		// other rejection; only a credential failure needs a person.
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN
	case status == http.StatusTooManyRequests:
		if IsQuota(detail) {
			e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA
		} else {
			e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT
		}
	case status == http.StatusPaymentRequired:
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA
	case status == http.StatusRequestTimeout:
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TIMEOUT
	case status >= 500:
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER
	case IsContextOverflow(detail):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED
	case IsQuota(detail):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA
	case status >= 400:
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST
	default:
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN
	}
	return e
}

func httpMessage(status int, detail string) string {
	text := http.StatusText(status)
	if text == "" {
		text = "HTTP " + strconv.Itoa(status)
	}
	detail = strings.TrimSpace(detail)
	if detail == "" {
		return fmt.Sprintf("provider answered %d %s", status, text)
	}
	return fmt.Sprintf("provider answered %d %s: %s", status, text, clip(detail, 500))
}

// InBand classifies an error the provider sent inside a stream that had
// already begun with HTTP 200 (an SSE error event). errType is the
// provider's error type (Anthropic's "overloaded_error", OpenAI's "type" or
// "code"); detail is the message.
func InBand(errType, detail string) *Error {
	msg := "provider sent an error in the stream"
	if t := strings.TrimSpace(errType); t != "" {
		msg += " (" + t + ")"
	}
	if d := strings.TrimSpace(detail); d != "" {
		msg += ": " + clip(d, 500)
	}
	e := &Error{Message: msg}
	all := errType + " " + detail
	lower := strings.ToLower(errType)
	switch {
	case strings.Contains(lower, "authentication") || strings.Contains(lower, "permission") || strings.Contains(lower, "invalid_api_key"):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH
	case IsQuota(all) || strings.Contains(lower, "billing"):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA
	case strings.Contains(lower, "rate_limit"):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT
	case strings.Contains(lower, "timeout"):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TIMEOUT
	case IsContextOverflow(all):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED
	case strings.Contains(lower, "invalid_request") || strings.Contains(lower, "not_found") || strings.Contains(lower, "too_large"):
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST
	default:
		// overloaded_error, api_error, server_error and unknown types: the
		// provider failed mid-answer, which is transient like a 5xx.
		e.Status, e.Code = penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER
	}
	return e
}

// Malformed returns the failure for a response that could not be parsed or
// that ended before the provider's end marker.
func Malformed(err error, format string, args ...any) *Error {
	return &Error{Status: penguinv1.StopReason_STOP_REASON_MALFORMED, Code: penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE,
		Message: fmt.Sprintf(format, args...), Err: err}
}

// RequestID returns the provider's request id from the response headers:
// x-request-id (OpenAI and most compatible servers) or request-id
// (Anthropic).
func RequestID(h http.Header) string {
	if h == nil {
		return ""
	}
	if v := h.Get("X-Request-Id"); v != "" {
		return v
	}
	return h.Get("Request-Id")
}

// RetryAfter returns the wait a provider asked for: retry-after-ms in
// milliseconds, or Retry-After as delay-seconds (integer or decimal) or an
// HTTP date. It returns zero when the header is absent, unparsable or in
// the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary so the message stays valid UTF-8.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// ConsumerGone returns the abort for a call whose consumer stopped reading
// (emit failed): the rest of the answer has nowhere to go.
func ConsumerGone(err error) *Error {
	return &Error{Status: penguinv1.StopReason_STOP_REASON_ABORTED, Code: penguinv1.FailureCode_FAILURE_CODE_ABORTED,
		Message: "the consumer stopped reading", Err: err}
}

// Keyless refines a credential rejection for a route that has no key
// configured: the fix is to supply one (MISSING_CREDENTIAL), not to correct
// it. Other failures pass through.
func Keyless(e *Error, keyless bool) *Error {
	if keyless && e.Code == penguinv1.FailureCode_FAILURE_CODE_AUTH {
		e.Code = penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL
		e.Message = "no API key is configured for this provider, and it asks for one: " + e.Message
	}
	return e
}
