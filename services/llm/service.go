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
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/stream"
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
}

// Service implements penguinv1.LLMServiceServer.
type Service struct {
	penguinv1.UnimplementedLLMServiceServer

	reg      *registry.Registry
	streamer stream.Streamer
	timeout  time.Duration
	maxBytes int
	log      *slog.Logger
}

// New returns the service for opts.
func New(opts Options) (*Service, error) {
	if opts.Registry == nil {
		return nil, errors.New("llm: a registry is required")
	}
	s := &Service{reg: opts.Registry, timeout: opts.DefaultRequestTimeout, maxBytes: opts.MaxRequestBytes, log: opts.Logger}
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

// dispatch hands the request to the adapter of its route.
func (s *Service) dispatch(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	adapter, _, ok := s.reg.Lookup(req.Provider)
	if !ok {
		fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST,
			"provider route %q is not registered", req.Provider)
		fe.Permanent = true
		return fe.Outcome()
	}
	return adapter.Stream(ctx, req, emit)
}

// Generate runs one request: it validates req, then streams the answer
// through send, the outcome last. A validation failure is returned as an
// *InvalidRequestError before anything is sent; any other error is send's
// own (the consumer is gone). It is what StreamGenerate runs, exported for
// callers in the same process.
func (s *Service) Generate(ctx context.Context, req *penguinv1.StreamGenerateRequest, send func(*penguinv1.StreamGenerateResponse) error) error {
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

// StreamGenerate implements the RPC.
func (s *Service) StreamGenerate(req *penguinv1.StreamGenerateRequest, srv penguinv1.LLMService_StreamGenerateServer) error {
	err := s.Generate(srv.Context(), req, srv.Send)
	var invalid *InvalidRequestError
	if errors.As(err, &invalid) {
		return status.Error(codes.InvalidArgument, invalid.Error())
	}
	return err
}

// ListProviders implements the RPC.
func (s *Service) ListProviders(context.Context, *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	resp := &penguinv1.ListProvidersResponse{}
	for _, rt := range s.reg.Routes() {
		resp.Providers = append(resp.Providers, &penguinv1.ProviderInfo{
			Name: rt.Name, Type: rt.Type, BaseUrl: rt.BaseURL, HasCredential: rt.HasCredential,
		})
	}
	return resp, nil
}

// ListModels implements the RPC.
func (s *Service) ListModels(_ context.Context, req *penguinv1.ListModelsRequest) (*penguinv1.ListModelsResponse, error) {
	routes := s.reg.Routes()
	if p := req.GetProvider(); p != "" {
		routes = slices.DeleteFunc(routes, func(r registry.Route) bool { return r.Name != p })
		if len(routes) == 0 {
			return nil, status.Errorf(codes.InvalidArgument, "unknown provider %q; known providers: %s", p, known(s.reg))
		}
	}
	resp := &penguinv1.ListModelsResponse{}
	for _, rt := range routes {
		models := slices.Clone(rt.Models)
		slices.SortFunc(models, func(a, b stream.ModelSpec) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		for _, m := range models {
			info := &penguinv1.ModelInfo{
				Model:         &penguinv1.ModelRef{Provider: rt.Name, ModelId: m.ID},
				ContextWindow: m.ContextWindow,
				MaxTokens:     m.MaxTokens,
				Vision:        !m.NoVision,
			}
			for l := range m.Thinking {
				info.ThinkingLevels = append(info.ThinkingLevels, l)
			}
			slices.Sort(info.ThinkingLevels)
			resp.Models = append(resp.Models, info)
		}
	}
	return resp, nil
}

func known(reg *registry.Registry) string {
	names := reg.Names()
	if len(names) == 0 {
		return "(none configured)"
	}
	return fmt.Sprintf("%q", names)
}
