package failure

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"sync"
	"syscall"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Transport classifies an error that came out of the HTTP client or the
// stream reader rather than from a provider's error body: a cancelled or
// timed-out context, a refused or reset connection, a connection dropped in
// the middle of the body, or an unparsable chunk. ctx is the request's
// context, consulted first because a cancelled context surfaces as many
// different transport errors.
func Transport(ctx context.Context, err error) *Error {
	if fe := Cancelled(ctx); fe != nil {
		return fe
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) || errors.As(err, &typ):
		return Malformed(err, "the provider sent a chunk that is not valid JSON: %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The body ended in the middle of a chunk: the connection was cut.
		return transport(err, "the connection to the provider was cut mid-response")
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return transport(err, "the provider reset the connection")
	case errors.Is(err, syscall.ECONNREFUSED):
		return transport(err, "the provider refused the connection")
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TIMEOUT,
			Message: "the provider did not answer in time", Err: err}
	case errors.Is(err, io.EOF):
		return transport(err, "the provider closed the connection before answering")
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TIMEOUT,
				Message: "the network timed out talking to the provider", Err: err}
		}
		return transport(err, "the network failed talking to the provider")
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) || errors.As(err, &dns) {
		return transport(err, "the network failed talking to the provider")
	}
	return &Error{Status: penguinv1.StopReason_STOP_REASON_FAILED, Code: penguinv1.FailureCode_FAILURE_CODE_UNKNOWN,
		Message: clip(err.Error(), 500), Err: err}
}

// TransportAfter is Transport for an error that may have come after the
// provider began to answer: when it had (status is not 0), the failure
// carries the request id of the response header, so the provider can trace
// the call. The Error is copied before the id is set, because Transport may
// return one that err itself holds.
func TransportAfter(ctx context.Context, err error, status int, header http.Header) *Error {
	fe := Transport(ctx, err)
	if status == 0 {
		return fe
	}
	c := *fe
	c.RequestID = RequestID(header)
	return &c
}

func transport(err error, msg string) *Error {
	return &Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TRANSPORT,
		Message: msg + ": " + clip(err.Error(), 300), Err: err}
}

// The context-overflow and quota wordings of OpenAI-compatible providers and
// Anthropic. They are deliberately narrow: a false positive would turn a
// retryable failure into one the engine answers by compacting, or a rate
// limit into a hard stop.
var (
	structuredOverflow = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)(?:^|[^a-z0-9])context[\s_-](?:length|window)[\s_-](?:exceed(?:ed|s)?|overflow(?:ed)?|limit[\s_-]exceeded)(?:$|[^a-z0-9])`)
	})
	maxContext = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:maximum|max)(?:\s+(?:allowed|supported))?\s+context\s+(?:length|window)\b`)
	})
	tooLargeForContext = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:request|prompt|input|messages?)\s+(?:is\s+|are\s+)?too\s+(?:large|long)\s+for\s+(?:(?:this|the)\s+)?(?:model(?:'s)?\s+)?(?:context(?:\s+window)?|model)\b`)
	})
	exceedsContext = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\b(?:input|prompt|request|messages?)\b.{0,40}\b(?:exceed(?:s|ed)?|overflows?|is\s+larger\s+than)\b.{0,40}\b(?:the\s+)?(?:model(?:'s)?\s+)?context(?:\s+(?:length|window))?\b`)
	})
	promptTooLong = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\bprompt is too long\b`) })

	quotaPatterns = sync.OnceValue(func() []*regexp.Regexp {
		return []*regexp.Regexp{
			regexp.MustCompile(`(?i)\binsufficient[\s_-]+(?:quota|balance|credits?)\b`),
			regexp.MustCompile(`(?i)\b(?:quota|usage[\s_-]+limit)[\s_-]+(?:exceeded|exhausted|reached)\b`),
			regexp.MustCompile(`(?i)\bexceed(?:ed|s)?[\s_-]+(?:(?:your|the)[\s_-]+)?(?:current[\s_-]+)?quota\b`),
			regexp.MustCompile(`(?i)\b(?:balance|credits?)[\s_-]+(?:exhausted|depleted)\b`),
			regexp.MustCompile(`(?i)\bout[\s_-]+of[\s_-]+(?:credits?|budget)\b`),
			regexp.MustCompile(`(?i)\bcredit balance is too low\b`),
		}
	})
)

// IsContextOverflow reports whether a provider's error text says the request
// exceeded the model's context window.
func IsContextOverflow(detail string) bool {
	return structuredOverflow().MatchString(detail) || maxContext().MatchString(detail) ||
		tooLargeForContext().MatchString(detail) || exceedsContext().MatchString(detail) || promptTooLong().MatchString(detail)
}

// IsQuota reports whether a provider's error text says the account's quota,
// balance or credits are exhausted, as opposed to a transient rate limit.
func IsQuota(detail string) bool {
	for _, re := range quotaPatterns() {
		if re.MatchString(detail) {
			return true
		}
	}
	return false
}
