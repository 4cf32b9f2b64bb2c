package llm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routestore"
	"github.com/penguin-agent/penguin/services/llm/routing"
)

// The handlers of the routes added through the API. Who may call them is
// not theirs to decide: the engine's access.Guard checks the request's
// project before any of them runs (a project's owners change its routes,
// administrators the global ones), and a server without the engine takes
// the service token only. They check what the request says and keep the
// route in the route store; every replica, this one first, picks the
// change up from there.

// testTimeout bounds the request TestProvider makes.
const testTimeout = 30 * time.Second

var modelID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}$`) })

// projectError says what is wrong with a project id a request names; a
// project's id is the engine's to check, the llm service only keeps it.
func projectError(p string) error {
	if len(p) > 128 || strings.IndexFunc(p, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return fmt.Errorf("project %q is not a project id", p)
	}
	return nil
}

// checkProject is projectError as an InvalidArgument status.
func checkProject(p string) error {
	if err := projectError(p); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// routeStore returns the route store, or FailedPrecondition when the
// service has none.
func (s *Service) routeStore() (*routestore.Store, error) {
	if s.store == nil {
		return nil, status.Error(codes.FailedPrecondition, "this llm service keeps no routes of its own: start it with --routes-store "+
			"(a postgres:// URL or a SQLite path) and --routes-key-file, or add the route to its providers file")
	}
	return s.store, nil
}

// routeOf checks a route a client wrote, with its key (nil: not given),
// and returns it as a providers file entry. Besides the file's own
// checks, it refuses what only an operator may set: a stored route takes
// its key from the store, never from the server's environment or files.
func (s *Service) routeOf(project string, r *penguinv1.ProviderRoute, key *string) (routing.Provider, error) {
	if err := checkProject(project); err != nil {
		return routing.Provider{}, err
	}
	bad := func(format string, args ...any) (routing.Provider, error) {
		return routing.Provider{}, status.Errorf(codes.InvalidArgument, format, args...)
	}
	if r == nil {
		return bad("route is required")
	}
	p := routing.Provider{Name: r.GetName(), Type: r.GetType(), BaseURL: r.GetBaseUrl(), Catalog: r.GetCatalog(), Headers: r.GetHeaders()}
	switch {
	case !routing.ValidName(p.Name):
		return bad("route.name %q: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", p.Name)
	case key != nil && (len(*key) > 4096 || strings.IndexFunc(*key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0):
		return bad("api_key: a key of printable ASCII characters without spaces, at most 4096")
	case key != nil && *key == "" && p.BaseURL == "":
		return bad("api_key: required for a vendor's API (only a server of your own, at a base URL, may have none)")
	case len(r.GetModels()) > 200:
		return bad("route.models: at most 200")
	}
	for _, m := range r.GetModels() {
		if !modelID().MatchString(m) {
			return bad("route.models: %q is not a model id", m)
		}
		p.Models = append(p.Models, routing.Model{ID: m})
	}
	if key != nil {
		p.APIKey = *key
	}
	if err := (&routing.File{Providers: []routing.Provider{p}}).Validate(); err != nil {
		return bad("route: %v", err)
	}
	if _, err := routing.Registrations([]routing.Provider{p}, s.source.deps); err != nil {
		return bad("route: %v", err)
	}
	return p, nil
}

// configured refuses a global route that the providers file or the
// environment defines: the operator's configuration wins, and the API
// cannot change it.
func (s *Service) configured(project, name string) error {
	if project != "" {
		return nil
	}
	if origin, ok := s.routes.Load().defines(name); ok {
		where := "the providers file"
		if origin == OriginEnv {
			where = "an API key variable of the server's environment"
		}
		return status.Errorf(codes.FailedPrecondition, "the global route %q is defined by %s, which only the server's operator can change", name, where)
	}
	return nil
}

// AddProvider implements the RPC.
func (s *Service) AddProvider(ctx context.Context, req *penguinv1.AddProviderRequest) (*penguinv1.AddProviderResponse, error) {
	st, err := s.routeStore()
	if err != nil {
		return nil, err
	}
	key := req.GetApiKey()
	p, err := s.routeOf(req.GetProject(), req.GetRoute(), &key)
	if err != nil {
		return nil, err
	}
	if err := s.configured(req.GetProject(), p.Name); err != nil {
		return nil, status.Error(codes.AlreadyExists, status.Convert(err).Message())
	}
	if err := st.Add(ctx, req.GetProject(), p, key); err != nil {
		return nil, storeStatus(err, req.GetProject(), p.Name)
	}
	return &penguinv1.AddProviderResponse{Provider: s.refreshed(req.GetProject(), p)}, nil
}

// UpdateProvider implements the RPC.
func (s *Service) UpdateProvider(ctx context.Context, req *penguinv1.UpdateProviderRequest) (*penguinv1.UpdateProviderResponse, error) {
	st, err := s.routeStore()
	if err != nil {
		return nil, err
	}
	p, err := s.routeOf(req.GetProject(), req.GetRoute(), req.ApiKey)
	if err != nil {
		return nil, err
	}
	if err := s.configured(req.GetProject(), p.Name); err != nil {
		return nil, err
	}
	if err := st.Update(ctx, req.GetProject(), p, req.ApiKey); err != nil {
		return nil, storeStatus(err, req.GetProject(), p.Name)
	}
	return &penguinv1.UpdateProviderResponse{Provider: s.refreshed(req.GetProject(), p)}, nil
}

// RemoveProvider implements the RPC.
func (s *Service) RemoveProvider(ctx context.Context, req *penguinv1.RemoveProviderRequest) (*penguinv1.RemoveProviderResponse, error) {
	st, err := s.routeStore()
	if err != nil {
		return nil, err
	}
	if err := checkProject(req.GetProject()); err != nil {
		return nil, err
	}
	if err := s.configured(req.GetProject(), req.GetName()); err != nil {
		return nil, err
	}
	if err := st.Remove(ctx, req.GetProject(), req.GetName()); err != nil {
		return nil, storeStatus(err, req.GetProject(), req.GetName())
	}
	_ = s.Reload()
	return &penguinv1.RemoveProviderResponse{}, nil
}

// ResealProviderKeys implements the RPC.
func (s *Service) ResealProviderKeys(ctx context.Context, _ *penguinv1.ResealProviderKeysRequest) (*penguinv1.ResealProviderKeysResponse, error) {
	st, err := s.routeStore()
	if err != nil {
		return nil, err
	}
	n, err := st.Reseal(ctx)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "re-seal the stored keys: %v", err)
	}
	return &penguinv1.ResealProviderKeysResponse{Resealed: int32(n)}, nil
}

// storeStatus turns a route store error into the RPC's answer.
func storeStatus(err error, project, name string) error {
	where := "global route"
	if project != "" {
		where = "route of project " + project
	}
	switch {
	case errors.Is(err, routestore.ErrExists):
		return status.Errorf(codes.AlreadyExists, "a %s called %q exists; update it instead", where, name)
	case errors.Is(err, routestore.ErrNotFound):
		return status.Errorf(codes.NotFound, "no stored %s is called %q", where, name)
	}
	return status.Errorf(codes.Unavailable, "the route store: %v", err)
}

// refreshed reloads the routes, so that this replica uses the change at
// once (the others see it at their next look at the store), and describes
// the route as it is now listed; as it was written when the reload
// failed, whose error the listing's notice then reports.
func (s *Service) refreshed(project string, p routing.Provider) *penguinv1.ProviderInfo {
	if s.Reload() == nil {
		if _, rt, ok := s.registry(project).Lookup(p.Name); ok && rt.Project == project {
			return providerInfo(rt)
		}
	}
	info := &penguinv1.ProviderInfo{Name: p.Name, Type: p.Type, BaseUrl: p.BaseURL, Catalog: p.Catalog, Project: project, Origin: OriginStore}
	for _, m := range p.Models {
		info.Models = append(info.Models, m.ID)
	}
	return info
}

// TestProvider implements the RPC: one short request ("reply OK") on the
// route, through the same path as every request, so the answer says what
// a session would meet: the provider's refusal, or how long it took.
func (s *Service) TestProvider(ctx context.Context, req *penguinv1.TestProviderRequest) (*penguinv1.TestProviderResponse, error) {
	if err := checkProject(req.GetProject()); err != nil {
		return nil, err
	}
	_, rt, ok := s.registry(req.GetProject()).Lookup(req.GetName())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown provider %q; known providers: %s", req.GetName(), known(s.registry(req.GetProject())))
	}
	model := req.GetModelId()
	if model == "" {
		model = testModel(rt)
	}
	if model == "" {
		return nil, status.Errorf(codes.InvalidArgument, "provider %q lists no model: name one in model_id", rt.Name)
	}
	timeout := testTimeout.Milliseconds()
	start := time.Now()
	var out *penguinv1.LLMOutcome
	err := s.Generate(ctx, &penguinv1.StreamGenerateRequest{
		Model: &penguinv1.ModelRef{Provider: rt.Name, ModelId: model}, Project: req.GetProject(),
		NewMessages: []*penguinv1.OmniMessage{omni.UserText("Reply with the word OK.")}, MaxTokens: 16, RequestTimeoutMs: &timeout,
	}, func(resp *penguinv1.StreamGenerateResponse) error {
		if o := resp.GetOutcome(); o != nil {
			out = o
		}
		return nil
	})
	var invalid *InvalidRequestError
	switch {
	case errors.As(err, &invalid):
		return nil, status.Error(codes.InvalidArgument, invalid.Error())
	case err != nil:
		return nil, err
	}
	return &penguinv1.TestProviderResponse{
		Ok: out.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED, ModelId: model,
		LatencyMs: time.Since(start).Milliseconds(), Outcome: out,
	}, nil
}

// testModel is the model a test asks when the caller names none: the
// route's first listed model, else its current model with the lowest
// output price (a test should cost next to nothing; a model whose output
// is free, such as an embedding model, answers no chat), else its first.
func testModel(rt registry.Route) string {
	if len(rt.Listed) > 0 {
		return rt.Listed[0]
	}
	best := -1
	for i, m := range rt.Models {
		if m.Status == "deprecated" || m.Cost == nil || m.Cost.Output <= 0 {
			continue
		}
		if best < 0 || m.Cost.Output < rt.Models[best].Cost.Output {
			best = i
		}
	}
	switch {
	case best >= 0:
		return rt.Models[best].ID
	case len(rt.Models) > 0:
		return rt.Models[0].ID
	}
	return ""
}
