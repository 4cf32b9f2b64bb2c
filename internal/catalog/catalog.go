// Package catalog is the model catalog: the providers people use and their
// models, with context and output limits, whether each
// reasons (and how its reasoning is controlled on the wire), takes tools,
// images and a temperature, and what it costs per million tokens (input,
// output, cache reads and writes).
//
// The built-in catalog is generated from a snapshot of the open models.dev
// catalog (modelsdev/, MIT) by `go generate` into catalog.json, and from
// that into builtin_gen.go, the same data as a Go literal that is compiled
// into the binary so that a start decodes nothing; a test fails when
// either committed file differs from what the generator writes. At run
// time a file or URL in the same format can override or extend it
// ([Merge]), and the providers file can override any field of one model.
// Everything is data: the gateway shapes each request from it (the
// output-token parameter and limit, reasoning parameters only where the
// model reasons, temperature only where allowed) and prices token usage
// with it. It lives outside the llm service because the
// provider emulator (internal/testkit/emulator) imitates the same models
// from the same data.
package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

//go:generate go run -tags gencatalog ./internal/gencatalog

// The wire protocols a provider speaks.
const (
	// APIOpenAIChat is OpenAI Chat Completions (and compatible servers).
	APIOpenAIChat = "openai-chat"
	// APIOpenAIResponses is the OpenAI Responses API.
	APIOpenAIResponses = "openai-responses"
	// APIAnthropic is Anthropic Messages.
	APIAnthropic = "anthropic"
	// APIGemini is Google's Gemini API (generateContent).
	APIGemini = "gemini"
)

// The reasoning dialects: how a provider takes reasoning controls on the
// wire. The wire values of a model's Thinking map are read in its
// provider's dialect.
const (
	// DialectEffort sends the effort name: reasoning_effort on Chat
	// Completions (OpenAI and most compatible servers), reasoning.effort
	// on the Responses API.
	DialectEffort = "effort"
	// DialectDeepSeek sends thinking.type (enabled or disabled) and
	// reasoning_effort.
	DialectDeepSeek = "deepseek"
	// DialectThinkingType sends thinking.type only (Zhipu, Z.AI, Moonshot).
	DialectThinkingType = "thinking-type"
	// DialectQwen sends enable_thinking and thinking_budget (Alibaba
	// DashScope).
	DialectQwen = "qwen"
	// DialectOpenRouter sends the reasoning object (enabled, effort or
	// max_tokens).
	DialectOpenRouter = "openrouter"
	// DialectAnthropic sends a thinking budget or adaptive thinking with
	// output_config.effort.
	DialectAnthropic = "anthropic"
	// DialectGemini sends generationConfig.thinkingConfig (a thinking
	// level or a budget).
	DialectGemini = "gemini"
)

// The wire values of a Thinking map besides effort names and budgets.
const (
	// WireOff turns reasoning off explicitly.
	WireOff = "off"
	// WireOn turns reasoning on where only a toggle exists.
	WireOn = "on"
)

// Levels are the thinking level names, shallowest first.
var Levels = []string{"none", "low", "medium", "high", "xhigh", "max"}

// Catalog is a set of providers and their models. A catalog returned by
// this package is never changed afterwards, so it can be shared.
type Catalog struct {
	// Source says where the data came from.
	Source Source `json:"source"`
	// Providers are sorted by id.
	Providers []*Provider `json:"providers"`
}

// Source is the provenance of a catalog.
type Source struct {
	// Name names the data ("models.dev"), URL where it lives.
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
	// Commit and Date identify the snapshot.
	Commit string `json:"commit,omitempty"`
	Date   string `json:"date,omitempty"`
	// License is the data's license.
	License string `json:"license,omitempty"`
}

// Provider is one provider of the catalog.
type Provider struct {
	// ID is the provider's id, also the name of its preset route.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name,omitempty"`
	// API is the wire protocol (APIOpenAIChat, …).
	API string `json:"api,omitempty"`
	// BaseURL is the vendor's API base URL, in the form the adapter of
	// API takes.
	BaseURL string `json:"base_url,omitempty"`
	// Env are the environment variables that hold the provider's key, the
	// usual one first.
	Env []string `json:"env,omitempty"`
	// Dialect is how reasoning controls go on the wire (DialectEffort, …).
	Dialect string `json:"dialect,omitempty"`
	// OutputParam is the name of the output-token parameter on Chat
	// Completions: max_tokens or max_completion_tokens (a Responses API
	// provider that also serves Chat Completions names its own).
	OutputParam string `json:"output_param,omitempty"`
	// Models are sorted by id.
	Models []*Model `json:"models"`

	index map[string]*Model
}

// Model is one model of a provider.
type Model struct {
	// ID is the id sent upstream.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name,omitempty"`
	// Family groups variants of a model.
	Family string `json:"family,omitempty"`
	// Context is the context window in tokens; zero when unknown.
	Context int64 `json:"context,omitempty"`
	// Input is the largest input in tokens, when the provider limits it
	// apart from the window.
	Input int64 `json:"input,omitempty"`
	// Output is the largest output in tokens; zero when unknown.
	Output int64 `json:"output,omitempty"`
	// Reasoning says whether the model reasons.
	Reasoning bool `json:"reasoning,omitempty"`
	// Controls is how the model's reasoning can be controlled, as the
	// provider documents it; nil for a model that does not reason or
	// whose reasoning cannot be controlled.
	Controls *Controls `json:"controls,omitempty"`
	// Thinking maps each thinking level to the wire value sent for it, in
	// the provider's dialect: an effort name, a budget in tokens, WireOn
	// or WireOff. A level that is missing sends no reasoning parameter.
	// Empty for a model that does not reason or cannot be controlled.
	Thinking map[string]string `json:"thinking,omitempty"`
	// Tools says whether the model calls tools.
	Tools bool `json:"tools,omitempty"`
	// Images says whether the model takes images.
	Images bool `json:"images,omitempty"`
	// Temperature says whether the model takes a temperature.
	Temperature bool `json:"temperature,omitempty"`
	// Cost is the price; nil when unknown.
	Cost *Cost `json:"cost,omitempty"`
	// Status is "deprecated", "beta" or "alpha"; empty for a current
	// model.
	Status string `json:"status,omitempty"`
	// Released is the release date (YYYY-MM-DD).
	Released string `json:"released,omitempty"`
}

// Controls is how a model's reasoning is controlled.
type Controls struct {
	// Efforts are the accepted effort values, shallowest first.
	Efforts []string `json:"efforts,omitempty"`
	// Budget is the accepted range of a thinking budget; nil when the
	// model takes none.
	Budget *Budget `json:"budget,omitempty"`
	// Toggle says whether reasoning can be turned off.
	Toggle bool `json:"toggle,omitempty"`
}

// Budget is the accepted range of a thinking budget in tokens; zero Max
// means no documented upper bound.
type Budget struct {
	Min int64 `json:"min"`
	Max int64 `json:"max,omitempty"`
}

// Cost is a price in USD per million tokens.
type Cost struct {
	// Input is the price of uncached input.
	Input float64 `json:"input"`
	// Output is the price of output (reasoning included).
	Output float64 `json:"output"`
	// CacheRead is the price of input read from the cache; nil means the
	// input price.
	CacheRead *float64 `json:"cache_read,omitempty"`
	// CacheWrite is the price of input written to the cache; nil means
	// the input price.
	CacheWrite *float64 `json:"cache_write,omitempty"`
}

// Usage is what a request used, for [Cost.Of].
type Usage struct {
	// Input is every input token, cached or not.
	Input int64
	// CacheRead and CacheWrite are the input tokens read from and written
	// to the cache (part of Input).
	CacheRead, CacheWrite int64
	// Output is every output token, reasoning included.
	Output int64
}

// Of returns the cost of u in USD: uncached input at the input price,
// cache reads and writes at theirs, output at the output price.
func (c *Cost) Of(u Usage) float64 {
	read, write := c.Input, c.Input
	if c.CacheRead != nil {
		read = *c.CacheRead
	}
	if c.CacheWrite != nil {
		write = *c.CacheWrite
	}
	uncached := max(u.Input-u.CacheRead-u.CacheWrite, 0)
	usd := (float64(uncached)*c.Input + float64(u.CacheRead)*read + float64(u.CacheWrite)*write + float64(u.Output)*c.Output) / 1e6
	// Round to a millionth of a cent so sums print cleanly.
	return math.Round(usd*1e8) / 1e8
}

// builtin completes builtinCatalog with its maps, then sorts, indexes and
// checks it as Parse does a decoded catalog, once.
var builtin = sync.OnceValues(func() (*Catalog, error) {
	builtinMaps()
	c := &builtinCatalog
	return c, c.prepare()
})

// Builtin returns the built-in catalog. It is indexed once, on first use.
func Builtin() *Catalog {
	c, err := builtin()
	if err != nil {
		// The literal is generated from catalog.json and checked by a
		// test: an error is a build defect.
		panic("catalog: the built-in catalog is not valid: " + err.Error())
	}
	return c
}

// Parse reads a catalog in the format of catalog.json and checks it.
// Unknown keys are errors, so a typo in an override file does not silently
// drop a field.
func Parse(data []byte) (*Catalog, error) {
	var c Catalog
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	return &c, nil
}

// prepare sorts and indexes the catalog and checks it.
func (c *Catalog) prepare() error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range c.Providers {
		if p == nil || p.ID == "" {
			errs = append(errs, fmt.Errorf("providers[%d]: id is empty", i))
			continue
		}
		if seen[p.ID] {
			errs = append(errs, fmt.Errorf("provider %q is listed twice", p.ID))
		}
		seen[p.ID] = true
		switch p.API {
		case "", APIOpenAIChat, APIOpenAIResponses, APIAnthropic, APIGemini:
		default:
			errs = append(errs, fmt.Errorf("provider %q: api %q: want %s, %s, %s or %s", p.ID, p.API, APIOpenAIChat, APIOpenAIResponses, APIAnthropic, APIGemini))
		}
		p.index = make(map[string]*Model, len(p.Models))
		for j, m := range p.Models {
			if m == nil || m.ID == "" {
				errs = append(errs, fmt.Errorf("provider %q: models[%d]: id is empty", p.ID, j))
				continue
			}
			if p.index[m.ID] != nil {
				errs = append(errs, fmt.Errorf("provider %q: model %q is listed twice", p.ID, m.ID))
			}
			if m.Context < 0 || m.Output < 0 || m.Input < 0 {
				errs = append(errs, fmt.Errorf("provider %q: model %q: limits cannot be negative", p.ID, m.ID))
			}
			for l := range m.Thinking {
				if !slices.Contains(Levels, l) {
					errs = append(errs, fmt.Errorf("provider %q: model %q: thinking level %q: want one of %s", p.ID, m.ID, l, strings.Join(Levels, ", ")))
				}
			}
			if c := m.Cost; c != nil && (c.Input < 0 || c.Output < 0 || neg(c.CacheRead) || neg(c.CacheWrite)) {
				errs = append(errs, fmt.Errorf("provider %q: model %q: prices cannot be negative", p.ID, m.ID))
			}
			p.index[m.ID] = m
		}
		slices.SortFunc(p.Models, func(a, b *Model) int { return strings.Compare(a.ID, b.ID) })
	}
	if len(errs) > 0 {
		return fmt.Errorf("catalog: %w", errors.Join(errs...))
	}
	slices.SortFunc(c.Providers, func(a, b *Provider) int { return strings.Compare(a.ID, b.ID) })
	return nil
}

func neg(p *float64) bool { return p != nil && *p < 0 }

// Provider returns the provider with id, or nil.
func (c *Catalog) Provider(id string) *Provider {
	i, ok := slices.BinarySearchFunc(c.Providers, id, func(p *Provider, id string) int { return strings.Compare(p.ID, id) })
	if !ok {
		return nil
	}
	return c.Providers[i]
}

// Model returns the model with id, or nil.
func (p *Provider) Model(id string) *Model {
	if p == nil {
		return nil
	}
	return p.index[id]
}

// Size returns the number of providers and of models.
func (c *Catalog) Size() (providers, models int) {
	for _, p := range c.Providers {
		models += len(p.Models)
	}
	return len(c.Providers), models
}

// Merge returns a new catalog: c with over laid on top. A provider or
// model of over that c lacks is added; one that c has keeps every field
// over does not set, key by key (cost and controls too), while a thinking
// map replaces c's whole. Neither catalog is changed.
func Merge(c *Catalog, overRaw []byte) (*Catalog, error) {
	if _, err := Parse(overRaw); err != nil {
		return nil, fmt.Errorf("catalog override: %w", err)
	}
	base, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var b, o map[string]any
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(overRaw, &o); err != nil {
		return nil, err
	}
	if src, ok := o["source"].(map[string]any); ok && len(src) > 0 {
		b["source"] = mergeObject(asObject(b["source"]), src)
	}
	b["providers"] = mergeByID(asList(b["providers"]), asList(o["providers"]), func(base, over map[string]any) map[string]any {
		models := mergeByID(asList(base["models"]), asList(over["models"]), func(bm, om map[string]any) map[string]any {
			out := mergeObject(bm, om)
			if th, ok := om["thinking"]; ok {
				out["thinking"] = th
			}
			return out
		})
		out := mergeObject(base, over)
		out["models"] = models
		return out
	})
	merged, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	return Parse(merged)
}

func asObject(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// mergeObject returns base with over's keys laid on it, objects merged key
// by key and everything else replaced.
func mergeObject(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if ov, ok := v.(map[string]any); ok {
			if bv, ok := out[k].(map[string]any); ok {
				out[k] = mergeObject(bv, ov)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// mergeByID merges two lists of objects keyed by "id".
func mergeByID(base, over []any, merge func(base, over map[string]any) map[string]any) []any {
	at := map[string]int{}
	out := make([]any, 0, len(base)+len(over))
	for _, v := range base {
		m := asObject(v)
		id, _ := m["id"].(string)
		at[id] = len(out)
		out = append(out, m)
	}
	for _, v := range over {
		m := asObject(v)
		id, _ := m["id"].(string)
		if i, ok := at[id]; ok {
			out[i] = merge(asObject(out[i]), m)
			continue
		}
		at[id] = len(out)
		out = append(out, m)
	}
	return out
}
