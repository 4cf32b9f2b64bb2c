package middleware_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// BenchmarkTracingNotRecording is a model call through the tracing
// middleware of a process without an exporter (a no-op tracer provider,
// as telemetry.Setup gives): what the middleware costs when no span is
// kept.
func BenchmarkTracingNotRecording(b *testing.B) {
	s := middleware.Tracing(noop.NewTracerProvider())(&provider{})
	req := &stream.Request{Provider: "p", Model: "m", MaxTokens: 100}
	emit := func(*penguinv1.OmniMessage) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Stream(context.Background(), req, emit); out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			b.Fatal(out)
		}
	}
}
