// Package stream holds the provider-neutral shape of one model call inside
// the llm service: the validated [Request], the [Streamer] that answers it by
// emitting OmniMessages and returning one LLMOutcome, and the [Middleware]
// chain that wraps every call (the reference's llm/stream waterfall).
//
// Adapters, middleware and the gRPC handler all meet here, so none of them
// imports another: the handler builds a Request, runs it through
// Chain(dispatch, middleware...), and relays what is emitted.
package stream

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Emit hands one message of the answer to the consumer. It returns an error
// when the consumer is gone (the client hung up); the streamer then stops
// reading from the provider and returns, since nobody will see the rest.
// Emit is called from one goroutine at a time.
type Emit func(*penguinv1.OmniMessage) error

// Streamer answers one model request. It emits partials, complete messages
// and token usage, in the contract's order, and returns how the request
// ended. It never returns nil and never panics on a provider failure:
// failures are outcomes. Every segment it opens is closed before it returns.
type Streamer interface {
	Stream(ctx context.Context, req *Request, emit Emit) *penguinv1.LLMOutcome
}

// StreamerFunc adapts a function to a [Streamer].
type StreamerFunc func(ctx context.Context, req *Request, emit Emit) *penguinv1.LLMOutcome

// Stream calls f.
func (f StreamerFunc) Stream(ctx context.Context, req *Request, emit Emit) *penguinv1.LLMOutcome {
	return f(ctx, req, emit)
}

// Middleware wraps a Streamer. A middleware may observe the call (wrap emit,
// look at the outcome), change how it runs (wrap ctx) or short-circuit it
// (answer without calling next). It must not change the request: requests
// are a pure function of the session log, so every replica and every retry
// sends the same thing.
type Middleware func(next Streamer) Streamer

// Chain wraps s in the middleware, the first one outermost: Chain(s, a, b)
// runs a, then b, then s.
func Chain(s Streamer, mw ...Middleware) Streamer {
	for i := len(mw) - 1; i >= 0; i-- {
		s = mw[i](s)
	}
	return s
}

// Request is one validated, provider-neutral model request. The gRPC
// handler builds it; adapters translate it to their wire format.
type Request struct {
	// Provider is the route that serves the request.
	Provider string
	// Model is the model id sent upstream.
	Model string
	// Spec describes the model as the providers configuration lists it;
	// the zero value (Listed false) when the model is not listed.
	Spec ModelSpec
	// Messages are the history followed by the new messages: complete model
	// messages only, in order, already checked (every tool_call_output
	// answers an earlier tool_call).
	Messages []*penguinv1.OmniMessage
	// Tools are the tools the model may call.
	Tools []*penguinv1.ToolDefinition
	// System is the system prompt; empty for none.
	System string
	// Thinking is the requested thinking level.
	Thinking penguinv1.ThinkingLevel
	// MaxTokens is the output cap to send: the caller's (or the model's)
	// max_tokens, capped by the room left in the context window. Zero means
	// the provider's default.
	MaxTokens int64
	// OutputRoom is the room the context window leaves for output after the
	// estimated input and a safety margin; zero when the window is unknown.
	// An adapter that must send a max_tokens of its own choosing caps it by
	// this.
	OutputRoom int64
	// InputEstimate is the estimated input size in tokens.
	InputEstimate int64
}

// ModelSpec describes one model of a provider route, for discovery and for
// the per-request limits. The list is not a whitelist: a model that is not
// listed is still served, with a zero ModelSpec.
type ModelSpec struct {
	// ID is the model id sent upstream.
	ID string
	// Listed reports whether the providers configuration lists the model.
	Listed bool
	// ContextWindow is the context window in tokens; zero when unknown.
	ContextWindow int64
	// MaxTokens is the model's default (and largest) output; zero when
	// unknown.
	MaxTokens int64
	// NoVision marks a model that does not take images. The zero value
	// takes images, as the reference defaults vision to true.
	NoVision bool
	// Thinking maps the thinking levels the model takes to the wire value
	// the adapter sends for each. Nil means unknown: the adapter's default
	// mapping applies. An empty, non-nil map means the model does not think.
	Thinking ThinkingLevels
}

// ThinkingLevels maps thinking levels to adapter wire values (a reasoning
// effort name, a thinking budget).
type ThinkingLevels map[penguinv1.ThinkingLevel]string
