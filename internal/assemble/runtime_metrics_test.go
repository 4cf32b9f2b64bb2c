package assemble

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace/noop"
)

// familyNames gathers g twice (a second scrape must not register or fail
// anew) and returns the metric families' names.
func familyNames(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	var names []string
	for range 2 {
		mfs, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
	}
	return names
}

// TestRuntimeMetricsAsTheCollectors: the lazy collector gathers the same
// families as the Go and process collectors registered as they were.
func TestRuntimeMetricsAsTheCollectors(t *testing.T) {
	t.Parallel()
	direct := prometheus.NewRegistry()
	direct.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lazy := prometheus.NewRegistry()
	lazy.MustRegister(newRuntimeMetrics())
	want, got := familyNames(t, direct), familyNames(t, lazy)
	if !slices.Equal(got, want) {
		t.Errorf("gathered %q, want %q", got, want)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "go_gc_duration_seconds"} {
		if !slices.Contains(got, name) {
			t.Errorf("%s not gathered: %q", name, got)
		}
	}
}

// TestObserveBuildsNoCollectors: setting up a process's metrics builds
// the Go runtime's and the process's collectors no more (233 allocations
// with them, docs/performance.md); the first scrape does.
func TestObserveBuildsNoCollectors(t *testing.T) {
	p := &Process{cfg: Config{Name: "penguin", TracerProvider: noop.NewTracerProvider()}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(20, func() {
		if err := p.observe(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 20 {
		t.Errorf("observe made %v allocations, want at most 20", allocs)
	}
	if names := familyNames(t, p.Metrics()); !slices.Contains(names, "go_goroutines") {
		t.Errorf("go_goroutines not gathered: %q", names)
	}
}
