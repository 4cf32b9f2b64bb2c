// Package generate turns the models.dev snapshot (modelsdev/catalog.json)
// into the gateway's catalog (catalog.json): it keeps the facts (limits,
// capabilities, prices), adds what the snapshot does not say as data (each
// provider's wire protocol, base URL, reasoning dialect and output-token
// parameter), and resolves every thinking level of every reasoning model
// to the wire value the provider accepts for it, so that the catalog shows
// exactly what goes on the wire.
//
// Level resolution: a level whose name the model accepts is sent as is;
// otherwise the nearest accepted effort below it, else the lowest above
// it ("none" only ever for "none"); "none" turns reasoning off where the
// model allows it (a "none" or "minimal" effort, a toggle, a zero budget)
// and lands on the shallowest effort where it cannot. Budgets are 2048,
// 8192, 16384, 32768 and the model's largest for low … max, clamped to the
// model's range and kept below its output limit.
package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/penguin-agent/penguin/internal/catalog"
)

// wire is what the generator adds to a snapshot provider.
type wire struct {
	api, dialect, outputParam, baseURL string
}

// providers lists the snapshot's providers and how each is spoken to.
// Chat Completions providers take max_tokens unless noted.
var providers = map[string]wire{
	"openai":       {api: catalog.APIOpenAIResponses, dialect: catalog.DialectEffort, outputParam: "max_completion_tokens"},
	"anthropic":    {api: catalog.APIAnthropic, dialect: catalog.DialectAnthropic},
	"google":       {api: catalog.APIGemini, dialect: catalog.DialectGemini},
	"deepseek":     {api: catalog.APIOpenAIChat, dialect: catalog.DialectDeepSeek},
	"mistral":      {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort},
	"xai":          {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort, outputParam: "max_completion_tokens"},
	"groq":         {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort, outputParam: "max_completion_tokens"},
	"openrouter":   {api: catalog.APIOpenAIChat, dialect: catalog.DialectOpenRouter},
	"alibaba":      {api: catalog.APIOpenAIChat, dialect: catalog.DialectQwen},
	"moonshotai":   {api: catalog.APIOpenAIChat, dialect: catalog.DialectThinkingType},
	"zhipuai":      {api: catalog.APIOpenAIChat, dialect: catalog.DialectThinkingType},
	"zai":          {api: catalog.APIOpenAIChat, dialect: catalog.DialectThinkingType},
	"togetherai":   {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort},
	"fireworks-ai": {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort, baseURL: "https://api.fireworks.ai/inference/v1"},
	"cerebras":     {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort, outputParam: "max_completion_tokens"},
	"lmstudio":     {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort},
	"ollama-cloud": {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort},
	"llama":        {api: catalog.APIOpenAIChat, dialect: catalog.DialectEffort, baseURL: "https://api.llama.com/compat/v1"},
}

// snapshot is the part of the models.dev snapshot the generator reads.
type snapshot struct {
	Source struct {
		Repo       string `json:"repo"`
		Commit     string `json:"commit"`
		CommitDate string `json:"commit_date"`
		License    string `json:"license"`
	} `json:"source"`
	Providers map[string]struct {
		Name   string                   `json:"name"`
		Env    []string                 `json:"env"`
		API    string                   `json:"api"`
		Models map[string]snapshotModel `json:"models"`
	} `json:"providers"`
}

type snapshotModel struct {
	Name             string `json:"name"`
	Family           string `json:"family"`
	Reasoning        bool   `json:"reasoning"`
	ReasoningOptions []struct {
		Type   string   `json:"type"`
		Values []string `json:"values"`
		Min    *int64   `json:"min"`
		Max    *int64   `json:"max"`
	} `json:"reasoning_options"`
	ToolCall    bool `json:"tool_call"`
	Attachment  bool `json:"attachment"`
	Temperature bool `json:"temperature"`
	Modalities  struct {
		Input []string `json:"input"`
	} `json:"modalities"`
	Limit struct {
		Context int64 `json:"context"`
		Output  int64 `json:"output"`
		Input   int64 `json:"input"`
	} `json:"limit"`
	Cost *struct {
		Input      float64  `json:"input"`
		Output     float64  `json:"output"`
		CacheRead  *float64 `json:"cache_read"`
		CacheWrite *float64 `json:"cache_write"`
	} `json:"cost"`
	Status      string `json:"status"`
	ReleaseDate string `json:"release_date"`
}

// Generate returns catalog.json for the snapshot's bytes: one provider
// header per line and one model per line, so that a refresh reviews as a
// readable diff.
func Generate(snap []byte) ([]byte, error) {
	var s snapshot
	if err := json.Unmarshal(snap, &s); err != nil {
		return nil, fmt.Errorf("generate: read the snapshot: %w", err)
	}
	c := catalog.Catalog{Source: catalog.Source{
		Name: "models.dev", URL: s.Source.Repo, Commit: s.Source.Commit, Date: s.Source.CommitDate, License: s.Source.License,
	}}
	ids := make([]string, 0, len(s.Providers))
	for id := range s.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		sp := s.Providers[id]
		w, ok := providers[id]
		if !ok {
			return nil, fmt.Errorf("generate: provider %q of the snapshot has no wire description; add it to the providers table", id)
		}
		p := &catalog.Provider{
			ID: id, Name: sp.Name, API: w.api, BaseURL: strings.TrimRight(sp.API, "/"), Env: sp.Env,
			Dialect: w.dialect, OutputParam: w.outputParam,
		}
		if w.baseURL != "" {
			p.BaseURL = w.baseURL
		}
		if p.API != catalog.APIAnthropic && p.API != catalog.APIGemini && p.OutputParam == "" {
			p.OutputParam = "max_tokens"
		}
		mids := make([]string, 0, len(sp.Models))
		for mid := range sp.Models {
			mids = append(mids, mid)
		}
		sort.Strings(mids)
		for _, mid := range mids {
			m, err := model(mid, sp.Models[mid], w.dialect)
			if err != nil {
				return nil, fmt.Errorf("generate: %s/%s: %w", id, mid, err)
			}
			p.Models = append(p.Models, m)
		}
		c.Providers = append(c.Providers, p)
	}
	return render(&c)
}

func model(id string, sm snapshotModel, dialect string) (*catalog.Model, error) {
	m := &catalog.Model{
		ID: id, Name: sm.Name, Family: sm.Family,
		Context: sm.Limit.Context, Input: sm.Limit.Input, Output: sm.Limit.Output,
		Reasoning: sm.Reasoning, Tools: sm.ToolCall, Temperature: sm.Temperature,
		Images: sm.Attachment && slices.Contains(sm.Modalities.Input, "image"),
		Status: sm.Status, Released: sm.ReleaseDate,
	}
	if sm.Cost != nil {
		m.Cost = &catalog.Cost{Input: sm.Cost.Input, Output: sm.Cost.Output, CacheRead: sm.Cost.CacheRead, CacheWrite: sm.Cost.CacheWrite}
	}
	if !sm.Reasoning {
		return m, nil
	}
	ctl := &catalog.Controls{}
	for _, o := range sm.ReasoningOptions {
		switch o.Type {
		case "effort":
			ctl.Efforts = o.Values
		case "budget_tokens":
			b := &catalog.Budget{}
			if o.Min != nil {
				b.Min = *o.Min
			}
			if o.Max != nil {
				b.Max = *o.Max
			}
			ctl.Budget = b
		case "toggle":
			ctl.Toggle = true
		default:
			return nil, fmt.Errorf("unknown reasoning option %q", o.Type)
		}
	}
	if len(ctl.Efforts) == 0 && ctl.Budget == nil && !ctl.Toggle {
		return m, nil // reasons, but cannot be controlled
	}
	m.Controls = ctl
	m.Thinking = thinking(ctl, dialect, m.Output)
	return m, nil
}

// rank orders effort names from shallow to deep; "default" sits in the
// middle.
var rank = map[string]int{"none": 0, "minimal": 1, "low": 2, "medium": 3, "default": 3, "high": 4, "xhigh": 5, "max": 6}

// budgets are the thinking budgets of low … max before clamping.
var budgets = map[string]int64{"low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 1 << 40}

// thinking resolves every level to a wire value in the dialect.
func thinking(ctl *catalog.Controls, dialect string, output int64) map[string]string {
	out := map[string]string{}
	// Anthropic: a budget for the models that take one, except the
	// adaptive-thinking generation (the models whose efforts reach "max",
	// for which Anthropic deprecates budgets); elsewhere a budget only
	// where no effort exists.
	useBudget := ctl.Budget != nil && len(ctl.Efforts) == 0
	if dialect == catalog.DialectAnthropic {
		useBudget = ctl.Budget != nil && !slices.Contains(ctl.Efforts, "max")
	}
	if dialect == catalog.DialectThinkingType {
		// Zhipu, Z.AI and Moonshot document a toggle only.
		useBudget = false
	}
	for _, level := range catalog.Levels {
		switch {
		case level == "none" && offWire(ctl, dialect) != "":
			out[level] = offWire(ctl, dialect)
		case useBudget:
			out[level] = budgetWire(ctl.Budget, level, output)
		case len(ctl.Efforts) > 0 && dialect != catalog.DialectThinkingType && dialect != catalog.DialectQwen:
			out[level] = nearestEffort(ctl.Efforts, level)
		case ctl.Toggle:
			out[level] = catalog.WireOn
		}
		if out[level] == "" {
			delete(out, level)
		}
	}
	return out
}

// offWire is how "none" turns reasoning off, or "" when it cannot.
func offWire(ctl *catalog.Controls, dialect string) string {
	switch {
	case dialect == catalog.DialectAnthropic:
		return catalog.WireOff // thinking is simply not enabled
	case slices.Contains(ctl.Efforts, "none") && dialect != catalog.DialectThinkingType && dialect != catalog.DialectQwen:
		return "none"
	case ctl.Toggle:
		return catalog.WireOff
	case ctl.Budget != nil && ctl.Budget.Min == 0 && len(ctl.Efforts) == 0:
		return "0"
	case slices.Contains(ctl.Efforts, "minimal") && dialect != catalog.DialectThinkingType && dialect != catalog.DialectQwen:
		return "minimal"
	}
	return ""
}

// nearestEffort is the accepted effort nearest to level: the same name,
// else the deepest below it, else the shallowest above it; "none" only for
// "none".
func nearestEffort(efforts []string, level string) string {
	if slices.Contains(efforts, level) {
		return level
	}
	want := rank[level]
	best, bestRank := "", -1
	for _, e := range efforts {
		r, ok := rank[e]
		if !ok || (e == "none" && level != "none") {
			continue
		}
		if r <= want && r > bestRank {
			best, bestRank = e, r
		}
	}
	if best != "" {
		return best
	}
	bestRank = 1 << 30
	for _, e := range efforts {
		r, ok := rank[e]
		if !ok || (e == "none" && level != "none") {
			continue
		}
		if r < bestRank {
			best, bestRank = e, r
		}
	}
	return best
}

func budgetWire(b *catalog.Budget, level string, output int64) string {
	n, ok := budgets[level]
	if !ok { // "none" on a model that cannot turn thinking off
		n = b.Min
	}
	if b.Max > 0 {
		n = min(n, b.Max)
	}
	if output > 0 {
		n = min(n, output-1)
	}
	n = max(n, b.Min, 1)
	return strconv.FormatInt(n, 10)
}

// render writes the catalog with one provider header and one model per
// line.
func render(c *catalog.Catalog) ([]byte, error) {
	var b bytes.Buffer
	src, err := json.Marshal(c.Source)
	if err != nil {
		return nil, err
	}
	b.WriteString(`{"source":`)
	b.Write(src)
	b.WriteString(",\n\"providers\":[\n")
	for i, p := range c.Providers {
		models := p.Models
		hdr := *p
		hdr.Models = nil
		h, err := json.Marshal(&hdr)
		if err != nil {
			return nil, err
		}
		// Reopen the header object to append the models list.
		h = bytes.TrimSuffix(h, []byte(`,"models":null}`))
		b.Write(h)
		b.WriteString(",\"models\":[\n")
		for j, m := range models {
			mb, err := json.Marshal(m)
			if err != nil {
				return nil, err
			}
			b.Write(mb)
			if j < len(models)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("]}")
		if i < len(c.Providers)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}
