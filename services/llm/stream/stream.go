// Package stream holds the provider-neutral shape of one model call inside
// the llm service: the validated [Request], the [Streamer] that answers it by
// emitting OmniMessages and returning one LLMOutcome, and the [Middleware]
// chain that wraps every call, each middleware handing the call on to the
// next (a waterfall).
//
// Adapters, middleware and the gRPC handler all meet here, so none of them
// imports another: the handler builds a Request, runs it through
// Chain(dispatch, middleware...), and relays what is emitted.
package stream

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
)

// Emit hands one message of the answer to the consumer. It returns an error
// when the consumer is gone (the client hung up); the streamer then stops
// reading from the provider and returns, since nobody will see the rest.
// Emit is called from one goroutine at a time.
//
// The message is the consumer's once emitted: the emitter neither changes
// nor reads it afterwards, and keeps no part of it (a submessage, a byte
// slice) that it changes or reads later, because the gRPC handler hands
// the frames over to an in-process caller without a copy
// (grpcserver.HandOver).
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
// sends the same thing; and the request's messages and tools are the
// caller's own, shared with an in-process caller that keeps reading them
// (see Request). What it emits and the outcome it returns are the
// caller's, as [Emit] says: it keeps a copy of what it needs from them once
// the call has ended.
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
//
// Its messages and tools are those of the StreamGenerateRequest, which an
// in-process caller shares rather than copies (the llm service is a
// grpcserver.RequestReader): nothing that handles a Request changes them,
// nor their slices, in place; what must differ is built anew.
type Request struct {
	// Provider is the route that serves the request.
	Provider string
	// Model is the model id sent upstream.
	Model string
	// Spec describes the model (catalog and providers file); the zero
	// value with the id filled in (Known false) when neither knows it.
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
	// Temperature is the sampling temperature to send; nil leaves the
	// model's default. The service clears it for a model that takes none.
	Temperature *float32
	// Adapter serves the route: captured when the request was validated,
	// so that a reload of the routes in between cannot pair one route's
	// model facts with another's adapter.
	Adapter Streamer
}

// ModelSpec describes one model of a provider route, for discovery and for
// shaping each request. It comes from the catalog, with the providers
// file's fields laid on top. The list is not a whitelist: a model that is
// not known is still served, with a zero ModelSpec (Known false) and
// conservative defaults.
type ModelSpec struct {
	// ID is the model id sent upstream.
	ID string
	// Known reports whether the catalog or the providers file describes
	// the model.
	Known bool
	// Name is the display name.
	Name string
	// ContextWindow is the context window in tokens; zero when unknown.
	ContextWindow int64
	// MaxTokens is the model's largest output, also the default output
	// cap; zero when unknown.
	MaxTokens int64
	// NoVision marks a model that does not take images. The zero value
	// takes images: a model the catalog does not describe is assumed to
	// see, so a request with an image is sent to it rather than refused.
	NoVision bool
	// Reasoning reports whether the model reasons.
	Reasoning bool
	// Tools reports whether the model calls tools.
	Tools bool
	// NoTools marks a model that the catalog or the providers file says
	// cannot call tools: a request that offers it tools is refused before
	// it is sent. The zero value calls tools, as for NoVision.
	NoTools bool
	// Temperature reports whether the model takes a temperature.
	Temperature bool
	// Thinking maps the thinking levels to the wire value the adapter
	// sends for each (an effort name, a budget in tokens, catalog.WireOn or
	// catalog.WireOff), in the route's reasoning dialect. Empty means no
	// reasoning parameter is ever sent: the model does not reason, its
	// reasoning cannot be controlled, or it is not known.
	Thinking ThinkingLevels
	// BudgetMin is the smallest thinking budget the model takes; zero
	// when it takes none or the bound is not known.
	BudgetMin int64
	// Toggle reports whether the model's reasoning can be switched on and
	// off (a provider whose switch is a field of its own, such as
	// DashScope's enable_thinking, sends it only then).
	Toggle bool
	// Cost is the price; nil when unknown.
	Cost *catalog.Cost
	// Status is "deprecated", "beta" or "alpha"; empty for a current
	// model.
	Status string
}

// ThinkingLevels maps thinking levels to adapter wire values (a reasoning
// effort name, a thinking budget).
type ThinkingLevels map[penguinv1.ThinkingLevel]string
