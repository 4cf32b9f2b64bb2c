package environment

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/services/environment/command"
)

// metrics are the environment service's own Prometheus metrics, next to
// the per-RPC ones the server bootstrap keeps: what the tools did, and
// what a replica holds (environments and command sessions), which is what
// decides whether a replica can be drained or needs company.
type metrics struct {
	toolRuns     *prometheus.CounterVec
	toolDuration *prometheus.HistogramVec
	created      prometheus.Counter
}

// newMetrics builds the metrics of s and registers them with reg; a nil
// reg keeps them unregistered (they still count, nobody reads them).
func newMetrics(s *Service, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		toolRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "environment", Name: "tool_runs_total",
			Help: "Tool calls run, by tool and how they ended (stop_reason).",
		}, []string{"tool", "stop_reason"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "penguin", Subsystem: "environment", Name: "tool_run_duration_seconds",
			Help:    "Wall time of tool calls, from the call to its complete output.",
			Buckets: []float64{0.01, 0.05, 0.25, 1, 5, 15, 60, 300, 1800},
		}, []string{"tool"}),
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "environment", Name: "environments_created_total",
			Help: "Environments created on this replica.",
		}),
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "penguin", Subsystem: "environment", Name: "environments_active",
		Help: "Environments this replica holds now.",
	}, func() float64 { return float64(len(s.snapshot())) })
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "penguin", Subsystem: "environment", Name: "command_sessions_active",
		Help: "Command sessions (foreground and background) still running in this replica's environments.",
	}, func() float64 {
		n := 0
		for _, e := range s.snapshot() {
			for _, p := range e.commands.list() {
				if p.State == command.Running {
					n++
				}
			}
		}
		return float64(n)
	})
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.toolRuns, m.toolDuration, m.created, active, sessions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register environment metrics: %w", err)
		}
	}
	return m, nil
}

// observe records one finished tool call. tool is the tool's name, or
// "unknown" for a name the environment does not have, so a model that
// makes names up cannot grow the label set without bound.
func (m *metrics) observe(tool string, known bool, stop penguinv1.StopReason, took time.Duration) {
	if !known {
		tool = "unknown"
	}
	m.toolRuns.WithLabelValues(tool, stopReasonLabel(stop)).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(took.Seconds())
}

// stopReasonLabel is the short lower-case name of a stop reason; an
// output without one completed.
func stopReasonLabel(s penguinv1.StopReason) string {
	if s == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		return "completed"
	}
	return enumword.Word(s)
}
