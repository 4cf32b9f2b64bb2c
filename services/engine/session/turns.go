package session

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// turnSpanName names the span of one turn in traces.
const turnSpanName = "engine.turn"

// turnObserver makes each turn of a task one trace: a root span that the
// model request and the tool calls of the turn hang below (the gRPC
// client handlers carry it to the llm and environment services), linked
// to the Run call that started the task. It also counts turns and
// retries. It implements loop.TurnObserver.
type turnObserver struct {
	tracer  trace.Tracer
	metrics *metrics
	session string
	model   *penguinv1.ModelRef
	// run is the span of the Run call that started the task, if any: a
	// task outlives its call, so turns link to it rather than hang below.
	run trace.SpanContext
}

// StartTurn implements loop.TurnObserver.
func (o *turnObserver) StartTurn(ctx context.Context, n int) (context.Context, func(loop.TurnEnd)) {
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("penguin.session_id", o.session),
			attribute.Int("penguin.turn", n),
			attribute.String("penguin.llm.provider", o.model.GetProvider()),
			attribute.String("gen_ai.request.model", o.model.GetModelId()),
		),
	}
	if o.run.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: o.run}))
	}
	ctx, span := o.tracer.Start(ctx, turnSpanName, opts...)
	start := time.Now()
	return ctx, func(e loop.TurnEnd) {
		o.metrics.turnEnded(e.Status, e.Retried, time.Since(start))
		span.SetAttributes(
			attribute.String("penguin.turn.status", enumword.Word(e.Status)),
			attribute.Int("penguin.turn.attempts", len(e.Retried)+1),
			attribute.Int("penguin.turn.tool_calls", e.ToolCalls),
		)
		switch e.Status {
		case penguinv1.StopReason_STOP_REASON_COMPLETED, penguinv1.StopReason_STOP_REASON_ABORTED:
		default:
			span.SetStatus(codes.Error, enumword.Word(e.Status))
		}
		span.End()
	}
}
