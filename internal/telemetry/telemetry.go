// Package telemetry sets up OpenTelemetry tracing for a penguin process.
//
// Tracing is configured by the standard OTEL_* environment variables, so an
// operator who knows OpenTelemetry needs to learn nothing new: when
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT is set,
// spans are batched and exported over OTLP/gRPC (the exporter reads the
// other OTEL_EXPORTER_OTLP_* variables, such as headers and timeouts, itself);
// otherwise tracing is a no-op that costs next to nothing. OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none turn export off even when an endpoint is set.
//
// The package keeps no state of its own. [Setup] returns the providers for
// the caller to pass on (for example to grpcserver.Options), and installs
// them as OpenTelemetry's global providers only when asked to.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options describe the process being traced.
type Options struct {
	// ServiceName names the process in traces, for example "penguin-llm".
	// OTEL_SERVICE_NAME, when set, overrides it.
	ServiceName string
	// ServiceVersion is recorded as service.version.
	ServiceVersion string
	// SetGlobal also installs the tracer provider and propagator as
	// OpenTelemetry's globals, for libraries that only look there.
	SetGlobal bool
}

// Telemetry holds the providers a process uses. Its zero value is not
// usable; get one from [Setup].
type Telemetry struct {
	// TracerProvider creates tracers; it is a no-op provider when export
	// is off.
	TracerProvider trace.TracerProvider
	// Propagator carries trace context across process boundaries, as W3C
	// traceparent/tracestate and baggage headers.
	Propagator propagation.TextMapPropagator
	// Exporting reports whether spans are exported anywhere.
	Exporting bool

	shutdown func(context.Context) error
}

// Setup builds the tracer provider the environment asks for. The caller
// must call [Telemetry.Shutdown] before the process exits, so that buffered
// spans are flushed.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	t := &Telemetry{
		Propagator: Propagator(),
		shutdown:   func(context.Context) error { return nil },
	}
	if !exportRequested() {
		t.TracerProvider = noop.NewTracerProvider()
	} else {
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("create OTLP trace exporter: %w", err)
		}
		res, err := newResource(ctx, opts)
		if err != nil {
			return nil, errors.Join(err, exp.Shutdown(ctx))
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.TracerProvider = tp
		t.Exporting = true
		t.shutdown = tp.Shutdown
	}
	if opts.SetGlobal {
		otel.SetTracerProvider(t.TracerProvider)
		otel.SetTextMapPropagator(t.Propagator)
	}
	return t, nil
}

// Shutdown flushes buffered spans and stops the exporter, giving up when
// ctx ends. It is safe to call on a no-op setup.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil {
		return fmt.Errorf("shut down tracing: %w", err)
	}
	return nil
}

// Propagator returns the propagator every penguin process uses: W3C
// traceparent/tracestate and baggage headers.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// exportRequested reports whether the OTEL_* environment asks for spans
// to be exported.
func exportRequested() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// newResource describes this process. Attributes from OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES come last, so they win.
func newResource(ctx context.Context, opts Options) (*resource.Resource, error) {
	var attrs []attribute.KeyValue
	if opts.ServiceName != "" {
		attrs = append(attrs, attribute.String("service.name", opts.ServiceName))
	}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", opts.ServiceVersion))
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("describe trace resource: %w", err)
	}
	return res, nil
}
