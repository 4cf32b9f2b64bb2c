package gateway

import (
	"encoding/json"
	"net/http"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
)

// First run: the web app's form adds a provider route through the llm
// service (AddProvider, or UpdateProvider for a route of that name the
// service already stores), which keeps it in its route store with the
// key encrypted, and which every replica of it uses within a second. The
// gateway writes no file and knows nothing of how routes are kept: it
// passes the form on with the caller's credential, and the engine's
// access check decides who may add what (an administrator the global
// routes, a project's owners the project's).

// providerForm is the body of POST /api/setup/provider.
type providerForm struct {
	// Project owns the route; empty for a global route.
	Project string `json:"project"`
	// Name is the route's name, the provider half of a model reference.
	// A catalog provider's id (openai, anthropic, …) gives the route that
	// provider's models and prices.
	Name string `json:"name"`
	// Type is the wire protocol (openai, openai-responses, anthropic,
	// gemini).
	Type string `json:"type"`
	// BaseURL is the API base; empty means the vendor's own API.
	BaseURL string `json:"base_url"`
	// APIKey is the key. It may be empty for a server of one's own (a
	// base URL is then required).
	APIKey string `json:"api_key"`
	// Models are model ids to list for the route, beside the catalog's.
	Models []string `json:"models"`
}

// catalogProvider is a provider the form offers: a catalog provider that
// a key turns on.
type catalogProvider struct {
	// ID is the route's name, and the catalog provider it follows.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name"`
	// Type is the route's wire protocol.
	Type string `json:"type"`
	// BaseURL is the vendor's API.
	BaseURL string `json:"base_url"`
	// KeyVar is the environment variable that would turn it on instead.
	KeyVar string `json:"key_var"`
	// Models is how many models the catalog lists for it.
	Models int `json:"models"`
}

// setupState is the answer of GET /api/setup.
type setupState struct {
	// Providers are the catalog's providers, for the form's list.
	Providers []catalogProvider `json:"providers"`
}

// offered lists the built-in catalog's providers that take a key. (A
// provider that only a --catalog override adds is still reachable through
// the form: a route named like it follows it.) A catalog's API names are
// route types.
var offered = sync.OnceValue(func() []catalogProvider {
	var out []catalogProvider
	for _, p := range catalog.Builtin().Providers {
		if v := p.KeyVar(); v != "" && p.API != "" {
			out = append(out, catalogProvider{ID: p.ID, Name: p.Name, Type: p.API, BaseURL: p.BaseURL, KeyVar: v, Models: len(p.Models)})
		}
	}
	return out
})

func (g *Gateway) setupStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, setupState{Providers: offered()})
}

// setupResult is the answer of POST /api/setup/provider.
type setupResult struct {
	// Provider is the route's name.
	Provider string `json:"provider"`
	// Route is the route as the llm service lists it, its key masked.
	Route json.RawMessage `json:"route"`
	// Replaced says the route existed and was updated.
	Replaced bool `json:"replaced,omitempty"`
}

// setupProvider serves POST /api/setup/provider: AddProvider, or
// UpdateProvider (with the new key) when the route is stored already.
func (g *Gateway) setupProvider(w http.ResponseWriter, r *http.Request) {
	var form providerForm
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&form); err != nil {
		badRequest(w, "malformed JSON body: "+err.Error())
		return
	}
	if g.opts.LLM == nil {
		writeError(w, codes.Unimplemented, "this gateway reaches no llm service")
		return
	}
	route := &penguinv1.ProviderRoute{Name: form.Name, Type: form.Type, BaseUrl: form.BaseURL, Models: form.Models}
	res := setupResult{Provider: form.Name}
	var info *penguinv1.ProviderInfo
	added, err := g.opts.LLM.AddProvider(r.Context(), &penguinv1.AddProviderRequest{Project: form.Project, Route: route, ApiKey: form.APIKey})
	if status.Code(err) == codes.AlreadyExists {
		var updated *penguinv1.UpdateProviderResponse
		updated, err = g.opts.LLM.UpdateProvider(r.Context(), &penguinv1.UpdateProviderRequest{Project: form.Project, Route: route, ApiKey: &form.APIKey})
		info, res.Replaced = updated.GetProvider(), true
	} else {
		info = added.GetProvider()
	}
	if err != nil {
		g.fail(w, r, err)
		return
	}
	res.Route, _ = jsonOut.Marshal(info)
	g.opts.Logger.Info("provider route saved by the web app", "provider", form.Name, "project", form.Project, "replaced", res.Replaced)
	writeJSON(w, http.StatusOK, res)
}
