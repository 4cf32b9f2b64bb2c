package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/telemetry"
)

// serverFlags are the flags every `penguin serve` variant has, so the four
// server commands spell and document them the same way.
type serverFlags struct {
	listen          string
	metricsListen   string
	authTokenFile   string
	shutdownTimeout time.Duration
	maxConnAge      time.Duration
}

// addServerFlags defines the common server flags on fs, with defaultListen
// as the gRPC address.
func addServerFlags(fs *flag.FlagSet, defaultListen string) *serverFlags {
	f := &serverFlags{}
	fs.StringVar(&f.listen, "listen", defaultListen, "gRPC address to listen on")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "address to serve Prometheus /metrics on; empty turns it off")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "file holding the bearer token clients must present (or set PENGUIN_AUTH_TOKEN)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", grpcserver.DefaultShutdownTimeout, "how long a graceful stop may take")
	fs.DurationVar(&f.maxConnAge, "max-connection-age", 0, "close client connections gracefully at this age, so clients of several replicas resolve their name again and find new ones; 0 keeps them")
	return f
}

// serverProcess is what every server command sets up around its services:
// the logger, the bearer token, OpenTelemetry and the Prometheus registry.
// Build it with newServerProcess and Close it when the command ends.
type serverProcess struct {
	// name names the server in logs and metrics ("llm", "penguin", …).
	name    string
	flags   *serverFlags
	log     *slog.Logger
	token   string
	tel     *telemetry.Telemetry
	metrics *prometheus.Registry
}

// newServerProcess reads the logger settings (PENGUIN_LOG_*), the token
// (PENGUIN_AUTH_TOKEN or --auth-token-file) and the OTEL_* variables. log,
// when not nil, replaces the logger the environment describes, for an
// embedded server that must stay quiet.
func newServerProcess(ctx context.Context, name string, flags *serverFlags, log *slog.Logger) (*serverProcess, error) {
	if log == nil {
		var err error
		if log, err = config.LoggerFromEnv(os.Stderr, os.LookupEnv); err != nil {
			return nil, err
		}
	}
	token, err := config.Secret(os.LookupEnv, "PENGUIN_AUTH_TOKEN", flags.authTokenFile)
	if err != nil {
		return nil, fmt.Errorf("auth token: %w", err)
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "penguin-" + name, ServiceVersion: version})
	if err != nil {
		return nil, err
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &serverProcess{name: name, flags: flags, log: log, token: token, tel: tel, metrics: metrics}, nil
}

// Close flushes the spans still buffered.
func (p *serverProcess) Close(ctx context.Context) {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.tel.Shutdown(shutdownCtx); err != nil {
		p.log.Warn("telemetry shutdown", "error", err)
	}
}

// newServer returns a gRPC server with the process's token, logger,
// metrics and tracing; opts are appended to the bootstrap's own options.
func (p *serverProcess) newServer(opts ...grpc.ServerOption) (*grpcserver.Server, error) {
	return grpcserver.New(grpcserver.Options{
		Name:             p.name,
		AuthToken:        p.token,
		Logger:           p.log,
		ShutdownTimeout:  p.flags.shutdownTimeout,
		MaxConnectionAge: p.flags.maxConnAge,
		Registerer:       p.metrics,
		TracerProvider:   p.tel.TracerProvider,
		Propagator:       p.tel.Propagator,
		ServerOptions:    opts,
	})
}

// dial opens a client connection to another penguin service with the same
// token and tracing as this process.
func (p *serverProcess) dial(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpcclient.New(target, grpcclient.Options{
		Token: p.token, TracerProvider: p.tel.TracerProvider, Propagator: p.tel.Propagator, DialOptions: opts,
	})
}

// listeners opens the gRPC listener on --listen and, when --metrics-listen
// is set, the metrics listener (nil otherwise). Opening them before
// serving lets a caller learn the real address of a ":0" port.
func (p *serverProcess) listeners() (grpcLis, metricsLis net.Listener, err error) {
	if grpcLis, err = net.Listen("tcp", p.flags.listen); err != nil {
		return nil, nil, fmt.Errorf("serve %s: %w", p.name, err)
	}
	if p.flags.metricsListen != "" {
		if metricsLis, err = net.Listen("tcp", p.flags.metricsListen); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("serve %s: metrics: %w", p.name, err), grpcLis.Close())
		}
	}
	return grpcLis, metricsLis, nil
}

// serve runs srv on grpcLis, the metrics endpoint on metricsLis when it is
// not nil, and every extra function, until ctx ends or one of them fails;
// then all of them stop. Each extra function must return once its context
// ends.
func (p *serverProcess) serve(ctx context.Context, srv *grpcserver.Server, grpcLis, metricsLis net.Listener, extra ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Serve(gctx, grpcLis) })
	if metricsLis != nil {
		g.Go(func() error { return grpcserver.ServeMetrics(gctx, metricsLis, p.metrics, p.log) })
	}
	for _, f := range extra {
		g.Go(func() error { return f(gctx) })
	}
	return g.Wait()
}

// redactURL returns a store URL fit for the log: a PostgreSQL URL's
// password (it comes from a Secret) is replaced by "xxxxx".
func redactURL(target string) string {
	if u, err := url.Parse(target); err == nil && u.User != nil {
		return u.Redacted()
	}
	return target
}
