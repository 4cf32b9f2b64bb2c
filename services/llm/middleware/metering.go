package middleware

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// Metering counts every model call and its tokens in Prometheus, per
// provider and model, so cost and failure rates can be watched without
// reading logs. Create it once per registry.
type Metering struct {
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ttft     *prometheus.HistogramVec
	active   *prometheus.GaugeVec
}

// NewMetering registers the llm metrics with reg.
func NewMetering(reg prometheus.Registerer) (*Metering, error) {
	m := &Metering{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "llm", Name: "requests_total",
			Help: "Model requests by provider, model, outcome status and failure code.",
		}, []string{"provider", "model", "status", "code"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "llm", Name: "tokens_total",
			Help: "Tokens reported by providers, by kind: input (uncached), cache_read, cache_write, output.",
		}, []string{"provider", "model", "kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "penguin", Subsystem: "llm", Name: "request_duration_seconds",
			Help:    "Wall time of model requests, from the call to the outcome.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"provider", "model", "status"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "penguin", Subsystem: "llm", Name: "time_to_first_frame_seconds",
			Help:    "Time from the call to its first streamed frame.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"provider", "model"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "penguin", Subsystem: "llm", Name: "streams_active",
			Help: "Model streams in progress, by provider and model.",
		}, []string{"provider", "model"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.tokens, m.duration, m.ttft, m.active} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register llm metrics: %w", err)
		}
	}
	return m, nil
}

// Middleware returns the metering middleware.
func (m *Metering) Middleware() stream.Middleware {
	return func(next stream.Streamer) stream.Streamer {
		return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
			active := m.active.WithLabelValues(req.Provider, req.Model)
			active.Inc()
			defer active.Dec()
			o := &observation{start: time.Now()}
			out := next.Stream(ctx, req, observe(emit, o))
			status := statusName(out.GetStatus())
			m.requests.WithLabelValues(req.Provider, req.Model, status, codeName(out.GetCode())).Inc()
			m.duration.WithLabelValues(req.Provider, req.Model, status).Observe(time.Since(o.start).Seconds())
			if o.firstFrame > 0 {
				m.ttft.WithLabelValues(req.Provider, req.Model).Observe(o.firstFrame.Seconds())
			}
			if u := o.usage; u != nil {
				input := u.total - u.output - u.cacheRead - u.cacheWrite
				m.add(req, "input", input)
				m.add(req, "cache_read", u.cacheRead)
				m.add(req, "cache_write", u.cacheWrite)
				m.add(req, "output", u.output)
			}
			return out
		})
	}
}

func (m *Metering) add(req *stream.Request, kind string, n int64) {
	if n > 0 {
		m.tokens.WithLabelValues(req.Provider, req.Model, kind).Add(float64(n))
	}
}
