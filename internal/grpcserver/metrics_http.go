package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info("metrics listening", "addr", lis.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("metrics: shut down: %w", err)
	}
	return nil
}
