package middleware

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// Tracing opens one span per model call, a child of the gRPC server span,
// with the provider, model, outcome status and failure code as attributes
// (and token counts when the provider reported them), so a slow or failing
// request can be found from a trace. It records no content.
func Tracing(tp trace.TracerProvider) stream.Middleware {
	tracer := tp.Tracer("github.com/penguin-agent/penguin/services/llm")
	return func(next stream.Streamer) stream.Streamer {
		return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
			ctx, span := tracer.Start(ctx, "llm.stream", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
				attribute.String("penguin.llm.provider", req.Provider),
				attribute.String("penguin.llm.model", req.Model),
				attribute.String("gen_ai.request.model", req.Model),
				attribute.Int64("gen_ai.request.max_tokens", req.MaxTokens),
				attribute.Int("penguin.llm.messages", len(req.Messages)),
			))
			defer span.End()
			if !span.IsRecording() {
				// Nothing keeps what is set on this span (no exporter,
				// or not sampled): the observation and the attributes
				// below were most of what a model call allocated here.
				return next.Stream(ctx, req, emit)
			}
			o := &observation{start: time.Now()}
			out := next.Stream(ctx, req, observe(emit, o))
			span.SetAttributes(
				attribute.String("penguin.llm.status", statusName(out.GetStatus())),
				attribute.String("penguin.llm.code", codeName(out.GetCode())),
				attribute.Int("penguin.llm.frames", o.frames),
			)
			if o.firstFrame > 0 {
				span.SetAttributes(attribute.Int64("penguin.llm.first_frame_ms", o.firstFrame.Milliseconds()))
			}
			if out.GetHttpStatus() != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", int(out.GetHttpStatus())))
			}
			if id := out.GetProviderRequestId(); id != "" {
				span.SetAttributes(attribute.String("penguin.llm.provider_request_id", id))
			}
			if u := o.usage; u != nil {
				span.SetAttributes(
					attribute.Int64("gen_ai.usage.output_tokens", u.output),
					attribute.Int64("gen_ai.usage.input_tokens", u.total-u.output),
					attribute.Int64("penguin.llm.cache_read_tokens", u.cacheRead),
					attribute.Int64("penguin.llm.cache_write_tokens", u.cacheWrite),
				)
			}
			switch out.GetStatus() {
			case penguinv1.StopReason_STOP_REASON_COMPLETED, penguinv1.StopReason_STOP_REASON_ABORTED:
			default:
				span.SetStatus(codes.Error, statusName(out.GetStatus())+": "+codeName(out.GetCode()))
			}
			return out
		})
	}
}
