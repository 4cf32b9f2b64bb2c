// Package llm is the llm service: a stateless model gateway behind
// penguin.v1.LLMService. StreamGenerate takes the model reference, the
// committed history and the new messages, and streams the provider's answer
// as partials, complete messages and token usage, then exactly one
// LLMOutcome. Provider failures are outcomes, never RPC errors; an RPC error
// (InvalidArgument) means the request was refused before any provider I/O.
//
// The handlers are thin: they validate the request into a [stream.Request]
// and run it through the middleware chain around the adapter the registry
// holds for the provider route. Nothing is kept between requests, so any
// replica serves any request.
package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routestore"
	"github.com/penguin-agent/penguin/services/llm/routing"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// DefaultRequestTimeout applies when a request does not set its own.
const DefaultRequestTimeout = 120 * time.Second

// DefaultMaxRequestBytes bounds the encoded size of one request. A
// stateless gateway receives the whole history every time, so it is large;
// the gRPC server's receive limit must be at least as large.
const DefaultMaxRequestBytes = 64 << 20

// Options configure a Service.
type Options struct {
	// Registry holds the provider routes. Required.
	Registry *registry.Registry
	// Middleware wraps every call, the first outermost.
	Middleware []stream.Middleware
	// DefaultRequestTimeout applies when a request leaves its timeout
	// unset; zero means DefaultRequestTimeout, negative means none.
	DefaultRequestTimeout time.Duration
	// MaxRequestBytes refuses larger requests; zero means
	// DefaultMaxRequestBytes, negative means no limit.
	MaxRequestBytes int
	// Logger logs handler-level problems; nil discards them.
	Logger *slog.Logger
	// Catalog is the catalog the routes were built from, for the notice
	// that says how to add a provider; nil means catalog.Builtin().
	Catalog *catalog.Catalog
}

// Service implements penguinv1.LLMServiceServer.
type Service struct {
	penguinv1.UnimplementedLLMServiceServer

	routes   atomic.Pointer[routeSet]
	streamer stream.Streamer
	timeout  time.Duration
	maxBytes int
	log      *slog.Logger
	notice   string

	source    *routeSource          // set by Setup; nil: nothing to reload
	store     *routestore.Store     // set by Setup with a route store; nil: none
	reloadErr atomic.Pointer[error] // the last reload's error, until one succeeds
	unknownMu sync.RWMutex
	unknown   map[modelKey]bool // unknown models already logged, under unknownMu
	unknownN  atomic.Int64      // its size
}

// modelKey is a model of a route. A map keyed by it is looked up without
// building a key string: a model the catalog does not know is looked up
// at every request.
type modelKey struct{ route, model string }

// New returns the service for opts.
func New(opts Options) (*Service, error) {
	if opts.Registry == nil {
		return nil, errors.New("llm: a registry is required")
	}
	cat := opts.Catalog
	if cat == nil {
		cat = catalog.Builtin()
	}
	s := &Service{timeout: opts.DefaultRequestTimeout, maxBytes: opts.MaxRequestBytes, log: opts.Logger, notice: noProviderNotice(cat)}
	s.routes.Store(&routeSet{global: opts.Registry})
	if s.timeout == 0 {
		s.timeout = DefaultRequestTimeout
	}
	if s.maxBytes == 0 {
		s.maxBytes = DefaultMaxRequestBytes
	}
	s.log = logger.OrDiscard(s.log)
	s.streamer = stream.Chain(stream.StreamerFunc(s.dispatch), opts.Middleware...)
	return s, nil
}

// noProviderNotice says that no provider is configured and how to add one.
func noProviderNotice(cat *catalog.Catalog) string {
	vars := routing.KeyVars(cat)
	if len(vars) > 6 {
		vars = append(vars[:6:6], "…")
	}
	return "no model provider is configured: set an API key variable (" + strings.Join(vars, ", ") +
		"; or OLLAMA_HOST, VLLM_BASE_URL, LLAMACPP_BASE_URL for a local server), or write a providers file " +
		"(penguin serve --providers FILE, picked up without a restart); `penguin models` lists the providers and models"
}

// registry returns the routes a request of project sees.
func (s *Service) registry(project string) *registry.Registry { return s.routes.Load().of(project) }

// dispatch hands the request to the adapter of its route. The token usage
// the adapter reports gets the request's model and its cost from the
// model's price, so every adapter is priced the same way.
func (s *Service) dispatch(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	adapter := req.Adapter
	if adapter == nil {
		fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST,
			"provider route %q is not registered", req.Provider)
		fe.Permanent = true
		return fe.Outcome()
	}
	return adapter.Stream(ctx, req, func(m *penguinv1.OmniMessage) error {
		if tu := m.GetTokenUsage(); tu != nil {
			price(tu, req)
		}
		return emit(m)
	})
}

// price fills in a token usage's model and cost. The service is stateless,
// so the session counts it gets from the adapter are the request's own;
// the engine, which owns the session, keeps the running total.
func price(tu *penguinv1.TokenUsage, req *stream.Request) {
	tu.Provider, tu.ModelId = req.Provider, req.Model
	r := tu.GetRequest()
	if r == nil || r.GetUnreported() || req.Spec.Cost == nil {
		return
	}
	cost := req.Spec.Cost.Of(catalog.Usage{
		Input: max(r.GetTotal()-r.GetOutput(), 0), CacheRead: r.GetCacheRead(), CacheWrite: r.GetCacheWrite(), Output: r.GetOutput(),
	})
	r.CostUsd = &cost
	if sess := tu.GetSession(); sess != nil && sess != r {
		// Its own number: the message is the caller's (see stream.Emit),
		// which may change one count and not the other.
		sessCost := cost
		sess.CostUsd = &sessCost
	}
}

// Generate runs one request: it validates req, then streams the answer
// through send, the outcome last. A validation failure is returned as an
// *InvalidRequestError before anything is sent; any other error is send's
// own (the consumer is gone). With no provider configured at all, the
// answer is one outcome (auth, MISSING_CREDENTIAL, permanent) that says
// how to add one. It is what StreamGenerate runs, exported for callers in
// the same process.
func (s *Service) Generate(ctx context.Context, req *penguinv1.StreamGenerateRequest, send func(*penguinv1.StreamGenerateResponse) error) error {
	if s.registry(req.GetProject()).Len() == 0 {
		return send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: &penguinv1.LLMOutcome{
			Status: penguinv1.StopReason_STOP_REASON_AUTH, Code: penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL,
			Message: s.notice, Permanent: true,
		}}})
	}
	sreq, err := s.prepare(req)
	if err != nil {
		return err
	}
	timeout := s.timeout
	if req.RequestTimeoutMs != nil {
		timeout = time.Duration(req.GetRequestTimeoutMs()) * time.Millisecond
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, failure.ErrRequestTimeout)
		defer cancel()
	}
	var sendErr error
	out := s.streamer.Stream(ctx, sreq, func(m *penguinv1.OmniMessage) error {
		if sendErr != nil {
			return sendErr
		}
		sendErr = send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
		return sendErr
	})
	if sendErr != nil {
		return sendErr
	}
	return send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: out}})
}

// StreamGenerate implements the RPC. Its frames are handed over to an
// in-process caller without a copy: Generate keeps nothing it sends (see
// stream.Emit).
func (s *Service) StreamGenerate(req *penguinv1.StreamGenerateRequest, srv penguinv1.LLMService_StreamGenerateServer) error {
	grpcserver.HandOver(srv.Context())
	err := s.Generate(srv.Context(), req, srv.Send)
	var invalid *InvalidRequestError
	if errors.As(err, &invalid) {
		return status.Error(codes.InvalidArgument, invalid.Error())
	}
	return err
}

// ReadsRequestOnly reports that StreamGenerate only reads its request
// (grpcserver.RequestReader): prepare checks it and builds the
// provider-neutral request from its parts without changing them, the
// middlewares must not change the request (stream.Middleware), and the
// adapters translate it into bodies of their own. An in-process caller
// that shares its request (grpcserver.ShareRequest), as the engine's loop
// does with the session's history, then hands it over without a copy;
// TestRequestSharedInProcess holds the service to it.
func (s *Service) ReadsRequestOnly(method string) bool { return method == "StreamGenerate" }

// ListProviders implements the RPC: the global routes and those of the
// request's project. With no provider, or after a reload that failed, its
// notice says so.
func (s *Service) ListProviders(_ context.Context, req *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	if err := checkProject(req.GetProject()); err != nil {
		return nil, err
	}
	reg := s.registry(req.GetProject())
	resp := &penguinv1.ListProvidersResponse{}
	for _, rt := range reg.Routes() {
		resp.Providers = append(resp.Providers, providerInfo(rt))
	}
	resp.Notice = s.statusNotice(reg)
	return resp, nil
}

// providerInfo describes a route for a listing; a stored key only masked.
func providerInfo(rt registry.Route) *penguinv1.ProviderInfo {
	return &penguinv1.ProviderInfo{
		Name: rt.Name, Type: rt.Type, BaseUrl: rt.BaseURL, HasCredential: rt.HasCredential,
		CredentialSource: rt.CredentialSource, Catalog: rt.Catalog, Project: rt.Project, Origin: rt.Origin,
		KeyHint: rt.KeyHint, Models: rt.Listed,
	}
}

// statusNotice is what ListProviders and ListModels say about the
// configuration: no provider, or a providers file that did not load.
func (s *Service) statusNotice(reg *registry.Registry) string {
	var notes []string
	if reg.Len() == 0 {
		notes = append(notes, s.notice)
	}
	if err := s.reloadErr.Load(); err != nil {
		notes = append(notes, fmt.Sprintf("the provider routes did not load, so the routes before stay in use: %v", *err))
	}
	return strings.Join(notes, "; ")
}

// ListModels implements the RPC: the models known for each configured
// route (the catalog's and the providers file's), sorted by provider and
// id.
func (s *Service) ListModels(_ context.Context, req *penguinv1.ListModelsRequest) (*penguinv1.ListModelsResponse, error) {
	if err := checkProject(req.GetProject()); err != nil {
		return nil, err
	}
	reg := s.registry(req.GetProject())
	routes := reg.Routes()
	if p := req.GetProvider(); p != "" {
		routes = slices.DeleteFunc(routes, func(r registry.Route) bool { return r.Name != p })
		if len(routes) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "unknown provider %q; known providers: %s", p, known(reg))
		}
	}
	resp := &penguinv1.ListModelsResponse{Notice: s.statusNotice(reg)}
	for _, rt := range routes {
		models := slices.Clone(rt.Models)
		slices.SortFunc(models, func(a, b stream.ModelSpec) int { return strings.Compare(a.ID, b.ID) })
		for _, m := range models {
			resp.Models = append(resp.Models, ModelInfo(rt.Name, m))
		}
	}
	return resp, nil
}

// ModelInfo describes a model of route for discovery.
func ModelInfo(route string, m stream.ModelSpec) *penguinv1.ModelInfo {
	info := &penguinv1.ModelInfo{
		Model:         &penguinv1.ModelRef{Provider: route, ModelId: m.ID},
		Name:          m.Name,
		ContextWindow: m.ContextWindow,
		MaxTokens:     m.MaxTokens,
		Vision:        !m.NoVision,
		Reasoning:     m.Reasoning,
		Tools:         m.Tools,
		Temperature:   m.Temperature,
		Status:        m.Status,
	}
	if len(m.Thinking) > 0 {
		info.ThinkingWire = make(map[string]string, len(m.Thinking))
		for l, w := range m.Thinking {
			info.ThinkingLevels = append(info.ThinkingLevels, l)
			info.ThinkingWire[translate.LevelName(l)] = w
		}
		slices.Sort(info.ThinkingLevels)
	}
	if c := m.Cost; c != nil {
		info.Price = &penguinv1.ModelPrice{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite}
	}
	return info
}

func known(reg *registry.Registry) string {
	names := reg.Names()
	if len(names) == 0 {
		return "(none configured)"
	}
	return fmt.Sprintf("%q", names)
}
