package grpcclient_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

type llm struct {
	penguinv1.UnimplementedLLMServiceServer
}

func (llm) ListProviders(context.Context, *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	return &penguinv1.ListProvidersResponse{}, nil
}

// serve runs a real grpcserver with the given options on a loopback port
// and returns the ways to reach it: over TCP and in-process.
func serve(t *testing.T, opts grpcserver.Options) []transport {
	t.Helper()
	opts.Name = "test"
	srv, err := grpcserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv, llm{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, lis)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return []transport{
		{name: "tcp", target: lis.Addr().String()},
		{name: "in-process", inProcess: srv.InProcess()},
	}
}

// transport is one way of reaching a server: a target over the network,
// or the server's in-process channel.
type transport struct {
	name      string
	target    string
	inProcess grpc.ClientConnInterface
}

// dial connects through tr with opts.
func (tr transport) dial(t *testing.T, opts grpcclient.Options) grpcclient.Conn {
	t.Helper()
	if tr.inProcess != nil {
		return grpcclient.NewInProcess(tr.inProcess, opts)
	}
	conn, err := grpcclient.New(tr.target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestNewRejectsEmptyTarget(t *testing.T) {
	t.Parallel()
	if _, err := grpcclient.New(" ", grpcclient.Options{}); err == nil {
		t.Fatal("New accepted an empty target")
	}
}

// TestTokenIsSentWithEveryCall checks both transports: the in-process one
// goes through the same auth interceptor as the network.
func TestTokenIsSentWithEveryCall(t *testing.T) {
	t.Parallel()
	for _, tr := range serve(t, grpcserver.Options{AuthToken: "s3cret"}) {
		for _, tt := range []struct {
			name  string
			token string
			want  codes.Code
		}{
			{"right token", "s3cret", codes.OK},
			{"wrong token", "guess", codes.Unauthenticated},
			{"no token", "", codes.Unauthenticated},
		} {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				client := penguinv1.NewLLMServiceClient(tr.dial(t, grpcclient.Options{Token: tt.token}))
				for range 2 { // every call, not only the first
					_, err := client.ListProviders(testkit.Context(t, 30*time.Second), &penguinv1.ListProvidersRequest{})
					if status.Code(err) != tt.want {
						t.Fatalf("ListProviders: %v, want %v", err, tt.want)
					}
				}
			})
		}
	}
}

// TestTraceContinuesAcrossTheCall checks both transports: the trace
// context travels in the call's metadata over the in-process channel
// too, where the server's stats handlers trace both ends.
func TestTraceContinuesAcrossTheCall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prop := propagation.TraceContext{}
	for _, tr := range serve(t, grpcserver.Options{TracerProvider: tp, Propagator: prop}) {
		t.Run(tr.name, func(t *testing.T) {
			conn := tr.dial(t, grpcclient.Options{TracerProvider: tp, Propagator: prop})
			ctx, parent := tp.Tracer("test").Start(testkit.Context(t, 30*time.Second), "caller")
			if _, err := penguinv1.NewLLMServiceClient(conn).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
				t.Fatal(err)
			}
			parent.End()

			want := parent.SpanContext().TraceID()
			kinds := map[trace.SpanKind]bool{}
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID() != want {
					continue // the other transport's
				}
				kinds[s.SpanKind()] = true
				if s.SpanKind() == trace.SpanKindServer && s.Parent().SpanID() == parent.SpanContext().SpanID() {
					t.Errorf("server span %q is the caller's child; want the client span's", s.Name())
				}
			}
			if !kinds[trace.SpanKindClient] || !kinds[trace.SpanKindServer] {
				t.Errorf("span kinds in the caller's trace = %v, want both a client and a server span", kinds)
			}
		})
	}
}

func TestInProcessBeforeServeWaitsAndAfterStopFails(t *testing.T) {
	t.Parallel()
	srv, err := grpcserver.New(grpcserver.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv, llm{})
	client := penguinv1.NewLLMServiceClient(grpcclient.NewInProcess(srv.InProcess(), grpcclient.Options{}))

	// A call made before Serve waits for it and then succeeds.
	ctx := testkit.Context(t, 30*time.Second)
	answered := make(chan error, 1)
	go func() {
		_, err := client.ListProviders(ctx, &penguinv1.ListProvidersRequest{}, grpc.WaitForReady(true))
		answered <- err
	}()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, lis) }()
	if err := <-answered; err != nil {
		t.Fatalf("call made before Serve: %v", err)
	}

	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := client.ListProviders(ctx, &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("call after the server stopped: %v, want Unavailable", err)
	}
}

// named answers ListProviders with its own name, so a test can tell which
// server took a call.
type named struct {
	penguinv1.UnimplementedLLMServiceServer
	name string
}

func (n named) ListProviders(context.Context, *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	return &penguinv1.ListProvidersResponse{Providers: []*penguinv1.ProviderInfo{{Name: n.name}}}, nil
}

// TestCallsAreSpreadOverEveryResolvedAddress checks the default balancing:
// a target that resolves to two servers (as a headless Service's name
// does) gets calls on both, where grpc-go's default would use the first.
func TestCallsAreSpreadOverEveryResolvedAddress(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	conn := dialReplicas(t, "replicas",
		func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, named{name: "a"}) },
		func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, named{name: "b"}) })
	client := penguinv1.NewLLMServiceClient(conn)
	seen := map[string]int{}
	for i := 0; i < 20; i++ {
		resp, err := client.ListProviders(ctx, &penguinv1.ListProvidersRequest{}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		seen[resp.GetProviders()[0].GetName()]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Fatalf("calls by server: %v; want both servers to take calls", seen)
	}
}

// environment answers CreateEnvironment with its name, or refuses it as a
// replica that is shutting down does.
type environment struct {
	penguinv1.UnimplementedEnvironmentServiceServer
	name    string
	refuses bool
}

func (e environment) CreateEnvironment(context.Context, *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, error) {
	if e.refuses {
		return nil, status.Error(codes.Unavailable, "shutting down")
	}
	return &penguinv1.CreateEnvironmentResponse{EnvironmentId: e.name}, nil
}

// TestCreateEnvironmentRefusedIsAskedOfTheNextReplica checks the default
// retry policy: with one of two replicas refusing new environments
// (Unavailable), every CreateEnvironment still succeeds, on the other.
func TestCreateEnvironmentRefusedIsAskedOfTheNextReplica(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	conn := dialReplicas(t, "environments",
		func(s *grpc.Server) {
			penguinv1.RegisterEnvironmentServiceServer(s, environment{name: "stopping", refuses: true})
		},
		func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, environment{name: "up"}) })
	client := penguinv1.NewEnvironmentServiceClient(conn)
	for i := 0; i < 6; i++ {
		resp, err := client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{}, grpc.WaitForReady(true))
		if err != nil || resp.GetEnvironmentId() != "up" {
			t.Fatalf("CreateEnvironment %d: %v, %v; want it made on the replica that is up", i, resp, err)
		}
	}
}

// dialReplicas serves one real gRPC server on a loopback port per register
// function and returns a client connection from grpcclient.New to a name
// that resolves to all of them (as a headless Service's name does).
func dialReplicas(t *testing.T, scheme string, register ...func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	var addrs []resolver.Address
	for _, reg := range register {
		srv := grpc.NewServer()
		reg(srv)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		addrs = append(addrs, resolver.Address{Addr: lis.Addr().String()})
	}
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpcclient.New(r.Scheme()+":///replicas", grpcclient.Options{DialOptions: []grpc.DialOption{grpc.WithResolvers(r)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
