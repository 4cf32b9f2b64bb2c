package llm_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm"
)

const routeSecret = "a-route-key-secret-of-at-least-32-bytes"

// withStore sets up the llm service with a SQLite route store and a
// providers file naming the global route "local".
func withStore(t *testing.T) *llm.Service {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(file, []byte("providers:\n  - name: local\n    type: openai\n    base_url: http://127.0.0.1:9/v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := llm.Setup(llm.Config{
		ProvidersFile: file, Lookup: config.MapLookup(nil),
		RouteStore: filepath.Join(dir, "routes.db"), RouteSecret: []byte(routeSecret),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// outcome runs one request and returns its outcome, or the error that
// refused it.
func outcome(ctx context.Context, svc *llm.Service, project, provider, model string) (*penguinv1.LLMOutcome, error) {
	var out *penguinv1.LLMOutcome
	err := svc.Generate(ctx, &penguinv1.StreamGenerateRequest{
		Model: &penguinv1.ModelRef{Provider: provider, ModelId: model}, Project: project,
		NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")},
	}, func(r *penguinv1.StreamGenerateResponse) error {
		if o := r.GetOutcome(); o != nil {
			out = o
		}
		return nil
	})
	return out, err
}

func listed(t *testing.T, svc *llm.Service, project string) map[string]*penguinv1.ProviderInfo {
	t.Helper()
	resp, err := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*penguinv1.ProviderInfo{}
	for _, p := range resp.GetProviders() {
		out[p.GetName()] = p
	}
	return out
}

// TestProjectRoutes: a route added for a project serves that project's
// requests with its key (the provider refuses any other), is listed for
// that project only with its key masked, and is reachable from no other
// project nor from the global routes; a project's route shadows a global
// one of the same name for that project only; the test request reports
// the provider's refusal of a wrong key; and update and remove take
// effect at once.
func TestProjectRoutes(t *testing.T) {
	const key = "sk-team-0123456789abcdefghij"
	emu := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "OK"}}, OnExhausted: emulator.ExhaustedRepeatLast},
		emulator.WithAPIKey(key))
	defer emu.Close()
	svc := withStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	route := &penguinv1.ProviderRoute{Name: "team", Type: "openai", BaseUrl: emu.OpenAIBaseURL(), Models: []string{"m1"}}
	added, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "apollo", Route: route, ApiKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if p := added.GetProvider(); p.GetProject() != "apollo" || p.GetOrigin() != llm.OriginStore || p.GetKeyHint() != "sk-t…ghij" ||
		strings.Contains(p.String(), key) || p.GetModels()[0] != "m1" {
		t.Fatalf("added: %v", p)
	}
	if out, err := outcome(ctx, svc, "apollo", "team", "m1"); err != nil || out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("apollo's request: %v %v", out, err)
	}
	var invalid *llm.InvalidRequestError
	for _, project := range []string{"bravo", ""} {
		if out, err := outcome(ctx, svc, project, "team", "m1"); !errors.As(err, &invalid) || !strings.Contains(err.Error(), `unknown provider "team"`) {
			t.Fatalf("project %q used apollo's route: %v %v", project, out, err)
		}
		if _, ok := listed(t, svc, project)["team"]; ok {
			t.Fatalf("project %q lists apollo's route", project)
		}
	}
	if p := listed(t, svc, "apollo"); p["team"].GetKeyHint() != "sk-t…ghij" || p["local"].GetOrigin() != llm.OriginFile {
		t.Fatalf("apollo's listing: %v", p)
	}

	// The test request: fine with the right key, the provider's refusal
	// with a wrong one.
	tested, err := svc.TestProvider(ctx, &penguinv1.TestProviderRequest{Project: "apollo", Name: "team"})
	if err != nil || !tested.GetOk() || tested.GetModelId() != "m1" || tested.GetLatencyMs() < 0 {
		t.Fatalf("test: %v %v", tested, err)
	}
	wrong := "sk-wrong-0123456789abcdefghij"
	if _, err := svc.UpdateProvider(ctx, &penguinv1.UpdateProviderRequest{Project: "apollo", Route: route, ApiKey: &wrong}); err != nil {
		t.Fatal(err)
	}
	tested, err = svc.TestProvider(ctx, &penguinv1.TestProviderRequest{Project: "apollo", Name: "team"})
	if err != nil || tested.GetOk() || tested.GetOutcome().GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH {
		t.Fatalf("test with a wrong key: %v %v", tested, err)
	}
	// Without a key given, an update keeps the stored one.
	if _, err := svc.UpdateProvider(ctx, &penguinv1.UpdateProviderRequest{Project: "apollo", Route: route, ApiKey: ptr(key)}); err != nil {
		t.Fatal(err)
	}
	route.Models = []string{"m2"}
	if _, err := svc.UpdateProvider(ctx, &penguinv1.UpdateProviderRequest{Project: "apollo", Route: route}); err != nil {
		t.Fatal(err)
	}
	if out, _ := outcome(ctx, svc, "apollo", "team", "m2"); out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("after an update without a key: %v", out)
	}

	// A global route of the same name at a dead address: apollo keeps
	// its own, everyone else gets the global one.
	global := &penguinv1.ProviderRoute{Name: "team", Type: "openai", BaseUrl: "http://127.0.0.1:9/v1"}
	if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Route: global}); err != nil {
		t.Fatal(err)
	}
	if out, _ := outcome(ctx, svc, "apollo", "team", "m2"); out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("apollo's route was shadowed: %v", out)
	}
	if p := listed(t, svc, "bravo")["team"]; p.GetProject() != "" || p.GetBaseUrl() != "http://127.0.0.1:9/v1" {
		t.Fatalf("bravo sees %v", p)
	}

	if _, err := svc.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Project: "apollo", Name: "team"}); err != nil {
		t.Fatal(err)
	}
	if p := listed(t, svc, "apollo")["team"]; p.GetProject() != "" {
		t.Fatalf("after removal apollo sees %v", p)
	}
	if _, err := svc.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Project: "apollo", Name: "team"}); status.Code(err) != codes.NotFound {
		t.Fatalf("second removal: %v", err)
	}
}

func ptr(s string) *string { return &s }

// TestRouteRequestsRefused: malformed routes are refused with
// INVALID_ARGUMENT and nothing is stored; the global routes of the
// providers file cannot be added over, changed or removed; a service
// without a route store says how to get one.
func TestRouteRequestsRefused(t *testing.T) {
	svc := withStore(t)
	ctx := t.Context()
	for _, r := range []struct {
		route *penguinv1.ProviderRoute
		key   string
	}{
		{nil, "k"},
		{&penguinv1.ProviderRoute{Name: "../evil", Type: "openai"}, "k"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "nonsense"}, "k"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai"}, "two words"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai"}, ""},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai", BaseUrl: "file:///etc"}, "k"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai", Models: []string{"a", "a"}}, "k"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai", Models: []string{"no spaces please"}}, "k"},
		{&penguinv1.ProviderRoute{Name: "x", Type: "openai", Headers: map[string]string{"bad name": "v"}}, "k"},
	} {
		if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "apollo", Route: r.route, ApiKey: r.key}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("route %v key %q: %v", r.route, r.key, err)
		}
	}
	if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "bad\nproject", Route: &penguinv1.ProviderRoute{Name: "x", Type: "openai"}, ApiKey: "k"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a bad project id: %v", err)
	}
	if n := len(listed(t, svc, "apollo")); n != 1 {
		t.Fatalf("refused routes were stored: %d routes", n)
	}
	local := &penguinv1.ProviderRoute{Name: "local", Type: "openai", BaseUrl: "http://127.0.0.1:8/v1"}
	if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Route: local}); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "providers file") {
		t.Errorf("adding over the file's route: %v", err)
	}
	if _, err := svc.UpdateProvider(ctx, &penguinv1.UpdateProviderRequest{Route: local}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("updating the file's route: %v", err)
	}
	if _, err := svc.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Name: "local"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("removing the file's route: %v", err)
	}
	// Without a model named, the test asks a cheap chat model of the
	// catalog's (here at a dead address: the test fails, naming it).
	if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "apollo", ApiKey: "sk-0123456789abcdef",
		Route: &penguinv1.ProviderRoute{Name: "openai", Type: "openai-responses", BaseUrl: "http://127.0.0.1:9/v1"}}); err != nil {
		t.Fatal(err)
	}
	tested, err := svc.TestProvider(ctx, &penguinv1.TestProviderRequest{Project: "apollo", Name: "openai"})
	if err != nil || tested.GetOk() || !strings.HasPrefix(tested.GetModelId(), "gpt-") || tested.GetOutcome().GetMessage() == "" {
		t.Errorf("test of openai at a dead address: %v %v", tested, err)
	}
	// A project may have its own "local".
	if _, err := svc.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "apollo", Route: local}); err != nil {
		t.Errorf("a project's own local: %v", err)
	}

	bare, err := llm.Setup(llm.Config{Lookup: config.MapLookup(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.AddProvider(ctx, &penguinv1.AddProviderRequest{Route: local}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--routes-store") {
		t.Errorf("without a store: %v", err)
	}
}
