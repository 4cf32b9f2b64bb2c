// Package middleware holds the stream middleware the llm service ships: token
// metering (Prometheus), logging (slog), tracing (OpenTelemetry) and fault
// injection for tests. Each wraps one model call as a [stream.Middleware];
// the service composes them in one place, outermost first.
package middleware

import (
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// observation is what the observing middleware learn from one call's frames
// without holding on to any content.
type observation struct {
	start      time.Time
	firstFrame time.Duration // zero until the first frame
	frames     int
	usage      *tokens // the last reported request counts; nil for none
	counts     tokens  // where usage points
}

// tokens are the counts of a request's token usage the middleware read:
// copied from the frame, which is the caller's once emitted (see
// stream.Emit), field by field rather than cloned, which went through
// protobuf's reflection twice a call.
type tokens struct{ total, output, cacheRead, cacheWrite int64 }

// observe wraps emit so the observation sees every frame as it passes.
func observe(emit stream.Emit, o *observation) stream.Emit {
	return func(m *penguinv1.OmniMessage) error {
		o.frames++
		if o.firstFrame == 0 {
			o.firstFrame = max(time.Since(o.start), 1)
		}
		if u := m.GetTokenUsage(); u != nil {
			o.usage = nil
			if r := u.GetRequest(); r != nil {
				o.counts = tokens{total: r.GetTotal(), output: r.GetOutput(), cacheRead: r.GetCacheRead(), cacheWrite: r.GetCacheWrite()}
				o.usage = &o.counts
			}
		}
		return emit(m)
	}
}

// statusName is the trace format's word for a stop reason ("completed",
// …), the one metric labels and logs use.
func statusName(s penguinv1.StopReason) string {
	switch s {
	case penguinv1.StopReason_STOP_REASON_COMPLETED:
		return "completed"
	case penguinv1.StopReason_STOP_REASON_FAILED:
		return "failed"
	case penguinv1.StopReason_STOP_REASON_ABORTED:
		return "aborted"
	case penguinv1.StopReason_STOP_REASON_TIMEOUT:
		return "timeout"
	case penguinv1.StopReason_STOP_REASON_MALFORMED:
		return "malformed"
	case penguinv1.StopReason_STOP_REASON_AUTH:
		return "auth"
	}
	return "unspecified"
}

// codeName is a failure code without its enum prefix ("RATE_LIMIT"), or ""
// for none.
func codeName(c penguinv1.FailureCode) string {
	if c == penguinv1.FailureCode_FAILURE_CODE_UNSPECIFIED {
		return ""
	}
	s := c.String()
	const prefix = "FAILURE_CODE_"
	if len(s) > len(prefix) {
		return s[len(prefix):]
	}
	return s
}
