package routing

import (
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/anthropic"
	"github.com/penguin-agent/penguin/services/llm/openai"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// resolved is a route's catalog side: the catalog provider it follows,
// its reasoning dialect, its output-token parameter and its models.
type resolved struct {
	catalog     string
	dialect     string
	outputParam string
	models      []stream.ModelSpec
}

// resolve lays the file's models over the catalog's for p.
func (p Provider) resolve(cat *catalog.Catalog) resolved {
	var cp *catalog.Provider
	switch id := p.Catalog; {
	case id == CatalogNone:
	case id != "":
		cp = cat.Provider(id)
	default:
		cp = cat.Provider(p.Name)
	}
	r := resolved{dialect: p.Dialect, outputParam: p.MaxTokensParam}
	if cp != nil {
		r.catalog = cp.ID
		if r.dialect == "" {
			r.dialect = cp.Dialect
		}
		if r.outputParam == "" {
			r.outputParam = cp.OutputParam
		}
	}
	if r.dialect == "" {
		r.dialect = defaultDialect(p.Type)
	}
	at := map[string]int{}
	if cp != nil {
		r.models = make([]stream.ModelSpec, 0, len(cp.Models)+len(p.Models))
		for _, m := range cp.Models {
			at[m.ID] = len(r.models)
			r.models = append(r.models, specOf(m))
		}
	}
	for _, fm := range p.Models {
		i, ok := at[fm.ID]
		if !ok {
			i = len(r.models)
			at[fm.ID] = i
			r.models = append(r.models, stream.ModelSpec{ID: fm.ID})
		}
		r.models[i] = overlay(r.models[i], fm, r.dialect)
	}
	return r
}

func defaultDialect(typ string) string {
	switch typ {
	case TypeAnthropic:
		return catalog.DialectAnthropic
	case TypeGemini:
		return catalog.DialectGemini
	}
	return catalog.DialectEffort
}

// specOf converts a catalog model.
func specOf(m *catalog.Model) stream.ModelSpec {
	s := stream.ModelSpec{
		ID: m.ID, Name: m.Name, ContextWindow: m.Context, MaxTokens: m.Output, NoVision: !m.Images,
		Reasoning: m.Reasoning, Tools: m.Tools, NoTools: !m.Tools, Temperature: m.Temperature, Cost: m.Cost, Status: m.Status,
	}
	if c := m.Controls; c != nil {
		s.Toggle = c.Toggle
		if c.Budget != nil {
			s.BudgetMin = c.Budget.Min
		}
	}
	if len(m.Thinking) > 0 {
		s.Thinking = make(stream.ThinkingLevels, len(m.Thinking))
		for name, wire := range m.Thinking {
			if l, ok := translate.ParseLevel(name); ok {
				s.Thinking[l] = wire
			}
		}
	}
	return s
}

// overlay returns s with the fields fm sets.
func overlay(s stream.ModelSpec, fm Model, dialect string) stream.ModelSpec {
	if fm.Name != "" {
		s.Name = fm.Name
	}
	if fm.ContextWindow > 0 {
		s.ContextWindow = fm.ContextWindow
	}
	if fm.MaxTokens > 0 {
		s.MaxTokens = fm.MaxTokens
	}
	if fm.Vision != nil {
		s.NoVision = !*fm.Vision
	}
	if fm.Reasoning != nil {
		s.Reasoning = *fm.Reasoning
	}
	if fm.Tools != nil {
		s.Tools, s.NoTools = *fm.Tools, !*fm.Tools
	}
	if fm.Temperature != nil {
		s.Temperature = *fm.Temperature
	}
	if fm.Thinking != nil {
		s.Thinking = stream.ThinkingLevels{}
		for l, wire := range fm.Thinking.Levels {
			if wire == "" {
				wire = defaultWire(dialect, l)
			}
			s.Thinking[l] = wire
		}
		if len(s.Thinking) > 0 {
			s.Reasoning = true
			_, s.Toggle = s.Thinking[penguinv1.ThinkingLevel_THINKING_LEVEL_NONE]
		}
	}
	if c := fm.Cost; c != nil {
		var nc catalog.Cost
		if s.Cost != nil {
			nc = *s.Cost
		}
		if c.Input != nil {
			nc.Input = *c.Input
		}
		if c.Output != nil {
			nc.Output = *c.Output
		}
		if c.CacheRead != nil {
			nc.CacheRead = c.CacheRead
		}
		if c.CacheWrite != nil {
			nc.CacheWrite = c.CacheWrite
		}
		s.Cost = &nc
	}
	return s
}

// defaultWire is what a level listed without a wire value sends in
// dialect: Anthropic's default budgets; on or off where the provider only
// toggles; the level's own name as an effort elsewhere.
func defaultWire(dialect string, l penguinv1.ThinkingLevel) string {
	none := l == penguinv1.ThinkingLevel_THINKING_LEVEL_NONE
	switch dialect {
	case catalog.DialectAnthropic:
		return anthropic.DefaultThinking[l]
	case catalog.DialectThinkingType, catalog.DialectQwen:
		if none {
			return catalog.WireOff
		}
		return catalog.WireOn
	}
	return openai.DefaultThinking[l]
}
