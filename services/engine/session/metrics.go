package session

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

// metrics are the engine's domain metrics: what its sessions and tasks
// do, next to the per-RPC metrics the server bootstrap keeps.
type metrics struct {
	sessionsCreated *prometheus.CounterVec
	runs            *prometheus.CounterVec
	runsActive      prometheus.Gauge
	turns           *prometheus.CounterVec
	turnDuration    prometheus.Histogram
	retries         *prometheus.CounterVec
	approvals       *prometheus.CounterVec
	rebinds         *prometheus.CounterVec
	idleDisposals   prometheus.Counter
	forwarded       *prometheus.CounterVec
	tokens          *prometheus.CounterVec
	cost            *prometheus.CounterVec
}

// newMetrics builds the engine's metrics and registers them, with a gauge
// of the sessions m has loaded, with reg; a nil reg keeps them
// unregistered.
func newMetrics(m *Manager, reg prometheus.Registerer) (*metrics, error) {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "penguin", Subsystem: "engine", Name: name, Help: help}
	}
	x := &metrics{
		sessionsCreated: prometheus.NewCounterVec(opts("sessions_created_total",
			"Sessions created, by how: new, fork or subagent."), []string{"kind"}),
		runs: prometheus.NewCounterVec(opts("runs_total",
			"Tasks ended, by kind (run or compaction) and status (completed, aborted, failed, auth, ...)."), []string{"kind", "status"}),
		runsActive: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "penguin", Subsystem: "engine", Name: "runs_active",
			Help: "Tasks running on this replica now."}),
		turns: prometheus.NewCounterVec(opts("turns_total",
			"Turns ended (a model request with its reconnects and the tool calls it asked for), by status."), []string{"status"}),
		turnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "penguin", Subsystem: "engine", Name: "turn_duration_seconds",
			Help:    "Wall time of turns, approvals and tool runs included.",
			Buckets: []float64{0.25, 1, 2.5, 5, 10, 30, 60, 180, 600, 1800}}),
		retries: prometheus.NewCounterVec(opts("retries_total",
			"Model requests retried after a failure, by the failed attempt's status (timeout, malformed, failed)."), []string{"status"}),
		approvals: prometheus.NewCounterVec(opts("approvals_total",
			"Approval decisions on tool calls, by decision (allow, deny, forbidden), whoever made them (mode, policy or person)."), []string{"decision"}),
		rebinds: prometheus.NewCounterVec(opts("environment_rebinds_total",
			"Fresh environments created for sessions whose environment was gone, by reason: missing (its replica no longer knows it) or unreachable (its replica is gone)."), []string{"reason"}),
		idleDisposals: prometheus.NewCounter(opts("environments_idle_disposed_total",
			"Environments disposed of because their session had not used them for the idle timeout; the workspace stays, and the next tool call gets a fresh environment.")),
		forwarded: prometheus.NewCounterVec(opts("forwarded_calls_total",
			"Calls for runs another replica owns (Attach, Approve, Steer, Abort, RetryNow), passed on to that replica, by method and the gRPC code of the answer."), []string{"method", "code"}),
		tokens: prometheus.NewCounterVec(opts("tokens_total",
			"Tokens of model requests, by provider, model and kind (total, output, reasoning, cache_read, cache_write)."), []string{"provider", "model", "kind"}),
		cost: prometheus.NewCounterVec(opts("cost_usd_total",
			"Cost of model requests in USD from the gateway's catalog prices, by provider and model (requests without a known price add nothing)."), []string{"provider", "model"}),
	}
	loaded := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "penguin", Subsystem: "engine", Name: "sessions_loaded",
		Help: "Sessions loaded on this replica (running a task or watched)."}, func() float64 { return float64(m.Loaded()) })
	if reg == nil {
		return x, nil
	}
	for _, c := range []prometheus.Collector{x.sessionsCreated, x.runs, x.runsActive, x.turns, x.turnDuration, x.retries, x.approvals, x.rebinds, x.idleDisposals, x.forwarded, x.tokens, x.cost, loaded} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register engine metrics: %w", err)
		}
	}
	return x, nil
}

// ObserveForward counts a call this replica passed on to the replica that
// owns the session's run, with the code it answered. It fits
// engine.Forwarding.Observe.
func (m *Manager) ObserveForward(method string, code codes.Code) {
	m.metrics.forwarded.WithLabelValues(method, code.String()).Inc()
}

// observeEmit counts what an emitted message tells: approval decisions,
// and each request's tokens and cost by model.
func (x *metrics) observeEmit(m *penguinv1.OmniMessage) {
	if d := m.GetApprovalDecision(); d != nil {
		x.approvals.WithLabelValues(enumword.Word(d.GetDecision())).Inc()
	}
	if tu := m.GetTokenUsage(); tu != nil {
		r := tu.GetRequest()
		p, model := tu.GetProvider(), tu.GetModelId()
		for kind, n := range map[string]int64{"total": r.GetTotal(), "output": r.GetOutput(), "reasoning": r.GetReasoning(),
			"cache_read": r.GetCacheRead(), "cache_write": r.GetCacheWrite()} {
			if n > 0 {
				x.tokens.WithLabelValues(p, model, kind).Add(float64(n))
			}
		}
		if c := r.GetCostUsd(); c > 0 {
			x.cost.WithLabelValues(p, model).Add(c)
		}
	}
}

// turnEnded counts one turn.
func (x *metrics) turnEnded(status penguinv1.StopReason, retried []penguinv1.StopReason, took time.Duration) {
	x.turns.WithLabelValues(enumword.Word(status)).Inc()
	x.turnDuration.Observe(took.Seconds())
	for _, s := range retried {
		x.retries.WithLabelValues(enumword.Word(s)).Inc()
	}
}
