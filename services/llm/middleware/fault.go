package middleware

import (
	"context"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// Fault is one failure to inject into model calls.
type Fault struct {
	// Match selects the calls; nil selects every call.
	Match func(*stream.Request) bool
	// Times limits the fault to the first Times selected calls; zero means
	// every one.
	Times int
	// Err is the failure. It is required for a cut (AfterFrames > 0); for
	// a short circuit, nil ends the reply as completed.
	Err *failure.Error
	// AfterFrames, when positive, lets that many frames of the real answer
	// through and then cuts the call with Err, as a provider failing
	// mid-answer would: the adapter sees its context end with Err as the
	// cause, closes what it opened and reports Err.
	AfterFrames int
	// Reply, for a short circuit (AfterFrames zero), is emitted instead of
	// calling the provider at all, before Err ends the call.
	Reply []*penguinv1.OmniMessage
}

// FaultInjection returns a middleware that injects the first matching fault
// into each call, for tests of everything above the provider: the engine's
// reconnects, the client's handling of each outcome. A call no fault
// selects runs normally.
func FaultInjection(faults ...Fault) stream.Middleware {
	used := make([]atomic.Int64, len(faults))
	pick := func(req *stream.Request) *Fault {
		for i := range faults {
			f := &faults[i]
			if f.Match != nil && !f.Match(req) {
				continue
			}
			if f.Times > 0 && used[i].Add(1) > int64(f.Times) {
				continue
			}
			return f
		}
		return nil
	}
	return func(next stream.Streamer) stream.Streamer {
		return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
			f := pick(req)
			switch {
			case f == nil:
				return next.Stream(ctx, req, emit)
			case f.AfterFrames > 0:
				return cut(ctx, next, req, emit, f)
			}
			for _, m := range f.Reply {
				// A copy each time: what is emitted is the caller's (see
				// stream.Emit), and the reply may be emitted again.
				if err := emit(proto.CloneOf(m)); err != nil {
					return failure.ConsumerGone(err).Outcome()
				}
			}
			if f.Err == nil {
				return failure.Completed()
			}
			return f.Err.Outcome()
		})
	}
}

func cut(ctx context.Context, next stream.Streamer, req *stream.Request, emit stream.Emit, f *Fault) *penguinv1.LLMOutcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	err := f.Err
	if err == nil {
		err = failure.New(penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, "injected fault")
	}
	frames := 0
	return next.Stream(ctx, req, func(m *penguinv1.OmniMessage) error {
		if e := emit(m); e != nil {
			return e
		}
		if frames++; frames == f.AfterFrames {
			cancel(err)
		}
		return nil
	})
}
