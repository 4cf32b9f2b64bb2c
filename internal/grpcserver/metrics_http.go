package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/penguin-agent/penguin/internal/logger"
)

// ServeMetrics serves the metrics in g at /metrics over plain HTTP on lis
// until ctx ends, then shuts the listener down, waiting up to five seconds
// for a scrape in progress. Metrics get their own listener so that they can
// stay inside the cluster while the gRPC port is exposed. It returns nil
// after a shutdown asked for through ctx. A nil log discards the logs.
func ServeMetrics(ctx context.Context, lis net.Listener, g prometheus.Gatherer, log *slog.Logger) error {
	log = logger.OrDiscard(log)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
	}))
	return serveHTTP(ctx, "metrics", lis, mux, log)
}

// ServeProfiles serves Go's runtime profiles (net/http/pprof: CPU, heap,
// allocations, goroutines, execution traces) under /debug/pprof/ over
// plain HTTP on lis until ctx ends, like [ServeMetrics]. It is for
// finding where a server's time and memory go, and is never on unless an
// operator asks: a profile shows the code a process runs and a goroutine
// dump its call stacks, so lis must be a loopback address (reach it from
// elsewhere with an SSH tunnel or kubectl port-forward), which
// [CheckProfilesAddr] checks before listening.
func ServeProfiles(ctx context.Context, lis net.Listener, log *slog.Logger) error {
	log = logger.OrDiscard(log)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return serveHTTP(ctx, "profiles", lis, mux, log)
}

// CheckProfilesAddr refuses a profiles address that is not a loopback
// one (see [ServeProfiles]); a host name must be localhost.
func CheckProfilesAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("profiles address %q: %w", addr, err)
	}
	if ip, err := netip.ParseAddr(host); (err == nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("profiles address %q: only a loopback address may serve profiles (127.0.0.1, [::1] or localhost)", addr)
}

// serveHTTP serves h on lis until ctx ends, then shuts it down, waiting
// up to five seconds for a request in progress. what names the server in
// logs and errors.
func serveHTTP(ctx context.Context, what string, lis net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info(what+" listening", "addr", lis.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("%s: serve: %w", what, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("%s: shut down: %w", what, err)
	}
	return nil
}
