package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/routestore"
	"github.com/penguin-agent/penguin/services/llm/routing"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// DefaultIdleTimeout ends a provider stream that sends nothing for this
// long.
const DefaultIdleTimeout = 60 * time.Second

// Config is what a process needs to stand the service up the standard way:
// `penguin serve llm` and the all-in-one `penguin serve` both use [Setup].
type Config struct {
	// ProvidersFile is the providers YAML. Its routes come first; the
	// presets that the environment turns on (see routing.FromEnv) add
	// the routes it does not name. A file that does not exist yet adds
	// nothing, and is picked up by [Service.Watch] once it does.
	ProvidersFile string
	// RouteStore is where the routes added through the API (AddProvider
	// and kin) are kept: a postgres:// URL, shared by every replica, or a
	// SQLite path; empty for none, and the API then refuses to add one.
	// The providers file and the environment define the global routes
	// they name: a stored global route of the same name is not used.
	RouteStore string
	// RouteSecret seals the stored routes' API keys (see
	// routestore.NewSealer); required with RouteStore, and the same for
	// every replica. One secret per line: the first seals, the others
	// are earlier secrets that still open the keys sealed under them (a
	// key rotation; see ResealRoutes).
	RouteSecret []byte
	// RouteKeyFile holds the secret when RouteSecret is empty; with
	// MakeRouteKey, a missing file is made with a random secret (mode
	// 0600), for a server whose store no other machine shares.
	RouteKeyFile string
	MakeRouteKey bool
	// Catalog is a file or an http(s) URL of a catalog in the format of
	// the built-in one, laid over it field by field; empty for the
	// built-in catalog alone.
	Catalog string
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

// Setup reads the catalog and the provider routes, builds their adapters,
// and returns the service with tracing, logging and metering around every
// call (outermost first), then cfg.Middleware. No provider at all is not
// an error: the service then answers every request with an outcome that
// says how to add one, until a reload finds one. An invalid providers file
// is an error at start-up (later, a reload keeps the routes in use).
func Setup(cfg Config) (*Service, error) {
	if cfg.Lookup == nil {
		return nil, errors.New("llm: Config.Lookup is required")
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = DefaultIdleTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = NewHTTPClient()
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
	src := &routeSource{file: cfg.ProvidersFile, lookup: cfg.Lookup, log: log, deps: routing.Deps{
		Lookup: cfg.Lookup, HTTPClient: hc, IdleTimeout: idle, TracerProvider: cfg.TracerProvider, Logger: log,
	}}
	if cfg.RouteStore != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		src.store, err = openRouteStore(ctx, &cfg, cfg.MakeRouteKey)
		cancel()
		if err != nil {
			return nil, err
		}
		src.storeChanged = src.store.ChangeCheck()
	}
	cat, err := setupCatalog(cfg.Catalog, hc)
	if err != nil {
		return nil, errors.Join(err, src.close())
	}
	src.deps.Catalog = cat
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	rs, err := src.build(ctx)
	cancel()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("llm: %w", err), src.close())
	}
	svc, err := New(Options{
		Registry: rs.global, Middleware: mw, DefaultRequestTimeout: cfg.RequestTimeout,
		MaxRequestBytes: cfg.MaxRequestBytes, Logger: log, Catalog: cat,
	})
	if err != nil {
		return nil, errors.Join(err, src.close())
	}
	svc.routes.Store(rs)
	svc.source, svc.store = src, src.store
	if rs.global.Len() == 0 {
		log.Warn("no model provider is configured: the llm service answers every request with how to add one", "how", svc.notice)
	}
	return svc, nil
}

// setupCatalog returns the built-in catalog, merged with the override
// catalog at ref (a file or a URL) when ref is set.
func setupCatalog(ref string, hc *http.Client) (*catalog.Catalog, error) {
	cat := catalog.Builtin()
	if ref == "" {
		return cat, nil
	}
	raw, err := catalog.ReadOverride(context.Background(), ref, hc)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	if cat, err = catalog.Merge(cat, raw); err != nil {
		return nil, fmt.Errorf("llm: %s: %w", ref, err)
	}
	return cat, nil
}

// Close releases what Setup opened: the route store.
func (s *Service) Close() error {
	if s.source == nil {
		return nil
	}
	return s.source.close()
}

// close closes the route store, if any.
func (src *routeSource) close() error {
	if src.store == nil {
		return nil
	}
	return src.store.Close()
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
// connection (and TLS handshake) before its first token. Its connections
// copy a request body through a pooled buffer (see [copyConn]).
func NewHTTPClient() *http.Client {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok { // replaced by something else: leave it in charge
		return &http.Client{}
	}
	tr := base.Clone()
	tr.MaxIdleConns = MaxIdleConns
	tr.MaxIdleConnsPerHost = MaxIdleConnsPerProvider
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &copyConn{c}, nil
	}
	return &http.Client{Transport: tr}
}

// copyConn is a provider connection whose ReadFrom copies through a pooled
// buffer. The HTTP/1.1 transport writes a request body of known length by
// filling its 4 KiB write buffer, then handing the rest, behind an
// io.LimitedReader, to the connection's ReadFrom; a TCP connection's
// ReadFrom (nothing to splice or send from a file) falls back to io.Copy,
// which allocates a buffer of the rest's size, up to 32 KiB, at every
// request: most of a model request's body again. A connection under TLS
// is written through the TLS connection, which has no ReadFrom, and an
// HTTP/2 transport copies through frame buffers of its own, so this is
// the HTTP/1.1 connection in clear: a local model server's, a gateway's.
// A provider request's body is always in memory, so nothing is lost by
// not splicing.
type copyConn struct{ net.Conn }

// copyBufSize is io.Copy's own buffer size, so that a body longer than it
// goes out in the same writes as before.
const copyBufSize = 32 << 10

// copyBufs holds copyConn's buffers.
var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// ReadFrom writes what r reads to the connection.
func (c *copyConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[copyBufSize]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer((*connWriter)(c), r, buf[:])
}

// connWriter is a copyConn without ReadFrom, for io.CopyBuffer to use
// the buffer it is given: the connection's own ReadFrom would allocate.
type connWriter copyConn

// openRouteStore opens cfg's route store with the sealer of its key
// secret: RouteSecret, else the file RouteKeyFile, made first when
// missing and makeKey is set.
func openRouteStore(ctx context.Context, cfg *Config, makeKey bool) (*routestore.Store, error) {
	secret := cfg.RouteSecret
	if len(secret) == 0 && cfg.RouteKeyFile != "" {
		var err error
		if secret, err = routestore.LoadSecret(cfg.RouteKeyFile, makeKey); err != nil {
			return nil, fmt.Errorf("llm: the route key secret: %w", err)
		}
	}
	sealer, err := routestore.NewSealer(secret)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	st, err := routestore.Open(ctx, cfg.RouteStore, sealer)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	return st, nil
}

// ResealRoutes is a key rotation's last step: it moves every API key of
// cfg's route store that an earlier secret sealed onto the first secret
// of its key secret (one secret per line, the new one first, the earlier
// ones after it), and returns how many keys it moved. It works on the
// store directly, with no server running; replicas that run see the
// change within a second, and open the moved keys as long as they hold
// the new secret. When some key opens under none of the secrets, it moves
// none and names those keys.
func ResealRoutes(ctx context.Context, cfg Config) (int, error) {
	if cfg.RouteStore == "" {
		return 0, errors.New("llm: no route store to re-seal")
	}
	st, err := openRouteStore(ctx, &cfg, false)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n, err := st.Reseal(ctx)
	if err != nil {
		return 0, fmt.Errorf("llm: re-seal the stored keys: %w", err)
	}
	return n, nil
}
