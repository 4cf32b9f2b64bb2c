// Package assemble builds one penguin server process from the Configs of
// the services it runs. `penguin serve` (all three services), `penguin
// serve llm|environment|engine` (one each) and the server that `penguin
// run`, `chat` and `sessions` embed ([StartEmbedded]) are all built by
// [New], the HTTP gateway too when Config.Gateway asks for it: they differ
// only in which Configs are set, so a deployment and the all-in-one server
// cannot drift apart. Every engine forwards calls for runs other replicas
// own, leases its runs, and re-dials environment replicas at the addresses
// they advertise, wherever it runs.
//
// A service that runs in the same process is reached through the gRPC
// server's in-process channel (grpcserver.Server.InProcess), which hands
// messages across without encoding them; one that runs elsewhere, over
// the network. Either way the engine calls through the same generated
// clients over a grpcclient connection, so the token, the server's
// interceptors and the trace context are the same.
//
// The package sits between cmd/penguin and the services: cmd/penguin only
// turns flags into Configs, each service package stands itself up with its
// own Setup, and this package is the one place that knows how the three
// fit together in a process (which server they share, which connection
// reaches which, in which order they stop). It is a package rather than
// part of cmd so that tests can build real processes in their own.
package assemble

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/internal/resident"
	"github.com/penguin-agent/penguin/internal/telemetry"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/routestore"
)

// Config describes one server process.
type Config struct {
	// Name names the process in logs, metrics and traces: "penguin" for
	// the services together, or the one service's name. Required.
	Name string
	// Version is penguin's version, for traces and MCP servers.
	Version string
	// Listen is the gRPC address; a port of 0 picks a free one (see
	// [Process.Addr]). Required unless Listener is set.
	Listen string
	// Listener, when set, is the gRPC listener instead of one opened on
	// Listen, for a caller that must know the address before the process
	// is built (to advertise it in the services' Configs). The process
	// closes it, also when New fails.
	Listener net.Listener
	// MetricsListen, when not empty, is where Prometheus /metrics is
	// served.
	MetricsListen string
	// ProfilesListen, when not empty, is where Go's runtime profiles are
	// served (grpcserver.ServeProfiles); it must be a loopback address.
	ProfilesListen string
	// AuthToken, when not empty, must be presented by every caller, the
	// process's own services included; the process presents it on every
	// call it makes.
	AuthToken string
	// Logger receives the process's logs; nil discards them.
	Logger *slog.Logger
	// ShutdownTimeout bounds a graceful stop; zero means
	// grpcserver.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// SlowCall is how long a unary call may take before its success is
	// logged at info; zero means grpcserver.DefaultSlowCall.
	SlowCall time.Duration
	// MaxConnectionAge is grpcserver.Options.MaxConnectionAge: zero keeps
	// client connections for as long as they live.
	MaxConnectionAge time.Duration
	// TracerProvider, when set, traces the process instead of the one
	// the OTEL_* environment variables describe; the caller then owns it.
	TracerProvider trace.TracerProvider

	// The services this process runs; nil leaves a service out. Their
	// Logger, TracerProvider and Registerer are the process's: whatever
	// is set there is replaced. The engine's LLM, Environment and Dial
	// are filled in too, and its Advertise when empty (the gRPC
	// listener's address).
	LLM         *llm.Config
	Environment *environment.Config
	Engine      *engine.Config
	// LLMOptional starts the process without the llm service when its
	// Config cannot be set up (no provider configured), for a client
	// command that never calls a model.
	LLMOptional bool
	// LLMAddr and EnvironmentAddr are where an engine reaches the llm and
	// environment services that this process does not run. The
	// environment address may resolve to several replicas: new
	// environments are spread over them round-robin.
	LLMAddr, EnvironmentAddr string
	// Gateway, when set, serves the HTTP/SSE gateway and the web app in
	// front of this process's engine, which it then requires.
	Gateway *GatewayConfig
	// ReleaseStartup gives back, once the servers have started and before
	// the process reports itself serving, the memory its start-up used
	// and serving does not (resident.Release), for a long-running server.
	ReleaseStartup bool
}

// check reports what makes cfg unusable.
func (cfg *Config) check() error {
	switch {
	case strings.TrimSpace(cfg.Name) == "":
		return errors.New("assemble: Config.Name is required")
	case cfg.Listen == "" && cfg.Listener == nil:
		return errors.New("assemble: Config.Listen or Config.Listener is required")
	case cfg.LLM == nil && cfg.Environment == nil && cfg.Engine == nil:
		return errors.New("assemble: no service to run")
	case cfg.Engine != nil && cfg.LLM == nil && cfg.LLMAddr == "":
		return errors.New("assemble: the engine needs the llm service's address")
	case cfg.Engine != nil && cfg.Environment == nil && cfg.EnvironmentAddr == "":
		return errors.New("assemble: the engine needs the environment service's address")
	case cfg.Gateway != nil && cfg.Engine == nil:
		return errors.New("assemble: the HTTP gateway needs the engine in the process")
	}
	return nil
}

// Process is one server process built by [New]: its gRPC server with the
// services registered, listening but not yet serving. Call
// [Process.Serve], or [Process.Close] to give up without serving.
type Process struct {
	cfg        Config
	log        *slog.Logger
	metrics    *prometheus.Registry
	tracer     trace.TracerProvider
	propagator propagation.TextMapPropagator

	lis, metricsLis, profilesLis net.Listener
	addr                         string
	srv                          *grpcserver.Server
	// local is this process's own connection to its server, through the
	// in-process channel.
	local grpcclient.Conn
	// services lists the services it runs, and describe what they were
	// configured with, for the log.
	services []string
	describe []any
	// stop runs when the server begins to stop, in order; release runs in
	// reverse order once it has stopped (or when New fails, or Close).
	stop    []func(context.Context)
	release []func() error
	// serving are called once Serve has started the servers: the work a
	// service does on its own (the engine resuming cut-off tasks).
	serving []func()
	// settle are called, when the process gives its start-up memory back,
	// just before: the work a service would do in the background moments
	// after start-up (the engine's store checkpointing start-up's writes),
	// done within the start-up instead.
	settle []func(context.Context) error
	// front are the servers in front of the gRPC one (the HTTP gateway),
	// which Serve runs beside it.
	front []func(context.Context) error
	// resumeGC brings the garbage collector's target back from where
	// resident.HoldCollection put it for the start-up of a process that
	// gives its start-up memory back (Config.ReleaseStartup), a moment
	// after the process is ready (resumeGCAfter); otherwise it does
	// nothing.
	resumeGC func()
}

// resumeGCAfter is how long after a server is ready its collector's
// target comes back (resident.HoldCollection): its first collection,
// due at once then (the start-up's heap is past the usual first target),
// runs after the first calls of a client that waited for the server
// rather than beside them, on a machine of few cores, and after the
// server's first background rounds. Brought back at once, the collection
// ran while the first health answer was made in two of five benchmark
// runs, and its page faults counted in the cold start
// (docs/performance.md, fourteenth round).
const resumeGCAfter = time.Second

// New builds the process cfg describes: telemetry and metrics, the
// listeners (so a ":0" port has its real address at once), the gRPC
// server, and each service cfg sets, registered on it. On error,
// everything built so far is released.
func New(ctx context.Context, cfg Config) (_ *Process, err error) {
	if err := cfg.check(); err != nil {
		if cfg.Listener != nil {
			err = errors.Join(err, cfg.Listener.Close())
		}
		return nil, err
	}
	p := &Process{cfg: cfg, log: logger.OrDiscard(cfg.Logger), resumeGC: func() {}}
	if cfg.ReleaseStartup {
		// Brought back once the process is ready (Serve), or when it
		// closes without serving.
		p.resumeGC = resident.HoldCollection()
	}
	if cfg.Engine != nil {
		p.announceMode()
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
		}
	}()
	for _, phase := range []func(context.Context) error{
		p.observe, p.listen, p.serveGRPC, p.setupServices, p.setupGateway,
	} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	for _, f := range p.stop {
		p.srv.OnShutdown(f)
	}
	return p, nil
}

// observe sets up tracing and the Prometheus registry.
func (p *Process) observe(ctx context.Context) error {
	p.propagator = telemetry.Propagator()
	p.tracer = p.cfg.TracerProvider
	if p.tracer == nil {
		tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "penguin-" + p.cfg.Name, ServiceVersion: p.cfg.Version})
		if err != nil {
			return err
		}
		p.tracer, p.propagator = tel.TracerProvider, tel.Propagator
		p.release = append(p.release, func() error {
			// Spans still buffered get a few seconds to leave.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return tel.Shutdown(ctx)
		})
	}
	p.metrics = prometheus.NewRegistry()
	p.metrics.MustRegister(newRuntimeMetrics())
	return nil
}

// listen opens the gRPC listener and, when asked for, the metrics one.
func (p *Process) listen(context.Context) error {
	var err error
	if p.lis = p.cfg.Listener; p.lis == nil {
		if p.lis, err = net.Listen("tcp", p.cfg.Listen); err != nil {
			return err
		}
	}
	p.addr = p.lis.Addr().String()
	p.release = append(p.release, closeListener(&p.lis))
	if p.cfg.MetricsListen != "" {
		if p.metricsLis, err = net.Listen("tcp", p.cfg.MetricsListen); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		p.release = append(p.release, closeListener(&p.metricsLis))
	}
	if p.cfg.ProfilesListen != "" {
		if err := grpcserver.CheckProfilesAddr(p.cfg.ProfilesListen); err != nil {
			return err
		}
		if p.profilesLis, err = net.Listen("tcp", p.cfg.ProfilesListen); err != nil {
			return fmt.Errorf("profiles: %w", err)
		}
		p.release = append(p.release, closeListener(&p.profilesLis))
	}
	return nil
}

// closeListener closes *l unless a server has taken it over (set it to
// nil).
func closeListener(l *net.Listener) func() error {
	return func() error {
		if *l == nil {
			return nil
		}
		err := (*l).Close()
		*l = nil
		return err
	}
}

// maxMessage bounds the messages between the services: the engine sends
// whole histories to the llm service.
const maxMessage = llm.DefaultMaxRequestBytes

// serveGRPC builds the gRPC server and the process's in-process
// connection to it.
func (p *Process) serveGRPC(context.Context) error {
	var opts []grpc.ServerOption
	if p.cfg.LLM != nil {
		opts = append(opts, grpc.MaxRecvMsgSize(maxMessage))
	}
	srv, err := grpcserver.New(grpcserver.Options{
		Name:             p.cfg.Name,
		AuthToken:        p.cfg.AuthToken,
		Logger:           p.log,
		ShutdownTimeout:  p.cfg.ShutdownTimeout,
		SlowCall:         p.cfg.SlowCall,
		MaxConnectionAge: p.cfg.MaxConnectionAge,
		Registerer:       p.metrics,
		TracerProvider:   p.tracer,
		Propagator:       p.propagator,
		ServerOptions:    opts,
	})
	if err != nil {
		return err
	}
	p.srv = srv
	p.release = append(p.release, func() error { srv.Close(); return nil })
	if p.local, err = p.dial(inProcessTarget); err != nil {
		return err
	}
	p.release = append(p.release, p.local.Close)
	return nil
}

// inProcessTarget names the in-process peer in traces and logs.
const inProcessTarget = "in-process"

// dial opens a connection with the process's token and tracing: to its
// own server through the in-process channel when target is
// inProcessTarget, over the network otherwise.
func (p *Process) dial(target string, opts ...grpc.DialOption) (grpcclient.Conn, error) {
	o := grpcclient.Options{
		Token: p.cfg.AuthToken, TracerProvider: p.tracer, Propagator: p.propagator,
		DialOptions: append([]grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage))}, opts...),
	}
	if target == inProcessTarget {
		return grpcclient.NewInProcess(p.srv.InProcess(), o), nil
	}
	return grpcclient.New(target, o)
}

// setupServices stands up the services the process runs. The
// environment's set-up (the cgroup sweep and probes, the sandbox's
// trampoline, the scratch directory) depends on neither of the others, so
// it runs beside them, which on a new home takes it off the path to ready.
// The llm service's runs beside the engine's too, unless both are to
// write a new SQLite file (llmBesideEngine). What each adds to the
// process (its registration on the server, what it releases, how it
// stops, what the "listening" line says of it) is added once all have
// returned, in the order llm, environment, engine; when one fails, what
// the others built is still added, for New's Close to release.
func (p *Process) setupServices(ctx context.Context) error {
	var parts [3]serviceStart
	for i, prepare := range []func(context.Context) (serviceStart, error){p.setupLLM, p.setupEnvironment, p.setupEngine} {
		var err error
		if parts[i], err = prepare(ctx); err != nil {
			return err
		}
	}
	llmPart, envPart, enginePart := &parts[0], &parts[1], &parts[2]
	envDone := envPart.runBeside()
	if p.llmBesideEngine() {
		llmDone := llmPart.runBeside()
		enginePart.run()
		<-llmDone
	} else if llmPart.run(); llmPart.err == nil {
		enginePart.run()
	}
	<-envDone
	var errs []error
	for _, part := range parts {
		if part.err != nil {
			errs = append(errs, part.err)
		} else if part.started {
			part.add()
		}
	}
	return errors.Join(errs...)
}

// llmBesideEngine says whether the llm service's set-up may run beside
// the engine's: unless its route store is a SQLite file not made yet. On
// a server that runs both, the route store is the engine's SQLite file;
// on a new home each writes its schema to it, and run at once one of
// them would wait for the other's write lock in SQLite's busy handler,
// which sleeps in steps of 1 to 100 ms rather than queue, so there the
// llm service's goes first, as before. Once the file is there (a laptop's
// every start but its first), the route store's open only reads
// (routestore.Open), which waits for no writer in WAL mode.
func (p *Process) llmBesideEngine() bool {
	if p.cfg.LLM == nil || p.cfg.Engine == nil || p.cfg.LLM.RouteStore == "" {
		return true
	}
	path, ok := routestore.SQLitePath(p.cfg.LLM.RouteStore)
	if !ok {
		return true
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// serviceStart is one service's set-up, in two halves: start, the work
// that may run beside another service's (it must not touch the Process),
// and add, run afterwards one service at a time when start has
// succeeded, which records the service in the Process. A zero
// serviceStart is a service this process does not run.
type serviceStart struct {
	start func() error
	add   func()
	// started says start has run, and err is what it returned.
	started bool
	err     error
}

// run runs the start half, if any.
func (s *serviceStart) run() {
	if s.start != nil {
		s.started, s.err = true, s.start()
	}
}

// runBeside runs the start half in a goroutine of its own, and returns
// a channel closed once it has returned.
func (s *serviceStart) runBeside() <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); s.run() }()
	return done
}

// setupLLM stands the llm service up when the process runs it, and keeps
// its provider routes in step with the providers file until ctx ends.
func (p *Process) setupLLM(ctx context.Context) (serviceStart, error) {
	if p.cfg.LLM == nil {
		return serviceStart{}, nil
	}
	cfg := *p.cfg.LLM
	cfg.Logger, cfg.TracerProvider, cfg.Registerer = p.log, p.tracer, p.metrics
	var svc *llm.Service
	start := func() error {
		var err error
		svc, err = llm.Setup(cfg)
		if err != nil && p.cfg.LLMOptional {
			p.log.Debug("no llm service in this process", "error", err)
			return nil
		}
		return err
	}
	add := func() {
		if svc == nil {
			return
		}
		p.release = append(p.release, svc.Close)
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { defer close(watched); svc.Watch(wctx, 0) }()
		p.release = append(p.release, func() error { stopWatch(); <-watched; return nil })
		penguinv1.RegisterLLMServiceServer(p.srv, svc)
		p.services = append(p.services, "llm")
	}
	return serviceStart{start: start, add: add}, nil
}

// setupEnvironment stands the environment service up when the process
// runs it. Its environments are disposed when the server begins to stop,
// after the engine's tasks (see setupEngine), which ends every process
// they started.
func (p *Process) setupEnvironment(context.Context) (serviceStart, error) {
	if p.cfg.Environment == nil {
		return serviceStart{}, nil
	}
	cfg := *p.cfg.Environment
	cfg.Logger, cfg.Registerer = p.log, p.metrics
	if cfg.Version == "" {
		cfg.Version = p.cfg.Version
	}
	var svc *environment.Service
	var closeEnv func() error
	start := func() error {
		var err error
		svc, closeEnv, err = environment.Setup(cfg)
		return err
	}
	add := func() {
		p.release = append(p.release, closeEnv)
		penguinv1.RegisterEnvironmentServiceServer(p.srv, svc)
		p.services = append(p.services, "environment")
		p.stop = append(p.stop, func(context.Context) {
			if err := closeEnv(); err != nil {
				p.log.Warn("environment shutdown", "error", err)
			}
		})
		p.note("root", svc.Root(), "environment_advertise", cfg.Advertise)
	}
	return serviceStart{start: start, add: add}, nil
}

// setupEngine stands the engine up when the process runs it, with
// connections to the llm and environment services: in-process for those
// this process runs, over the network for the others.
func (p *Process) setupEngine(ctx context.Context) (serviceStart, error) {
	if p.cfg.Engine == nil {
		return serviceStart{}, nil
	}
	cfg := *p.cfg.Engine
	cfg.Logger, cfg.TracerProvider, cfg.Registerer = p.log, p.tracer, p.metrics
	if cfg.Advertise == "" {
		cfg.Advertise = p.Addr()
	}
	var err error
	if cfg.LLM, err = p.peer(p.cfg.LLM != nil, p.cfg.LLMAddr); err != nil {
		return serviceStart{}, fmt.Errorf("llm: %w", err)
	}
	// The address may name several replicas (a headless Service, one
	// address per pod): new environments are spread over them (grpcclient
	// balances round-robin), and each session then talks to its own
	// replica at the address it advertised.
	if cfg.Environment, err = p.peer(p.cfg.Environment != nil, p.cfg.EnvironmentAddr); err != nil {
		return serviceStart{}, fmt.Errorf("environment: %w", err)
	}
	cfg.Dial = func(target string) (grpcclient.Conn, error) {
		// This replica's own environments, when it advertises them at its
		// own address, are in the process.
		if target == cfg.Advertise && p.cfg.Environment != nil {
			target = inProcessTarget
		}
		return p.dial(target)
	}
	cfg.ServiceToken = p.cfg.AuthToken
	var eng *engine.Engine
	start := func() error {
		var err error
		eng, err = engine.Setup(ctx, cfg)
		return err
	}
	return serviceStart{start: start, add: func() { p.addEngine(eng, cfg) }}, nil
}

// addEngine records in the process the engine set up with cfg.
func (p *Process) addEngine(eng *engine.Engine, cfg engine.Config) {
	// The engine owns the users: it decides who calls every service of
	// this process.
	p.srv.SetAuthenticator(eng.Guard())
	p.release = append(p.release, eng.Close)
	eng.Register(p.srv)
	if p.cfg.LLM == nil {
		penguinv1.RegisterLLMServiceServer(p.srv, &llmFront{llm: penguinv1.NewLLMServiceClient(cfg.LLM)})
	}
	p.serving = append(p.serving, eng.StartResuming)
	p.settle = append(p.settle, eng.Settle)
	p.services = append(p.services, "engine")
	// The engine stops first: its tasks abort and each records how it
	// ended while the environments and their processes are still there.
	p.stop = append([]func(context.Context){func(ctx context.Context) {
		if err := eng.Shutdown(ctx); err != nil {
			p.log.Warn("engine shutdown", "error", err)
		}
	}}, p.stop...)
	p.note("store", redactURL(cfg.StoreURL), "agent_state", cfg.AgentState,
		"advertise", cfg.Advertise, "llm", p.cfg.LLMAddr, "environment", p.cfg.EnvironmentAddr)
}

// announceMode says, as the process's first line, how it decides who its
// callers are. A team server needs a service token for its services to
// call each other: when none is configured, this process makes a random
// one of its own (then nothing outside it can use the operator's power).
func (p *Process) announceMode() {
	if p.cfg.Engine.Team {
		if p.cfg.AuthToken == "" {
			var raw [32]byte
			_, _ = rand.Read(raw[:])
			p.cfg.AuthToken = hex.EncodeToString(raw[:])
		}
		p.log.Info("team mode: callers sign in or present a personal access token; the service token (PENGUIN_AUTH_TOKEN) is the operator's",
			"mode", "team")
		return
	}
	p.log.Info("local mode: no sign-in; every caller is the user "+store.AdminUser+", who owns the project "+store.DefaultProject+
		" (listen beyond loopback or pass --team for accounts and sign-in)", "mode", "local")
}

// note adds the key-value pairs whose value is not empty to the fields
// of the "listening" line.
func (p *Process) note(kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			p.describe = append(p.describe, kv[i], kv[i+1])
		}
	}
}

// peer returns the connection to a service the engine calls: the
// in-process one when this process runs it, a new one to addr otherwise.
func (p *Process) peer(inProcess bool, addr string, opts ...grpc.DialOption) (grpc.ClientConnInterface, error) {
	if inProcess {
		return p.local, nil
	}
	c, err := p.dial(addr, opts...)
	if err != nil {
		return nil, err
	}
	p.release = append(p.release, c.Close)
	return c, nil
}

// redactURL hides the password of a store URL, for the log.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// Addr returns the address the gRPC server listens at.
func (p *Process) Addr() string { return p.addr }

// Metrics returns the registry of the process's metrics, the one
// MetricsListen serves.
func (p *Process) Metrics() prometheus.Gatherer { return p.metrics }

// Local returns the process's own connection to its services, through the
// in-process channel, with its token and tracing: the HTTP gateway and
// a client command's embedded server call the engine through it. The
// process closes it.
func (p *Process) Local() grpc.ClientConnInterface { return p.local }

// Serve serves the services, the metrics endpoint and the HTTP gateway
// when configured, until ctx ends or one of them fails; then all of them
// stop, the
// engine's tasks abort, the environments are disposed, and everything the
// process holds is released. Serve may be called once.
func (p *Process) Serve(ctx context.Context) error {
	lis, metricsLis, profilesLis := p.lis, p.metricsLis, p.profilesLis
	p.lis, p.metricsLis, p.profilesLis = nil, nil, nil // the servers close them
	if lis == nil {
		return errors.New("assemble: Serve called twice, or after Close")
	}
	if p.cfg.ReleaseStartup {
		// Not serving until the start-up memory is given back below.
		p.srv.SetServing("", false)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.srv.Serve(gctx, lis) })
	if metricsLis != nil {
		g.Go(func() error { return grpcserver.ServeMetrics(gctx, metricsLis, p.metrics, p.log) })
	}
	if profilesLis != nil {
		g.Go(func() error { return grpcserver.ServeProfiles(gctx, profilesLis, p.log) })
	}
	for _, f := range p.front {
		g.Go(func() error { return f(gctx) })
	}
	for _, f := range p.serving {
		f()
	}
	if p.cfg.ReleaseStartup {
		for _, f := range p.settle {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := f(sctx); err != nil {
				p.log.Debug("start-up's writes left to the background", "error", err)
			}
			cancel()
		}
		if err := resident.Release(); err != nil {
			p.log.Debug("start-up memory kept", "error", err)
		}
		p.srv.SetServing("", true)
		time.AfterFunc(resumeGCAfter, p.resumeGC)
	}
	p.log.Info(p.cfg.Name+" listening", append([]any{"addr", p.addr, "services", strings.Join(p.services, ","),
		"auth", p.cfg.AuthToken != ""}, p.describe...)...)
	return errors.Join(g.Wait(), p.Close())
}

// Close releases what the process holds, in the reverse order of its
// building. Serve calls it; call it only for a process that is never
// served. It is idempotent.
func (p *Process) Close() error {
	p.resumeGC()
	var errs []error
	for i := len(p.release) - 1; i >= 0; i-- {
		errs = append(errs, p.release[i]())
	}
	p.release = nil
	return errors.Join(errs...)
}
