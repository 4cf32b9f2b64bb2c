package routing

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/anthropic"
	"github.com/penguin-agent/penguin/services/llm/gemini"
	"github.com/penguin-agent/penguin/services/llm/openai"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/responses"
)

// Deps are what Build needs besides the file.
type Deps struct {
	// Lookup reads environment variables (os.LookupEnv in a program).
	Lookup config.LookupFunc
	// Catalog describes the models; nil means catalog.Builtin().
	Catalog *catalog.Catalog
	// HTTPClient sends provider requests; nil gives each adapter its own.
	HTTPClient *http.Client
	// IdleTimeout ends a provider stream that sends nothing for this long;
	// zero or less turns it off.
	IdleTimeout time.Duration
	// TracerProvider receives the Anthropic SDK's HTTP spans; nil turns
	// them off.
	TracerProvider trace.TracerProvider
	// Logger receives warnings (a key variable that is not set, a model
	// the catalog does not know); nil discards them.
	Logger *slog.Logger
}

// SourceStore is the credential source of a route whose key the route
// store keeps.
const SourceStore = "store"

// Build creates an adapter per route of f and registers them all in reg, or
// none: a missing key file, a key with characters no HTTP header can carry,
// or a route already in reg fails the whole file. A key variable that is
// not set is only a warning: the route is registered without a key, and
// its requests end with MISSING_CREDENTIAL until the variable is set.
func Build(f *File, reg *registry.Registry, deps Deps) error {
	if err := f.Validate(); err != nil {
		return err
	}
	regs, err := Registrations(f.Providers, deps)
	if err != nil {
		return err
	}
	return reg.RegisterAll(regs...)
}

// Registrations builds the adapter of each route of ps, without checking
// the routes together (Build does, for a file): the llm service composes
// the registries of projects from the same registrations.
func Registrations(ps []Provider, deps Deps) ([]registry.Registration, error) {
	if deps.Lookup == nil {
		return nil, errors.New("providers: an environment lookup is required")
	}
	if deps.Catalog == nil {
		deps.Catalog = catalog.Builtin()
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	regs := make([]registry.Registration, 0, len(ps))
	for _, p := range ps {
		r, err := build(p, deps)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		regs = append(regs, r)
	}
	return regs, nil
}

func build(p Provider, deps Deps) (registry.Registration, error) {
	key, err := config.Secret(deps.Lookup, p.APIKeyEnv, p.APIKeyFile)
	if err != nil {
		return registry.Registration{}, err
	}
	source := ""
	switch {
	case p.APIKey != "":
		key, source = p.APIKey, SourceStore
	case p.APIKeyFile != "":
		source = "file " + p.APIKeyFile
	case p.APIKeyEnv != "":
		source = "env " + p.APIKeyEnv
		if key == "" {
			deps.Logger.Warn("a provider's key variable is not set: its requests will fail with a missing credential until it is",
				"provider", p.Name, "variable", p.APIKeyEnv)
		}
	}
	if err := checkKey(key); err != nil {
		return registry.Registration{}, fmt.Errorf("the key in %s %w", source, err)
	}
	headers := http.Header{}
	for k, v := range p.Headers {
		headers.Set(k, v)
	}
	res := p.resolve(deps.Catalog)
	if p.Catalog != "" && p.Catalog != CatalogNone && res.catalog == "" {
		deps.Logger.Warn("a provider names a catalog provider the catalog does not have; its models get conservative defaults",
			"provider", p.Name, "catalog", p.Catalog)
	}
	route := registry.Route{
		Name: p.Name, Type: p.Type, BaseURL: p.BaseURL, HasCredential: key != "", CredentialSource: source,
		Catalog: res.catalog, Models: res.models,
	}
	for _, m := range p.Models {
		route.Listed = append(route.Listed, m.ID)
	}
	switch p.Type {
	case TypeOpenAIResponses:
		if route.BaseURL == "" {
			route.BaseURL = responses.DefaultBaseURL
		}
		a := responses.New(responses.Config{
			BaseURL: route.BaseURL, APIKey: key, Headers: headers, HTTPClient: deps.HTTPClient, IdleTimeout: deps.IdleTimeout,
		})
		return registry.Registration{Adapter: a, Route: route}, nil
	case TypeGemini:
		if route.BaseURL == "" {
			route.BaseURL = gemini.DefaultBaseURL
		}
		a := gemini.New(gemini.Config{
			BaseURL: route.BaseURL, APIKey: key, Headers: headers, HTTPClient: deps.HTTPClient, IdleTimeout: deps.IdleTimeout,
		})
		return registry.Registration{Adapter: a, Route: route}, nil
	case TypeAnthropic:
		if route.BaseURL == "" {
			route.BaseURL = anthropic.DefaultBaseURL
		}
		a := anthropic.New(anthropic.Config{
			BaseURL: route.BaseURL, APIKey: key, Headers: headers,
			HTTPClient: deps.HTTPClient, IdleTimeout: deps.IdleTimeout, TracerProvider: deps.TracerProvider,
		})
		return registry.Registration{Adapter: a, Route: route}, nil
	default:
		if route.BaseURL == "" {
			route.BaseURL = openai.DefaultBaseURL
		}
		a, err := openai.New(openai.Config{
			BaseURL: route.BaseURL, APIKey: key, Headers: headers, MaxTokensParam: res.outputParam, Dialect: res.dialect,
			HTTPClient: deps.HTTPClient, IdleTimeout: deps.IdleTimeout,
		})
		if err != nil {
			return registry.Registration{}, err
		}
		return registry.Registration{Adapter: a, Route: route}, nil
	}
}

// checkKey refuses a key that cannot travel in an HTTP header: it must be
// printable ASCII without spaces. The error never repeats the key.
func checkKey(key string) error {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("has a character at byte %d that an HTTP header cannot carry (keys are printable ASCII without spaces)", i)
		}
	}
	return nil
}
