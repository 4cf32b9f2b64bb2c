package registry_test

import (
	"context"
	"errors"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

var nop = stream.StreamerFunc(func(context.Context, *stream.Request, stream.Emit) *penguinv1.LLMOutcome { return nil })

func TestRegisterIsAllOrNothing(t *testing.T) {
	r := registry.New()
	if err := r.Register(nop, registry.Route{Name: "a", Models: []stream.ModelSpec{{ID: "m1", ContextWindow: 100}}}); err != nil {
		t.Fatal(err)
	}
	err := r.Register(nop, registry.Route{Name: "b"}, registry.Route{Name: "a"})
	var dup *registry.DuplicateRouteError
	if !errors.Is(err, registry.ErrDuplicateRoute) || !errors.As(err, &dup) || dup.Route != "a" {
		t.Fatalf("err = %v, want a duplicate of route a", err)
	}
	if _, _, ok := r.Lookup("b"); ok {
		t.Error("route b was registered although the registration failed")
	}
	if err := r.Register(nop, registry.Route{Name: "c"}, registry.Route{Name: "c"}); !errors.Is(err, registry.ErrDuplicateRoute) {
		t.Errorf("a route named twice in one call: %v", err)
	}
	for _, bad := range [][]registry.Route{
		nil,
		{{Name: ""}},
		{{Name: "d", Models: []stream.ModelSpec{{ID: "x"}, {ID: "x"}}}},
		{{Name: "d", Models: []stream.ModelSpec{{ID: ""}}}},
	} {
		if err := r.Register(nop, bad...); !errors.Is(err, registry.ErrInvalidRoute) {
			t.Errorf("Register(%v) = %v, want ErrInvalidRoute", bad, err)
		}
	}
	if err := r.Register(nil, registry.Route{Name: "e"}); !errors.Is(err, registry.ErrInvalidRoute) {
		t.Errorf("nil adapter: %v", err)
	}
}

func TestListingAndUnlistedModels(t *testing.T) {
	r := registry.New()
	if err := r.RegisterAll(
		registry.Registration{Adapter: nop, Route: registry.Route{Name: "zeta", Type: "openai"}},
		registry.Registration{Adapter: nop, Route: registry.Route{Name: "alpha", Type: "anthropic", Models: []stream.ModelSpec{{ID: "m", MaxTokens: 5}}}},
	); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); len(got) != 2 || got[0] != "alpha" || got[1] != "zeta" {
		t.Errorf("names = %v", got)
	}
	_, rt, ok := r.Lookup("alpha")
	if !ok {
		t.Fatal("alpha not found")
	}
	if m := rt.Model("m"); !m.Known || m.MaxTokens != 5 {
		t.Errorf("listed model = %+v", m)
	}
	if m := rt.Model("other"); m.Known || m.ID != "other" {
		t.Errorf("unlisted model = %+v", m)
	}
}
