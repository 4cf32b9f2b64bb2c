package grpcserver

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// newServerMetrics builds the go-grpc-middleware Prometheus collectors:
// started, handled (by code) and message counters, and a handling-time
// histogram, all labelled server=name so several servers can share one
// registry. The buckets, in seconds, reach from quick unary calls to agent
// runs that stream for an hour.
func newServerMetrics(name string) *grpcprom.ServerMetrics {
	labels := prometheus.Labels{"server": name}
	return grpcprom.NewServerMetrics(
		grpcprom.WithServerCounterOptions(grpcprom.WithConstLabels(labels)),
		grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramConstLabels(labels),
			grpcprom.WithHistogramBuckets([]float64{0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 60, 300, 900, 3600}),
		),
	)
}
