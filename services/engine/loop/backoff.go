package loop

import (
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Retry is the reconnect ladder of a run: how many times a failed model
// request is sent again, and how long to wait before each retry. It has no
// default of its own: the agent's configuration (agentconfig.RetrySettings)
// owns the numbers, and this type owns the arithmetic.
type Retry struct {
	// MaxRetries is the most reconnects after the first attempt; zero or
	// less means none.
	MaxRetries int
	// Base is the wait before the first reconnect; each next wait doubles.
	Base time.Duration
	// Cap bounds every wait, and a provider's Retry-After is honoured only
	// when it is within it.
	Cap time.Duration
}

// Delay returns the wait before reconnect number n (1-based). A provider's
// Retry-After replaces the computed wait when it is positive and within the
// cap, because the provider knows best when it will take requests again.
func (r Retry) Delay(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 && (r.Cap <= 0 || retryAfter <= r.Cap) {
		return retryAfter
	}
	d := r.Base
	for i := 1; i < n; i++ {
		d *= 2
		if r.Cap > 0 && d >= r.Cap {
			break
		}
	}
	if r.Cap > 0 && d > r.Cap {
		d = r.Cap
	}
	if d < 0 {
		d = 0
	}
	return d
}

// retryable reports whether a model request that ended with outcome is
// worth sending again, the one rule of turns and compactions
// (docs/architecture.md, "The retry ladder"): a timeout, a malformed
// stream or a failure is, unless the request can only fail the same way
// again: refused before it was sent (permanent), or answered by the
// provider with an HTTP 4xx that says the request itself is invalid (an
// unknown model, a parameter the model does not take). Auth failures,
// aborts and completed requests are not.
func retryable(outcome *penguinv1.LLMOutcome) bool {
	switch outcome.GetStatus() {
	case penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.StopReason_STOP_REASON_FAILED:
	default:
		return false
	}
	if outcome.GetPermanent() {
		return false
	}
	invalid := outcome.GetCode() == penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST && outcome.GetHttpStatus() >= 400 && outcome.GetHttpStatus() < 500
	return !invalid
}
