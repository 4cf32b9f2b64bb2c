package telemetry

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/penguin-agent/penguin/internal/testkit"
)

// collector is a real OTLP/gRPC trace receiver on a loopback port.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer

	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans = append(c.spans, req.GetResourceSpans()...)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *collector) received() []*tracepb.ResourceSpans {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), c.spans...)
}

func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return c, "http://" + lis.Addr().String()
}

// clearOTELEnv makes the test independent of the environment it runs in.
// t.Setenv also forbids t.Parallel, which these tests must not use because
// the exporter reads the process environment.
func clearOTELEnv(t *testing.T) {
	for _, k := range []string{
		"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	} {
		t.Setenv(k, "")
	}
}

func TestSetupWithoutEndpointIsNoop(t *testing.T) {
	clearOTELEnv(t)
	ctx := testkit.Context(t, 30*time.Second)
	tel, err := Setup(ctx, Options{ServiceName: "penguin-test"})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Exporting {
		t.Error("Exporting = true with no endpoint set")
	}
	_, span := tel.TracerProvider.Tracer("t").Start(ctx, "op")
	if span.SpanContext().IsValid() || span.IsRecording() {
		t.Error("no-op provider produced a recording span")
	}
	span.End()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSetupExportsSpansOverOTLP(t *testing.T) {
	clearOTELEnv(t)
	c, endpoint := startCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	ctx := testkit.Context(t, 30*time.Second)

	tel, err := Setup(ctx, Options{ServiceName: "penguin-test", ServiceVersion: "v9"})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Exporting {
		t.Fatal("Exporting = false with an endpoint set")
	}
	_, span := tel.TracerProvider.Tracer("t").Start(ctx, "exported-op")
	span.End()
	// Shutdown flushes the batcher, so the span has been sent once it returns.
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	got := c.received()
	if len(got) != 1 {
		t.Fatalf("collector received %d resource spans, want 1", len(got))
	}
	attrs := map[string]string{}
	for _, kv := range got[0].GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	for k, want := range map[string]string{
		"service.name": "penguin-test", "service.version": "v9", "deployment.environment": "test",
	} {
		if attrs[k] != want {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	var names []string
	for _, ss := range got[0].GetScopeSpans() {
		for _, s := range ss.GetSpans() {
			names = append(names, s.GetName())
		}
	}
	if len(names) != 1 || names[0] != "exported-op" {
		t.Errorf("spans = %v, want [exported-op]", names)
	}
}

func TestSetupHonoursDisableSwitches(t *testing.T) {
	for _, tt := range []struct{ key, value string }{
		{"OTEL_SDK_DISABLED", "true"},
		{"OTEL_TRACES_EXPORTER", "none"},
	} {
		t.Run(tt.key, func(t *testing.T) {
			clearOTELEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(tt.key, tt.value)
			tel, err := Setup(testkit.Context(t, 30*time.Second), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tel.Exporting {
				t.Errorf("Exporting = true with %s=%s", tt.key, tt.value)
			}
		})
	}
}

func TestSetupSetsGlobalsOnlyWhenAsked(t *testing.T) {
	clearOTELEnv(t)
	ctx := testkit.Context(t, 30*time.Second)
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})

	if _, err := Setup(ctx, Options{}); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != prevTP {
		t.Error("Setup without SetGlobal replaced the global tracer provider")
	}

	tel, err := Setup(ctx, Options{SetGlobal: true})
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tel.TracerProvider {
		t.Error("Setup with SetGlobal did not install the tracer provider")
	}
	fields := otel.GetTextMapPropagator().Fields()
	if !slices.Contains(fields, "traceparent") {
		t.Errorf("global propagator fields = %v, want traceparent among them", fields)
	}
}
