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
//
// A method's series appear at its first call. They are not made ahead for
// every method (go-grpc-middleware's InitializeMetrics): a counter per
// status code and a histogram for each of some hundred methods held
// 1.9 MB of the heap from the start, a third of the server's heap at
// rest, mostly for methods and codes that never occur.
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
