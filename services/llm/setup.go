package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/providers"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// DefaultIdleTimeout ends a provider stream that sends nothing for this
// long.
const DefaultIdleTimeout = 60 * time.Second

// Config is what a process needs to stand the service up the standard way:
// `penguin serve llm` and the all-in-one `penguin serve` both use [Setup].
type Config struct {
	// ProvidersFile is the providers YAML; empty means the routes the
	// environment implies (OPENAI_API_KEY, ANTHROPIC_API_KEY).
	ProvidersFile string
	// Lookup reads environment variables. Required.
	Lookup config.LookupFunc
	// Logger receives the per-request log lines; nil discards them.
	Logger *slog.Logger
	// TracerProvider receives the per-request spans; nil turns them off.
	TracerProvider trace.TracerProvider
	// Registerer receives the token and request metrics; nil turns them
	// off.
	Registerer prometheus.Registerer
	// HTTPClient sends provider requests; nil means one client for all
	// routes with a connection pool sized for many concurrent streams
	// (see [NewHTTPClient]).
	HTTPClient *http.Client
	// IdleTimeout is the idle-stream timeout; zero means
	// DefaultIdleTimeout, negative turns it off.
	IdleTimeout time.Duration
	// RequestTimeout applies to requests that set none; zero means
	// DefaultRequestTimeout, negative turns it off.
	RequestTimeout time.Duration
	// MaxRequestBytes bounds a request; zero means DefaultMaxRequestBytes.
	MaxRequestBytes int
	// Middleware run inside the shipped ones (tracing, logging, metering),
	// next to the adapter: fault injection in tests, for instance.
	Middleware []stream.Middleware
}

// Setup reads the provider routes, builds their adapters, and returns the
// service with tracing, logging and metering around every call (outermost
// first), then cfg.Middleware.
func Setup(cfg Config) (*Service, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("llm: Config.Lookup is required")
	}
	var file *providers.File
	if cfg.ProvidersFile != "" {
		f, err := providers.Load(cfg.ProvidersFile)
		if err != nil {
			return nil, err
		}
		file = f
	} else {
		file = providers.FromEnv(cfg.Lookup)
		if len(file.Providers) == 0 {
			return nil, errors.New("llm: no providers configured: pass a providers file, or set OPENAI_API_KEY or ANTHROPIC_API_KEY")
		}
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = NewHTTPClient()
	}
	reg := registry.New()
	if err := providers.Build(file, reg, providers.Deps{
		Lookup: cfg.Lookup, HTTPClient: hc, IdleTimeout: idle, TracerProvider: cfg.TracerProvider,
	}); err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	log := logger.OrDiscard(cfg.Logger)
	var mw []stream.Middleware
	if cfg.TracerProvider != nil {
		mw = append(mw, middleware.Tracing(cfg.TracerProvider))
	}
	mw = append(mw, middleware.Logging(log))
	if cfg.Registerer != nil {
		m, err := middleware.NewMetering(cfg.Registerer)
		if err != nil {
			return nil, fmt.Errorf("llm: %w", err)
		}
		mw = append(mw, m.Middleware())
	}
	mw = append(mw, cfg.Middleware...)
	return New(Options{
		Registry: reg, Middleware: mw, DefaultRequestTimeout: cfg.RequestTimeout,
		MaxRequestBytes: cfg.MaxRequestBytes, Logger: log,
	})
}

// Connection pool bounds of [NewHTTPClient].
const (
	// MaxIdleConnsPerProvider is how many idle connections to one
	// provider host are kept for the next requests.
	MaxIdleConnsPerProvider = 256
	// MaxIdleConns bounds the idle connections to all hosts together.
	MaxIdleConns = 1024
)

// NewHTTPClient returns the client Setup uses when none is given: Go's
// default transport (proxy settings from the environment, HTTP/2 where the
// provider offers it, the usual timeouts) with a pool that keeps up to
// MaxIdleConnsPerProvider idle connections per host instead of Go's
// default of two. A gateway runs many streams to the same provider at
// once; over HTTP/1.1 (local servers such as vLLM or Ollama, most
// gateways in front of them) each stream holds its own connection, and
// with a pool of two every stream beyond the second would pay a new
// connection (and TLS handshake) before its first token.
func NewHTTPClient() *http.Client {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok { // replaced by something else: leave it in charge
		return &http.Client{}
	}
	tr := base.Clone()
	tr.MaxIdleConns = MaxIdleConns
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerProvider
	return &http.Client{Transport: tr}
}
