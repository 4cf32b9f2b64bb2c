package grpcserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

const llmService = "penguin.v1.LLMService"

// fakeLLM is a stub LLM service whose methods are function fields, so each
// test says exactly what the handler does.
type fakeLLM struct {
	penguinv1.UnimplementedLLMServiceServer
	listProviders  func(context.Context) (*penguinv1.ListProvidersResponse, error)
	streamGenerate func(grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error
}

func (f *fakeLLM) ListProviders(ctx context.Context, _ *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	if f.listProviders == nil {
		return &penguinv1.ListProvidersResponse{}, nil
	}
	return f.listProviders(ctx)
}

func (f *fakeLLM) StreamGenerate(_ *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	if f.streamGenerate == nil {
		return nil
	}
	return f.streamGenerate(s)
}

// syncBuffer is a log sink that the server's goroutines and the test can
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is a server serving on a loopback port in the background.
type running struct {
	srv    *grpcserver.Server
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve has returned
	err    error         // what Serve returned; read after done
}

// stop cancels the server's context and waits for Serve to return.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
		return nil
	}
}

// start builds a server from opts, lets setup register services on it,
// serves it on a loopback port and returns it with a plain client
// connection. The server is stopped when the test ends.
func start(t *testing.T, opts grpcserver.Options, setup func(*grpcserver.Server)) *running {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test"
	}
	if opts.TracerProvider == nil {
		// As a process without a trace exporter (telemetry.Setup).
		opts.TracerProvider = noop.NewTracerProvider()
	}
	srv, err := grpcserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = srv.Serve(ctx, lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.conn = conn
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		<-r.done
	})
	return r
}

func registerLLM(f *fakeLLM) func(*grpcserver.Server) {
	return func(s *grpcserver.Server) { penguinv1.RegisterLLMServiceServer(s, f) }
}

// waitStatus polls the health service until service reports want.
func waitStatus(ctx context.Context, t *testing.T, conn *grpc.ClientConn, service string, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	hc := healthpb.NewHealthClient(conn)
	var last string
	err := eventually.Wait(ctx, func() bool {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err == nil && resp.GetStatus() == want {
			return true
		}
		last = resp.GetStatus().String()
		if err != nil {
			last = err.Error()
		}
		return false
	})
	if err != nil {
		t.Fatalf("health of %q never became %v; last: %s", service, want, last)
	}
}

func withToken(ctx context.Context, auth string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", auth)
}

func TestNewRequiresName(t *testing.T) {
	t.Parallel()
	if _, err := grpcserver.New(grpcserver.Options{}); err == nil {
		t.Fatal("New accepted options without a name")
	}
}

func TestHealthReportsServerAndEachService(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	srv, err := grpcserver.New(grpcserver.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Before Serve nothing is served.
	resp, err := srv.Health().Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("before Serve: %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}

	r := start(t, grpcserver.Options{}, registerLLM(&fakeLLM{}))
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	waitStatus(ctx, t, r.conn, llmService, healthpb.HealthCheckResponse_SERVING)

	_, err = healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "penguin.v1.NoSuchService"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown service: %v, want NotFound", err)
	}

	r.srv.SetServing(llmService, false)
	waitStatus(ctx, t, r.conn, llmService, healthpb.HealthCheckResponse_NOT_SERVING)
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
}

func TestSetServingBeforeServeIsKept(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	r := start(t, grpcserver.Options{}, func(s *grpcserver.Server) {
		penguinv1.RegisterLLMServiceServer(s, &fakeLLM{})
		s.SetServing(llmService, false) // say, still connecting to its store
	})
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	waitStatus(ctx, t, r.conn, llmService, healthpb.HealthCheckResponse_NOT_SERVING)
	r.srv.SetServing(llmService, true)
	waitStatus(ctx, t, r.conn, llmService, healthpb.HealthCheckResponse_SERVING)
}

// TestAuth checks the token over the network and through the in-process
// channel alike: an in-process call runs the same auth interceptor, so a
// caller inside the process without the token is refused too.
func TestAuth(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			testAuth(t, tr)
		})
	}
}

func testAuth(t *testing.T, tr string) {
	// Tracing off, as in a process without an exporter: the in-process
	// channel then runs without stats handlers, and auth must not care.
	r := start(t, grpcserver.Options{AuthToken: "s3cret", TracerProvider: noop.NewTracerProvider()}, registerLLM(&fakeLLM{}))
	llm := penguinv1.NewLLMServiceClient(r.via(tr))

	tests := []struct {
		name string
		auth string // empty: no authorization metadata
		want codes.Code
	}{
		{name: "missing", want: codes.Unauthenticated},
		{name: "wrong scheme", auth: "Basic s3cret", want: codes.Unauthenticated},
		{name: "no scheme", auth: "s3cret", want: codes.Unauthenticated},
		{name: "wrong token", auth: "Bearer s3cre", want: codes.Unauthenticated},
		{name: "longer token", auth: "Bearer s3cret2", want: codes.Unauthenticated},
		{name: "right token", auth: "Bearer s3cret", want: codes.OK},
		{name: "scheme is case-insensitive", auth: "bearer s3cret", want: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testkit.Context(t, 30*time.Second)
			if tt.auth != "" {
				ctx = withToken(ctx, tt.auth)
			}
			_, err := llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
			if status.Code(err) != tt.want {
				t.Errorf("unary: %v, want %v", err, tt.want)
			}
			stream, err := llm.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
			if err == nil {
				_, err = stream.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if status.Code(err) != tt.want {
				t.Errorf("stream: %v, want %v", err, tt.want)
			}
		})
	}

	t.Run("health needs no token", func(t *testing.T) {
		t.Parallel()
		waitStatus(testkit.Context(t, 30*time.Second), t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	})
	t.Run("reflection needs the token", func(t *testing.T) {
		t.Parallel()
		_, err := listServices(testkit.Context(t, 30*time.Second), r.conn)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("reflection without token: %v, want Unauthenticated", err)
		}
	})
}

func TestNoAuthWhenTokenEmpty(t *testing.T) {
	t.Parallel()
	r := start(t, grpcserver.Options{}, registerLLM(&fakeLLM{}))
	_, err := penguinv1.NewLLMServiceClient(r.conn).ListProviders(testkit.Context(t, 30*time.Second), &penguinv1.ListProvidersRequest{})
	if err != nil {
		t.Fatalf("ListProviders without token on an open server: %v", err)
	}
}

// listServices asks the server's reflection service for its services, the
// way grpcurl's "list" does.
func listServices(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// A Send that finds the stream already ended by the server (refused
	// by auth, say) returns io.EOF; the status then comes from Recv.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

func TestReflectionListsServices(t *testing.T) {
	t.Parallel()
	r := start(t, grpcserver.Options{AuthToken: "tok"}, registerLLM(&fakeLLM{}))
	names, err := listServices(withToken(testkit.Context(t, 30*time.Second), "Bearer tok"), r.conn)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{llmService, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

func TestRecoveryHidesPanicAndKeepsServing(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	calls := 0
	var mu sync.Mutex
	f := &fakeLLM{
		listProviders: func(context.Context) (*penguinv1.ListProvidersResponse, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				panic("database password is hunter2")
			}
			return &penguinv1.ListProvidersResponse{}, nil
		},
		streamGenerate: func(grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
			panic("stream handler exploded")
		},
	}
	r := start(t, grpcserver.Options{Logger: log}, registerLLM(f))
	llm := penguinv1.NewLLMServiceClient(r.conn)
	ctx := testkit.Context(t, 30*time.Second)

	_, err := llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("panicking unary handler: %v, want Internal", err)
	}
	if msg := status.Convert(err).Message(); msg != "internal error" {
		t.Errorf("message %q leaks more than %q", msg, "internal error")
	}
	stream, err := llm.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "internal error" {
		t.Errorf("panicking stream handler: %v, want Internal \"internal error\"", err)
	}

	if _, err := llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatalf("server did not keep serving after a panic: %v", err)
	}
	got := logs.String()
	for _, want := range []string{"hunter2", "stream handler exploded", "/penguin.v1.LLMService/ListProviders", "goroutine"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

func TestLoggingOneLinePerCallButNotHealth(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	r := start(t, grpcserver.Options{Logger: slog.New(slog.NewJSONHandler(&logs, debug))}, registerLLM(&fakeLLM{}))
	ctx := testkit.Context(t, 30*time.Second)
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	if _, err := penguinv1.NewLLMServiceClient(r.conn).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	got := logs.String()
	if n := strings.Count(got, `"grpc.method":"ListProviders"`); n != 1 {
		t.Errorf("ListProviders logged %d times, want once:\n%s", n, got)
	}
	if !strings.Contains(got, `"grpc.code":"OK"`) {
		t.Errorf("log lacks the code:\n%s", got)
	}
	if strings.Contains(got, "grpc.health") {
		t.Errorf("health checks were logged:\n%s", got)
	}
}

// callLines returns the log lines of finished or slow calls, decoded.
func callLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["grpc.method"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// TestCallLogLevels checks the level of each kind of finished call with a
// logger at info, the level servers run at: a fast success writes
// nothing, a failure writes one line at the level its code deserves, and
// a unary success slower than the threshold writes one "slow call" line at
// info, while a stream never counts as slow, nor is one its client
// cancelled worth a line at info.
func TestCallLogLevels(t *testing.T) {
	t.Parallel()
	failing := &fakeLLM{listProviders: func(context.Context) (*penguinv1.ListProvidersResponse, error) {
		return nil, status.Error(codes.NotFound, "no such provider")
	}}
	crashing := &fakeLLM{listProviders: func(context.Context) (*penguinv1.ListProvidersResponse, error) {
		return nil, status.Error(codes.Internal, "disk on fire")
	}}
	// watching answers once, then waits for its client to hang up, as a
	// watch does.
	watching := &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if err := s.Send(&penguinv1.StreamGenerateResponse{}); err != nil {
			return err
		}
		<-s.Context().Done()
		return status.FromContextError(s.Context().Err()).Err()
	}}
	for _, c := range []struct {
		name     string
		slow     time.Duration
		llm      *fakeLLM
		stream   bool
		hangUp   bool // the client cancels the stream after its first answer
		wantMsg  string
		wantLvl  string
		wantCode string
	}{
		{name: "fast success", llm: &fakeLLM{}},
		{name: "fast stream", llm: &fakeLLM{}, stream: true, slow: time.Nanosecond},
		{name: "stream the client hangs up", llm: watching, stream: true, hangUp: true, slow: time.Nanosecond},
		{name: "slow success", llm: &fakeLLM{}, slow: time.Nanosecond, wantMsg: "slow call", wantLvl: "INFO", wantCode: "OK"},
		{name: "slow calls off", llm: &fakeLLM{}, slow: -1},
		{name: "client error", llm: failing, wantMsg: "finished call", wantLvl: "INFO", wantCode: "NotFound"},
		{name: "server error", llm: crashing, slow: -1, wantMsg: "finished call", wantLvl: "ERROR", wantCode: "Internal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			r := start(t, grpcserver.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), SlowCall: c.slow}, registerLLM(c.llm))
			ctx := testkit.Context(t, 30*time.Second)
			llm := penguinv1.NewLLMServiceClient(r.conn)
			switch {
			case c.hangUp:
				sctx, cancel := context.WithCancel(ctx)
				s, err := llm.StreamGenerate(sctx, &penguinv1.StreamGenerateRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != nil {
					t.Fatalf("first answer: %v", err)
				}
				cancel()
				if _, err := s.Recv(); status.Code(err) != codes.Canceled {
					t.Fatalf("stream ended with %v, want Canceled", err)
				}
			case c.stream:
				s, err := llm.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Recv(); err != io.EOF {
					t.Fatalf("stream ended with %v, want EOF", err)
				}
			default:
				_, _ = llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
			}
			// The line is written before the answer leaves the handler
			// chain, so it is there once the call has returned; stopping
			// the server makes sure of it.
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			lines := callLines(t, logs.String())
			if c.wantMsg == "" {
				if len(lines) != 0 {
					t.Fatalf("logged %v; want nothing at info", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("logged %d call lines, want 1:\n%s", len(lines), logs.String())
			}
			l := lines[0]
			if l["msg"] != c.wantMsg || l["level"] != c.wantLvl || l["grpc.code"] != c.wantCode || l["grpc.method"] != "ListProviders" {
				t.Errorf("line %v; want msg %q, level %s, code %s", l, c.wantMsg, c.wantLvl, c.wantCode)
			}
			if _, ok := l["grpc.time_ms"].(float64); !ok {
				t.Errorf("line %v has no duration", l)
			}
		})
	}
}

// counterValue returns the value of the counter called name whose labels
// include want, or -1 when there is none.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func TestMetricsCountCallsByCode(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	r := start(t, grpcserver.Options{AuthToken: "tok", Registerer: reg}, registerLLM(&fakeLLM{}))
	llm := penguinv1.NewLLMServiceClient(r.conn)
	ctx := testkit.Context(t, 30*time.Second)
	if _, err := llm.ListProviders(withToken(ctx, "Bearer tok"), &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	base := map[string]string{"server": "test", "grpc_service": llmService, "grpc_method": "ListProviders"}
	for code, want := range map[string]float64{"OK": 1, "Unauthenticated": 1} {
		labels := map[string]string{"grpc_code": code}
		for k, v := range base {
			labels[k] = v
		}
		if got := counterValue(t, reg, "grpc_server_handled_total", labels); got != want {
			t.Errorf("grpc_server_handled_total%v = %v, want %v", labels, got, want)
		}
	}
	// A method never called has no series yet (see newServerMetrics).
	idle := map[string]string{"server": "test", "grpc_method": "ListModels"}
	if got := counterValue(t, reg, "grpc_server_started_total", idle); got != -1 {
		t.Errorf("grpc_server_started_total for ListModels = %v, want no series", got)
	}
}

func TestServersShareARegistryByName(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := grpcserver.New(grpcserver.Options{Name: "llm", Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := grpcserver.New(grpcserver.Options{Name: "engine", Registerer: reg}); err != nil {
		t.Fatalf("second server with another name: %v", err)
	}
	if _, err := grpcserver.New(grpcserver.Options{Name: "llm", Registerer: reg}); err == nil {
		t.Fatal("two servers with the same name registered into one registry")
	}
}

func TestTracingRecordsServerSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := start(t, grpcserver.Options{TracerProvider: tp}, registerLLM(&fakeLLM{}))
	ctx := testkit.Context(t, 30*time.Second)
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	if _, err := penguinv1.NewLLMServiceClient(r.conn).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == "penguin.v1.LLMService/ListProviders" && s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span kind = %v, want server", s.SpanKind())
		}
	}
	if len(names) != 1 || names[0] != "penguin.v1.LLMService/ListProviders" {
		t.Errorf("spans = %v, want exactly [penguin.v1.LLMService/ListProviders] (health checks untraced)", names)
	}
}

// TestInProcessCarriesTheTraceWithTracingOff checks that with tracing off
// (a no-op tracer provider, the in-process channel without stats
// handlers) a handler reached in process still finds its caller's span
// context, as the network's stats handler would have put it there.
func TestInProcessCarriesTheTraceWithTracingOff(t *testing.T) {
	t.Parallel()
	seen := make(chan trace.SpanContext, 1)
	f := &fakeLLM{listProviders: func(ctx context.Context) (*penguinv1.ListProvidersResponse, error) {
		seen <- trace.SpanContextFromContext(ctx)
		return &penguinv1.ListProvidersResponse{}, nil
	}}
	r := start(t, grpcserver.Options{TracerProvider: noop.NewTracerProvider(), Propagator: propagation.TraceContext{}}, registerLLM(f))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(testkit.Context(t, 30*time.Second), sc)
	if _, err := penguinv1.NewLLMServiceClient(r.srv.InProcess()).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Errorf("the handler saw span context %v, want the caller's %v, remote", got, sc)
	}
}

// transports are the two ways to reach a running server: over TCP, and
// through its in-process channel.
var transports = []string{"tcp", "in-process"}

// via returns a connection to r through the transport named tr.
func (r *running) via(tr string) grpc.ClientConnInterface {
	if tr == "in-process" {
		return r.srv.InProcess()
	}
	return r.conn
}

func TestGracefulShutdownDrainsInFlightCalls(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			gracefulShutdownDrainsInFlightCalls(t, tr)
		})
	}
}

func gracefulShutdownDrainsInFlightCalls(t *testing.T, tr string) {
	ctx := testkit.Context(t, 30*time.Second)
	entered := make(chan struct{})
	release := make(chan struct{})
	f := &fakeLLM{listProviders: func(context.Context) (*penguinv1.ListProvidersResponse, error) {
		close(entered)
		<-release
		return &penguinv1.ListProvidersResponse{Providers: []*penguinv1.ProviderInfo{{Name: "drained"}}}, nil
	}}

	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	r := start(t, grpcserver.Options{ShutdownTimeout: 20 * time.Second}, func(s *grpcserver.Server) {
		penguinv1.RegisterLLMServiceServer(s, f)
		s.OnShutdown(func(hookCtx context.Context) {
			resp, err := s.Health().Check(hookCtx, &healthpb.HealthCheckRequest{Service: llmService})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("in shutdown hook, health = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
			}
			if _, ok := hookCtx.Deadline(); !ok {
				t.Error("shutdown hook context has no deadline")
			}
			note("hook 1")
		})
		s.OnShutdown(func(context.Context) {
			note("hook 2")
			close(release) // the in-flight call may finish now
		})
	})

	type result struct {
		resp *penguinv1.ListProvidersResponse
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := penguinv1.NewLLMServiceClient(r.via(tr)).ListProviders(ctx, &penguinv1.ListProvidersRequest{})
		inflight <- result{resp, err}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("call never reached the handler")
	}

	if err := r.stop(t); err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	if _, err := penguinv1.NewLLMServiceClient(r.via(tr)).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("call after the shutdown: %v, want Unavailable", err)
	}
	res := <-inflight
	if res.err != nil || res.resp.GetProviders()[0].GetName() != "drained" {
		t.Fatalf("in-flight call: %v, %v; want it to finish normally", res.resp, res.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != "hook 1,hook 2" {
		t.Errorf("hooks ran as %v, want in registration order", events)
	}
}

// TestShutdownRefusesNewCallsWhileTheHooksRun checks that a client's new
// call on a connection it already has is refused once the shutdown has
// begun, while the hooks still run: a hook ends an engine's run streams
// with "attach again", and the client's next call must go to another
// replica, not back to this one.
func TestShutdownRefusesNewCallsWhileTheHooksRun(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	var r *running
	refused := make(chan error, 1)
	r = start(t, grpcserver.Options{ShutdownTimeout: 20 * time.Second}, func(s *grpcserver.Server) {
		penguinv1.RegisterLLMServiceServer(s, &fakeLLM{})
		s.OnShutdown(func(hookCtx context.Context) {
			wctx, cancel := context.WithTimeout(hookCtx, 5*time.Second)
			defer cancel()
			var last error
			err := eventually.Wait(wctx, func() bool {
				_, last = penguinv1.NewLLMServiceClient(r.conn).ListProviders(wctx, &penguinv1.ListProvidersRequest{})
				return status.Code(last) == codes.Unavailable
			})
			if err != nil {
				err = fmt.Errorf("a new call while the hooks ran still got %v", last)
			}
			refused <- err
		})
	})
	// The connection is up before the shutdown begins.
	if _, err := penguinv1.NewLLMServiceClient(r.conn).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := <-refused; err != nil {
		t.Fatal(err)
	}
}

func TestShutdownStopsHardAfterTimeout(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			shutdownStopsHardAfterTimeout(t, tr)
		})
	}
}

func shutdownStopsHardAfterTimeout(t *testing.T, tr string) {
	ctx := testkit.Context(t, 30*time.Second)
	entered := make(chan struct{})
	f := &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		close(entered)
		<-s.Context().Done() // ignores the shutdown; only a hard stop ends it
		return s.Context().Err()
	}}
	const timeout = 300 * time.Millisecond
	r := start(t, grpcserver.Options{ShutdownTimeout: timeout}, registerLLM(f))

	stream, err := penguinv1.NewLLMServiceClient(r.via(tr)).StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	recvErr := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		recvErr <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("stream never reached the handler")
	}

	began := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("Serve after hard stop: %v", err)
	}
	if took := time.Since(began); took < timeout {
		t.Errorf("Serve returned after %v, before the %v shutdown timeout", took, timeout)
	}
	select {
	case err := <-recvErr:
		if code := status.Code(err); code != codes.Unavailable && code != codes.Canceled {
			t.Errorf("stream after hard stop: %v, want Unavailable or Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("stream still open after hard stop")
	}
}

func TestServeTwiceFails(t *testing.T) {
	t.Parallel()
	r := start(t, grpcserver.Options{}, nil)
	waitStatus(testkit.Context(t, 30*time.Second), t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	if err := r.srv.Serve(testkit.Context(t, 30*time.Second), lis); err == nil {
		t.Fatal("second Serve returned nil")
	}
}

func TestServeReportsListenerFailureAfterShuttingDown(t *testing.T) {
	t.Parallel()
	srv, err := grpcserver.New(grpcserver.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hookRan := make(chan struct{})
	srv.OnShutdown(func(context.Context) { close(hookRan) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_ = lis.Close() // Accept fails at once

	if err := srv.Serve(testkit.Context(t, 30*time.Second), lis); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
	select {
	case <-hookRan:
	default:
		t.Error("shutdown hooks did not run after the listener failed")
	}
	resp, err := srv.Health().Check(testkit.Context(t, 30*time.Second), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health after failure = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
}
