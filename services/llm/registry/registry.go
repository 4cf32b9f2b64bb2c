// Package registry is the llm service's adapter registry: one adapter per
// provider route. Registration is all-or-nothing, a route that is already
// taken is refused with a typed error, and the routes and their models can
// be listed for discovery. The model lists are not a whitelist: a model that
// is not listed is still routed to its provider's adapter.
package registry

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/penguin-agent/penguin/services/llm/stream"
)

// ErrDuplicateRoute is matched (errors.Is) by the error Register returns
// when a route is already registered or named twice.
var ErrDuplicateRoute = errors.New("duplicate provider route")

// ErrInvalidRoute is matched by the error Register returns for a route that
// cannot be registered (no name, no adapter, duplicate model ids).
var ErrInvalidRoute = errors.New("invalid provider route")

// DuplicateRouteError names the route that was refused.
type DuplicateRouteError struct {
	// Route is the route's name.
	Route string
}

// Error names the route.
func (e *DuplicateRouteError) Error() string {
	return fmt.Sprintf("provider route %q is already registered", e.Route)
}

// Is makes errors.Is(err, ErrDuplicateRoute) true.
func (e *DuplicateRouteError) Is(target error) bool { return target == ErrDuplicateRoute }

// Route describes one provider route.
type Route struct {
	// Name is the route's name: the provider half of a model reference.
	Name string
	// Type is the wire protocol of its adapter (catalog.APIOpenAIChat, …).
	Type string
	// BaseURL is the provider's API base URL.
	BaseURL string
	// HasCredential reports whether a credential is configured. The
	// credential itself never leaves the adapter.
	HasCredential bool
	// CredentialSource says where the credential comes from ("env NAME",
	// "file PATH", "store"); empty for none.
	CredentialSource string
	// KeyHint is a stored key, masked; empty for other routes.
	KeyHint string
	// Project owns the route; empty for a global route.
	Project string
	// Origin is where the route is defined: "file", "env" or "store".
	Origin string
	// Listed are the model ids the route's definition lists.
	Listed []string
	// Catalog is the catalog provider whose models the route lists; empty
	// for none.
	Catalog string
	// Models are the models known for the route: the catalog's and the
	// providers file's.
	Models []stream.ModelSpec

	index map[string]int
}

// Model returns the known model id, or a zero spec (Known false) with the
// id filled in when the model is not known.
func (r Route) Model(id string) stream.ModelSpec {
	if i, ok := r.index[id]; ok {
		return r.Models[i]
	}
	return stream.ModelSpec{ID: id}
}

// Registry maps route names to adapters. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	routes map[string]entry
}

type entry struct {
	adapter stream.Streamer
	route   Route
}

// New returns an empty registry.
func New() *Registry { return &Registry{routes: map[string]entry{}} }

// Len returns the number of routes.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.routes)
}

// Registration pairs an adapter with one of its routes.
type Registration struct {
	// Adapter serves the route.
	Adapter stream.Streamer
	// Route describes it.
	Route Route
}

// Register adds adapter under every route in routes, or under none of them:
// if any route is invalid, named twice, or already registered, nothing
// changes and the error says which.
func (r *Registry) Register(adapter stream.Streamer, routes ...Route) error {
	regs := make([]Registration, len(routes))
	for i, rt := range routes {
		regs[i] = Registration{Adapter: adapter, Route: rt}
	}
	return r.RegisterAll(regs...)
}

// RegisterAll adds every registration or none of them, like Register, for
// routes served by different adapters (a whole providers file).
func (r *Registry) RegisterAll(regs ...Registration) error {
	if len(regs) == 0 {
		return fmt.Errorf("%w: no routes given", ErrInvalidRoute)
	}
	seen := map[string]bool{}
	for _, reg := range regs {
		rt := reg.Route
		if reg.Adapter == nil {
			return fmt.Errorf("%w: route %q has no adapter", ErrInvalidRoute, rt.Name)
		}
		if rt.Name == "" {
			return fmt.Errorf("%w: a route has no name", ErrInvalidRoute)
		}
		if seen[rt.Name] {
			return &DuplicateRouteError{Route: rt.Name}
		}
		seen[rt.Name] = true
		ids := map[string]bool{}
		for _, m := range rt.Models {
			if m.ID == "" {
				return fmt.Errorf("%w: route %q lists a model with no id", ErrInvalidRoute, rt.Name)
			}
			if ids[m.ID] {
				return fmt.Errorf("%w: route %q lists model %q twice", ErrInvalidRoute, rt.Name, m.ID)
			}
			ids[m.ID] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range regs {
		if _, taken := r.routes[reg.Route.Name]; taken {
			return &DuplicateRouteError{Route: reg.Route.Name}
		}
	}
	for _, reg := range regs {
		rt := reg.Route
		rt.Models = slices.Clone(rt.Models)
		rt.index = make(map[string]int, len(rt.Models))
		for i := range rt.Models {
			rt.Models[i].Known = true
			rt.index[rt.Models[i].ID] = i
		}
		r.routes[rt.Name] = entry{adapter: reg.Adapter, route: rt}
	}
	return nil
}

// Lookup returns the adapter and route registered under name.
func (r *Registry) Lookup(name string) (stream.Streamer, Route, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.routes[name]
	return e.adapter, e.route, ok
}

// Routes returns every route, sorted by name.
func (r *Registry) Routes() []Route {
	r.mu.RLock()
	out := make([]Route, 0, len(r.routes))
	for _, e := range r.routes {
		out = append(out, e.route)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Route) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Names returns the route names, sorted.
func (r *Registry) Names() []string {
	routes := r.Routes()
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.Name
	}
	return out
}
