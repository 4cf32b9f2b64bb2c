// Package routing reads the llm service's provider routes: a YAML file
// listing each route (name, type, base URL, where its key comes from, extra
// headers, the catalog provider it follows, its models' overrides), and the
// presets that one environment variable turns on (OPENAI_API_KEY,
// DEEPSEEK_API_KEY, OLLAMA_HOST, …). It then lays each route's models from
// the catalog under the file's overrides, builds the adapters and registers
// them, so the command that serves the gateway only wires. (The adapters,
// one package per wire protocol, are its siblings: openai, anthropic,
// gemini, responses.)
//
// Keys come from an environment variable or a file, never from the YAML
// itself; the parsed file holds only where a key is, so it can be logged,
// and the key goes straight into its adapter.
package routing

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/openai"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// Adapter types: the wire protocols, by the catalog's names, plus "openai",
// the short name of Chat Completions.
const (
	TypeOpenAI          = "openai"
	TypeOpenAIChat      = catalog.APIOpenAIChat
	TypeOpenAIResponses = catalog.APIOpenAIResponses
	TypeAnthropic       = catalog.APIAnthropic
	TypeGemini          = catalog.APIGemini
)

// types lists the accepted types, for errors.
var types = []string{TypeOpenAI, TypeOpenAIChat, TypeOpenAIResponses, TypeAnthropic, TypeGemini}

// CatalogNone, as a provider's catalog, lists no catalog models for it.
const CatalogNone = "none"

// File is the providers file.
type File struct {
	// Providers are the routes.
	Providers []Provider `yaml:"providers"`
}

// Provider is one route in the providers file.
type Provider struct {
	// Name is the route's name, the provider half of a model reference.
	Name string `yaml:"name"`
	// Type is the adapter: "openai" or "openai-chat" (Chat Completions
	// and compatible servers), "openai-responses" (the Responses API),
	// "anthropic" (Messages) or "gemini" (Google's Gemini API).
	Type string `yaml:"type"`
	// BaseURL is the API base: ending in /v1 for openai, without it for
	// anthropic. Empty means the vendor's own API.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// APIKeyFile is a file holding the key (for mounted secrets).
	APIKeyFile string `yaml:"api_key_file,omitempty"`
	// APIKey is the key itself, for a route added through the API: the
	// route store opens it from its sealed column. It is never read from
	// or written to YAML, so a providers file cannot hold one.
	APIKey string `yaml:"-"`
	// Headers are added to every request of the route.
	Headers map[string]string `yaml:"headers,omitempty"`
	// MaxTokensParam (Chat Completions only) picks max_tokens or
	// max_completion_tokens; empty takes the catalog provider's, else
	// decides by the base URL.
	MaxTokensParam string `yaml:"max_tokens_param,omitempty"`
	// Catalog is the catalog provider whose models (limits, reasoning
	// controls, prices) and reasoning dialect the route follows. Empty
	// means the provider named like the route, when the catalog has one;
	// CatalogNone means no catalog models.
	Catalog string `yaml:"catalog,omitempty"`
	// Dialect overrides how reasoning controls go on the wire
	// (catalog.DialectEffort, …); empty takes the catalog provider's, else
	// the type's own.
	Dialect string `yaml:"dialect,omitempty"`
	// Models override or add to the catalog's models of the route.
	Models []Model `yaml:"models,omitempty"`
}

// Model is one model of the file: each field it sets overrides the
// catalog's; a model the catalog does not know is added.
type Model struct {
	// ID is the model id sent upstream.
	ID string `yaml:"id"`
	// Name is the display name.
	Name string `yaml:"name,omitempty"`
	// ContextWindow is the window in tokens; it drives the output cap.
	ContextWindow int64 `yaml:"context_window,omitempty"`
	// MaxTokens is the model's default and largest output.
	MaxTokens int64 `yaml:"max_tokens,omitempty"`
	// Vision says whether the model takes images; default true for a
	// model the catalog does not know.
	Vision *bool `yaml:"vision,omitempty"`
	// Reasoning, Tools and Temperature say whether the model reasons,
	// calls tools and takes a temperature.
	Reasoning   *bool `yaml:"reasoning,omitempty"`
	Tools       *bool `yaml:"tools,omitempty"`
	Temperature *bool `yaml:"temperature,omitempty"`
	// Thinking lists the thinking levels the model takes: a list of level
	// names (each sent as the dialect's default wire value for it), or a
	// map from level name to the wire value (an effort name, a budget in
	// tokens, "on" or "off"). An empty list: no reasoning parameter is
	// ever sent. A level not listed lands on the nearest listed one.
	Thinking *Thinking `yaml:"thinking,omitempty"`
	// Cost is the price in USD per million tokens; fields left out keep
	// the catalog's.
	Cost *Cost `yaml:"cost,omitempty"`
}

// Cost is a model's price in USD per million tokens.
type Cost struct {
	Input      *float64 `yaml:"input,omitempty"`
	Output     *float64 `yaml:"output,omitempty"`
	CacheRead  *float64 `yaml:"cache_read,omitempty"`
	CacheWrite *float64 `yaml:"cache_write,omitempty"`
}

// Thinking is the thinking capability of a model, in either YAML form.
type Thinking struct {
	// Levels maps each accepted level to its wire value; an empty wire
	// value means the adapter's default for that level.
	Levels map[penguinv1.ThinkingLevel]string
}

// UnmarshalYAML reads a list of level names or a map of level to wire value.
func (t *Thinking) UnmarshalYAML(n *yaml.Node) error {
	t.Levels = map[penguinv1.ThinkingLevel]string{}
	add := func(name, wire string) error {
		l, ok := translate.ParseLevel(name)
		if !ok {
			return fmt.Errorf("line %d: thinking level %q: want none, low, medium, high, xhigh or max", n.Line, name)
		}
		t.Levels[l] = wire
		return nil
	}
	switch n.Kind {
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, name := range names {
			if err := add(name, ""); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		var m map[string]string
		if err := n.Decode(&m); err != nil {
			return err
		}
		for name, wire := range m {
			if err := add(name, wire); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("line %d: thinking must be a list of levels or a map of level to wire value", n.Line)
	}
	return nil
}

// ValidName reports whether name can name a route added through the API:
// 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a
// letter or digit (a providers file may use others).
func ValidName(name string) bool { return routeName().MatchString(name) }

var routeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`) })

// Parse reads a providers file and checks it. Unknown keys are errors, so
// a typo does not silently drop a setting.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("providers file is empty")
		}
		return nil, fmt.Errorf("parse providers file: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Load reads and parses the providers file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read providers file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Validate reports every problem of the file, naming the route at fault.
func (f *File) Validate() error {
	var errs []error
	names := map[string]bool{}
	if len(f.Providers) == 0 {
		errs = append(errs, errors.New("providers file lists no providers"))
	}
	for i, p := range f.Providers {
		where := fmt.Sprintf("providers[%d]", i)
		if p.Name != "" {
			where += " (" + p.Name + ")"
		}
		if err := p.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if p.Name != "" && names[p.Name] {
			errs = append(errs, fmt.Errorf("%s: the name %q is used twice", where, p.Name))
		}
		names[p.Name] = true
	}
	return errors.Join(errs...)
}

func (p Provider) validate() error {
	var errs []error
	if strings.TrimSpace(p.Name) == "" {
		errs = append(errs, errors.New("name is empty"))
	}
	if !slices.Contains(types, p.Type) {
		errs = append(errs, fmt.Errorf("type %q: want %s", p.Type, strings.Join(types, ", ")))
	}
	switch p.Dialect {
	case "", catalog.DialectEffort, catalog.DialectDeepSeek, catalog.DialectThinkingType, catalog.DialectQwen,
		catalog.DialectOpenRouter, catalog.DialectAnthropic, catalog.DialectGemini:
	default:
		errs = append(errs, fmt.Errorf("dialect %q is not a reasoning dialect", p.Dialect))
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("base_url %q: want an http or https URL", p.BaseURL))
		}
	}
	if p.APIKeyEnv != "" && p.APIKeyFile != "" {
		errs = append(errs, errors.New("set api_key_env or api_key_file, not both"))
	}
	if p.APIKey != "" && (p.APIKeyEnv != "" || p.APIKeyFile != "") {
		errs = append(errs, errors.New("a route with a stored key takes it from nowhere else (api_key_env, api_key_file)"))
	}
	if p.MaxTokensParam != "" {
		if !chat(p.Type) {
			errs = append(errs, errors.New("max_tokens_param applies to type openai only"))
		} else if p.MaxTokensParam != openai.MaxTokensParam && p.MaxTokensParam != openai.MaxCompletionTokensParam {
			errs = append(errs, fmt.Errorf("max_tokens_param %q: want %s or %s", p.MaxTokensParam, openai.MaxTokensParam, openai.MaxCompletionTokensParam))
		}
	}
	for k := range p.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			errs = append(errs, fmt.Errorf("header name %q is not valid", k))
		}
	}
	ids := map[string]bool{}
	for j, m := range p.Models {
		if m.ID == "" {
			errs = append(errs, fmt.Errorf("models[%d]: id is empty", j))
		} else if ids[m.ID] {
			errs = append(errs, fmt.Errorf("models[%d]: model %q is listed twice", j, m.ID))
		}
		ids[m.ID] = true
		if m.ContextWindow < 0 || m.MaxTokens < 0 {
			errs = append(errs, fmt.Errorf("models[%d] (%s): context_window and max_tokens cannot be negative", j, m.ID))
		}
		if c := m.Cost; c != nil && (negative(c.Input) || negative(c.Output) || negative(c.CacheRead) || negative(c.CacheWrite)) {
			errs = append(errs, fmt.Errorf("models[%d] (%s): prices cannot be negative", j, m.ID))
		}
		if m.Thinking != nil && p.Type == TypeAnthropic {
			for l, wire := range m.Thinking.Levels {
				if wire != "" && !anthropicWire(wire) {
					errs = append(errs, fmt.Errorf("models[%d] (%s): thinking %s: %q is neither a budget in tokens nor an effort (low, medium, high, xhigh, max)",
						j, m.ID, translate.LevelName(l), wire))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func negative(p *float64) bool { return p != nil && *p < 0 }

// chat reports whether t names Chat Completions.
func chat(t string) bool { return t == TypeOpenAI || t == TypeOpenAIChat }

func anthropicWire(w string) bool {
	if w == catalog.WireOff || w == catalog.WireOn {
		return true
	}
	if slices.Contains([]string{"low", "medium", "high", "xhigh", "max"}, w) {
		return true
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
