package assemble

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// runtimeMetrics collects the Go runtime's metrics (go_*) and the
// process's (process_*) for the process's registry, but builds their
// collectors at the first scrape rather than at start. The Go collector
// reads the runtime's metric descriptions and makes a descriptor for each
// when it is made, the process collector its descriptors: 233 allocations
// and some 0.3 ms of every server's start (docs/performance.md), for
// metrics that only a scrape of MetricsListen reads, and most servers
// (a laptop's `penguin serve`, every embedded one) are never scraped.
//
// It describes nothing, which makes it one of the registry's unchecked
// collectors: the registry does not check its metrics against the others'
// when it is registered, only when they are gathered, where it checks
// every metric's name and labels for conflicts all the same.
type runtimeMetrics struct {
	collectors func() []prometheus.Collector
}

// newRuntimeMetrics returns the collector of the Go runtime's and the
// process's metrics, the same ones as collectors.NewGoCollector and
// collectors.NewProcessCollector with their default options.
func newRuntimeMetrics() *runtimeMetrics {
	return &runtimeMetrics{collectors: sync.OnceValue(func() []prometheus.Collector {
		return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	})}
}

// Describe describes nothing, so that registering the collector builds
// nothing (see runtimeMetrics).
func (*runtimeMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect builds the collectors the first time and collects them.
func (r *runtimeMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.collectors() {
		c.Collect(ch)
	}
}
