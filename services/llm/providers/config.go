// Package providers reads the llm service's provider routes: a YAML file
// listing each route (name, type, base URL, where its key comes from, extra
// headers, its models), or, with no file, the routes the standard
// environment variables imply. It then builds the adapters and registers
// them, so the command that serves the gateway only wires.
//
// Keys come from an environment variable or a file, never from the YAML
// itself; the parsed file holds only where a key is, so it can be logged,
// and the key goes straight into its adapter.
package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/anthropic"
	"github.com/penguin-agent/penguin/services/llm/openai"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// Adapter types.
const (
	TypeOpenAI    = "openai"
	TypeAnthropic = "anthropic"
)

// File is the providers file.
type File struct {
	// Providers are the routes.
	Providers []Provider `yaml:"providers"`
}

// Provider is one route in the providers file.
type Provider struct {
	// Name is the route's name, the provider half of a model reference.
	Name string `yaml:"name"`
	// Type is the adapter: "openai" (Chat Completions and compatible
	// servers) or "anthropic" (Messages).
	Type string `yaml:"type"`
	// BaseURL is the API base: ending in /v1 for openai, without it for
	// anthropic. Empty means the vendor's own API.
	BaseURL string `yaml:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// APIKeyFile is a file holding the key (for mounted secrets).
	APIKeyFile string `yaml:"api_key_file,omitempty"`
	// Headers are added to every request of the route.
	Headers map[string]string `yaml:"headers,omitempty"`
	// MaxTokensParam (openai only) picks max_tokens or
	// max_completion_tokens; empty decides by the base URL.
	MaxTokensParam string `yaml:"max_tokens_param,omitempty"`
	// Models are the route's models, for discovery and limits.
	Models []Model `yaml:"models,omitempty"`
}

// Model is one listed model.
type Model struct {
	// ID is the model id sent upstream.
	ID string `yaml:"id"`
	// ContextWindow is the window in tokens; it drives the output cap.
	ContextWindow int64 `yaml:"context_window,omitempty"`
	// MaxTokens is the model's default and largest output.
	MaxTokens int64 `yaml:"max_tokens,omitempty"`
	// Vision says whether the model takes images; default true.
	Vision *bool `yaml:"vision,omitempty"`
	// Thinking lists the thinking levels the model takes: a list of level
	// names (each sent as the adapter's default wire value for it), or a
	// map from level name to the wire value (a reasoning effort for
	// openai; a budget in tokens or an adaptive effort name for
	// anthropic). Omitted: unknown, the adapter's defaults apply. An empty
	// list: the model does not think.
	Thinking *Thinking `yaml:"thinking,omitempty"`
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
	switch p.Type {
	case TypeOpenAI, TypeAnthropic:
	default:
		errs = append(errs, fmt.Errorf("type %q: want %s or %s", p.Type, TypeOpenAI, TypeAnthropic))
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
	if p.MaxTokensParam != "" {
		if p.Type != TypeOpenAI {
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

func anthropicWire(w string) bool {
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

// FromEnv returns the routes the standard environment implies when there
// is no providers file: "openai" when OPENAI_API_KEY is set (at
// OPENAI_BASE_URL when that is set too) and "anthropic" when
// ANTHROPIC_API_KEY is set (at ANTHROPIC_BASE_URL). Either may be missing;
// both missing is an empty file, which Build refuses.
func FromEnv(lookup config.LookupFunc) *File {
	f := &File{}
	if v, ok := lookup("OPENAI_API_KEY"); ok && v != "" {
		base, _ := lookup("OPENAI_BASE_URL")
		f.Providers = append(f.Providers, Provider{Name: "openai", Type: TypeOpenAI, BaseURL: base, APIKeyEnv: "OPENAI_API_KEY"})
	}
	if v, ok := lookup("ANTHROPIC_API_KEY"); ok && v != "" {
		base, _ := lookup("ANTHROPIC_BASE_URL")
		f.Providers = append(f.Providers, Provider{Name: "anthropic", Type: TypeAnthropic, BaseURL: base, APIKeyEnv: "ANTHROPIC_API_KEY"})
	}
	return f
}

// specs turns the listed models into the registry's specs, resolving each
// level's wire value against the adapter's defaults.
func (p Provider) specs() []stream.ModelSpec {
	defaults := openai.DefaultThinking
	if p.Type == TypeAnthropic {
		defaults = anthropic.DefaultThinking
	}
	out := make([]stream.ModelSpec, 0, len(p.Models))
	for _, m := range p.Models {
		s := stream.ModelSpec{ID: m.ID, ContextWindow: m.ContextWindow, MaxTokens: m.MaxTokens, NoVision: m.Vision != nil && !*m.Vision}
		if m.Thinking != nil {
			s.Thinking = stream.ThinkingLevels{}
			for l, wire := range m.Thinking.Levels {
				if wire == "" {
					wire = defaults[l]
				}
				s.Thinking[l] = wire
			}
		}
		out = append(out, s)
	}
	return out
}
