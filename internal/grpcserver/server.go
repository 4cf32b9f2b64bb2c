// Package grpcserver is the gRPC server bootstrap shared by every penguin
// service, so that llm, environment and engine behave the same at the edges
// whether they run together or apart.
//
// A [Server] comes with:
//   - the gRPC health service, with an overall status and one per registered
//     service, so load balancers and Kubernetes probes can ask;
//   - server reflection, so grpcurl works without the .proto files;
//   - an OpenTelemetry stats handler (otelgrpc), which continues the caller's
//     trace;
//   - interceptors composed in one place (interceptors.go): Prometheus
//     metrics, bearer-token auth and panic recovery from go-grpc-middleware
//     v2, and one slog line per finished call (logging.go, which says why
//     it is written here);
//   - graceful shutdown when the context given to [Server.Serve] ends;
//   - an in-process channel ([Server.InProcess]), served beside the
//     listener, through which another service of the same process calls
//     this one with the same client interfaces, interceptors and tracing
//     as over the network, but without encoding its messages: they are
//     handed across as Go values (inprocess.go says how, and what it does
//     that the network transport would). BenchmarkRoundTrip measures it
//     against TCP loopback and a unix socket.
//
// A service registers its handlers on the [Server] itself, which puts them
// on both, and hands the server a listener:
//
//	srv, err := grpcserver.New(grpcserver.Options{Name: "llm", AuthToken: tok, Logger: log})
//	penguinv1.RegisterLLMServiceServer(srv, handler)
//	srv.OnShutdown(func(ctx context.Context) { handler.Close(ctx) })
//	err = srv.Serve(ctx, lis)
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/penguin-agent/penguin/internal/grpcflow"
	"github.com/penguin-agent/penguin/internal/logger"
)

// DefaultShutdownTimeout bounds a graceful stop when [Options] sets none.
const DefaultShutdownTimeout = 10 * time.Second

// Options configure a [Server].
type Options struct {
	// Name names the server in logs and in the "server" label of its
	// metrics, for example "llm" or "penguin" for all services in one.
	// It is required.
	Name string
	// AuthToken, when not empty, must be presented by every RPC except the
	// health service's as "authorization: Bearer <token>" metadata.
	AuthToken string
	// Logger receives one line per finished RPC (successes at debug,
	// slow calls, failures and the server's own events at info or above).
	// Nil discards them.
	Logger *slog.Logger
	// SlowCall is how long a unary call may take before its success is
	// logged at info instead of debug. Zero means DefaultSlowCall;
	// negative logs no call as slow.
	SlowCall time.Duration
	// ShutdownTimeout bounds the whole graceful stop: shutdown hooks and
	// draining of in-flight RPCs. When it runs out the server stops hard,
	// cancelling the RPCs still running. Zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Registerer receives the server's gRPC metrics. Nil turns metrics off.
	// Several servers may share one registry; the "server" label tells
	// them apart.
	Registerer prometheus.Registerer
	// TracerProvider and Propagator feed the otelgrpc stats handler. Nil
	// means OpenTelemetry's global ones.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// MaxConnectionAge, when positive, closes every client connection
	// gracefully (a GOAWAY, then new calls on a new connection) once it is
	// this old, give or take a tenth. Clients then resolve the target
	// again, so a client of several replicas behind one DNS name (a
	// Kubernetes headless Service) finds replicas that started after it
	// connected, and one that reached a replica through a ClusterIP may
	// land on another. Calls in flight are not cut: a tool call or an
	// agent run may stream for an hour, so they keep the old connection
	// until they end. Zero keeps connections for as long as they live.
	MaxConnectionAge time.Duration
	// ServerOptions are appended to the options the bootstrap sets, for
	// needs such as larger message limits. Interceptors given here run
	// inside the bootstrap's own.
	ServerOptions []grpc.ServerOption
}

// Server is a gRPC server with penguin's common plumbing installed. Create
// it with [New].
type Server struct {
	name    string
	log     *slog.Logger
	timeout time.Duration
	grpc    *grpc.Server
	health  *health.Server
	metrics *grpcprom.ServerMetrics
	// inProcess serves the calls made through InProcess.
	inProcess *inProcess

	started atomic.Bool
	// authn, when set, decides who may call (see SetAuthenticator).
	authn atomic.Pointer[Authenticator]

	mu       sync.Mutex
	hooks    []func(context.Context)
	explicit map[string]bool // services whose status a caller has set
}

// New builds a server. Register services on [Server.GRPC] before calling
// [Server.Serve].
func New(opts Options) (*Server, error) {
	if strings.TrimSpace(opts.Name) == "" {
		return nil, errors.New("grpcserver: Options.Name is required")
	}
	s := &Server{
		name:     opts.Name,
		log:      opts.Logger,
		timeout:  opts.ShutdownTimeout,
		health:   health.NewServer(),
		explicit: make(map[string]bool),
	}
	s.log = logger.OrDiscard(s.log).With("server", s.name)
	if s.timeout <= 0 {
		s.timeout = DefaultShutdownTimeout
	}
	if opts.Registerer != nil {
		m := newServerMetrics(s.name)
		if err := opts.Registerer.Register(m); err != nil {
			return nil, fmt.Errorf("grpcserver: register metrics of server %q: %w", s.name, err)
		}
		s.metrics = m
	}

	slow := opts.SlowCall
	if slow == 0 {
		slow = DefaultSlowCall
	}
	unary, stream := s.interceptors(opts.AuthToken, slow)
	otelOpts := []otelgrpc.Option{otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))}
	if opts.TracerProvider != nil {
		otelOpts = append(otelOpts, otelgrpc.WithTracerProvider(opts.TracerProvider))
	}
	if opts.Propagator != nil {
		otelOpts = append(otelOpts, otelgrpc.WithPropagators(opts.Propagator))
	}
	serverStats := otelgrpc.NewServerHandler(otelOpts...)
	if _, off := opts.TracerProvider.(noop.TracerProvider); off {
		// Tracing is off (telemetry.Setup without an exporter): the
		// stats handlers would record no span and no metric (no meter
		// provider is set) on either end of an in-process call, yet
		// they cost 0.1-0.2 ms of CPU and 20 KiB a task (the trace
		// context put in the metadata and parsed again, a span and its
		// attributes made for nothing). The gate carries the caller's
		// span context across instead (see inProcess.carrySpan).
		s.inProcess = newInProcess(unary, stream, nil, nil)
	} else {
		s.inProcess = newInProcess(unary, stream, serverStats, otelgrpc.NewClientHandler(otelOpts...))
	}
	serverOpts := []grpc.ServerOption{
		// A fixed pool of stream workers instead of a goroutine per
		// stream takes tens of microseconds off every call's start.
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.StatsHandler(serverStats),
		badBodyCodec(),
		// A body that does not parse is refused before anything else
		// sees it; the in-process channel parses no body.
		grpc.ChainUnaryInterceptor(append([]grpc.UnaryServerInterceptor{badBodyUnary}, unary...)...),
		grpc.ChainStreamInterceptor(append([]grpc.StreamServerInterceptor{badBodyStream}, stream...)...),
	}
	// Static flow-control windows: no PING for every burst of data a
	// client sends (internal/grpcflow).
	serverOpts = append(serverOpts, grpcflow.ServerOptions()...)
	if opts.MaxConnectionAge > 0 {
		// MaxConnectionAgeGrace stays at its default, infinity: see
		// Options.MaxConnectionAge.
		serverOpts = append(serverOpts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: opts.MaxConnectionAge}))
	}
	s.grpc = grpc.NewServer(append(serverOpts, opts.ServerOptions...)...)
	healthpb.RegisterHealthServer(s, s.health)
	reflection.Register(s.grpc)
	// Until Serve runs, nothing is served.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	return s, nil
}

// GRPC returns the underlying gRPC server, for a listener of its own
// (Serve serves one); register services on the Server itself.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// RegisterService registers a service's handlers on the gRPC server and on
// the in-process channel, so that it is served to both: Server is a
// grpc.ServiceRegistrar, which the generated Register functions take.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
	s.inProcess.register(desc, impl)
}

// Health returns the health service, for callers that need more than
// [Server.SetServing], such as a test that checks a status directly.
func (s *Server) Health() *health.Server { return s.health }

// SetServing sets the health status of one service, by its full name (for
// example "penguin.v1.LLMService"); the empty name is the server as a whole.
// A service that is not ready yet, say while it connects to its database,
// sets itself not serving before [Server.Serve] and serving when ready.
// Services nobody set are reported serving once Serve starts. After
// shutdown has begun every status stays NOT_SERVING whatever is set.
func (s *Server) SetServing(service string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.mu.Lock()
	s.explicit[service] = true
	s.mu.Unlock()
	s.health.SetServingStatus(service, st)
}

// OnShutdown registers f to run when the server begins to stop, after the
// health status has turned NOT_SERVING and new RPCs are refused, and
// before in-flight RPCs are drained. A hook is the place to end
// long-lived streams (for example, to abort active runs) so that draining
// can finish. Hooks run one after the other in registration order, with
// a context that ends when the shutdown timeout does.
func (s *Server) OnShutdown(f func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, f)
}

// Serve serves gRPC on lis until ctx ends, then shuts down gracefully:
// every health status turns NOT_SERVING, new RPCs are refused
// (GracefulStop begins), the shutdown hooks run, in-flight RPCs are
// drained, and whatever is still running when the shutdown timeout ends
// is stopped hard. Serve closes lis. It also
// serves the calls of [Server.InProcess] until the shutdown ends. It
// returns nil after a shutdown asked for through ctx, and an error when
// the listener fails (after shutting down the same way). A Server serves
// once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		_ = lis.Close()
		return errors.New("grpcserver: Serve called more than once")
	}
	s.markServing()

	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	s.inProcess.serve()
	s.log.Info("gRPC server listening", "addr", lis.Addr().String())

	var serveErr error
	select {
	case err := <-served:
		served = nil
		if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			serveErr = fmt.Errorf("grpcserver %s: serve: %w", s.name, err)
			s.log.Error("gRPC server failed; shutting down", "err", err)
		}
	case <-ctx.Done():
		s.log.Info("shutting down", "timeout", s.timeout)
	}
	s.shutdown(context.WithoutCancel(ctx))
	if served != nil {
		<-served
	}
	return serveErr
}

// Close stops the server at once, without the graceful stop of Serve:
// it releases a server that is never served (its stream workers run from
// New on), and does nothing more after Serve has returned.
func (s *Server) Close() {
	s.grpc.Stop()
	s.inProcess.close()
}

// InProcess returns the server's in-process channel: calls through it
// reach this server's services, through the same interceptors (auth,
// logging, metrics, recovery) and tracing as calls from the network, with
// their messages handed across as Go values instead of encoded. Wrap it
// with grpcclient.NewInProcess for the token and call it like any
// connection. A call before [Server.Serve] waits until Serve starts or its
// context ends; once the graceful stop has begun a call is refused as
// Unavailable.
func (s *Server) InProcess() grpc.ClientConnInterface { return s.inProcess }

// markServing reports every registered service, and the server as a whole,
// serving, except those whose status a caller has set.
func (s *Server) markServing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.grpc.GetServiceInfo() {
		if name == healthpb.Health_ServiceDesc.ServiceName || strings.HasPrefix(name, "grpc.reflection.") {
			continue
		}
		if !s.explicit[name] {
			s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
		}
	}
	if !s.explicit[""] {
		s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	}
}

// shutdown runs the stop sequence described at [Server.Serve].
func (s *Server) shutdown(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, s.timeout)
	defer cancel()

	s.health.Shutdown()

	// The graceful stop begins before the hooks: from here on a new call
	// is refused (the clients' connections are told to go away), while
	// the calls in flight go on until the hooks end them or they finish.
	// A client whose stream a hook ends (an engine's run handed over to
	// another replica, "attach again") then attaches again on a new
	// connection, which reaches a replica that is not stopping, instead
	// of this one, which could only answer that it is.
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()

	s.mu.Lock()
	hooks := slices.Clone(s.hooks)
	s.mu.Unlock()
	for _, h := range hooks {
		h(ctx)
	}

	// The in-process calls drain beside the network's, and are cancelled
	// when the timeout ends.
	drained := make(chan struct{})
	go func() {
		s.inProcess.drain(ctx)
		close(drained)
	}()
	select {
	case <-stopped:
		s.log.Info("gRPC server stopped")
	case <-ctx.Done():
		s.log.Warn("graceful stop timed out; stopping hard", "timeout", s.timeout)
		s.grpc.Stop()
		<-stopped
	}
	<-drained
}
