package routing_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routing"
)

const file = `
providers:
  - name: deepseek
    type: openai
    base_url: https://api.deepseek.com/v1
    api_key_env: DEEPSEEK_API_KEY
    headers: {X-Title: penguin}
    models:
      - id: deepseek-v4-flash
        context_window: 1000000
        vision: false
        thinking: {low: low, medium: high, high: high, max: max}
  - name: claude
    type: anthropic
    api_key_file: KEYFILE
    models:
      - id: claude-opus-5
        context_window: 200000
        max_tokens: 64000
        thinking: [low, medium, high]
      - id: claude-haiku
        thinking: []
`

func TestParseAndBuild(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("sk-ant-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := routing.Parse([]byte(strings.Replace(file, "KEYFILE", keyFile, 1)))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(map[string]string{"DEEPSEEK_API_KEY": "sk-ds"})}); err != nil {
		t.Fatal(err)
	}
	routes := reg.Routes()
	if len(routes) != 2 || routes[0].Name != "claude" || routes[0].BaseURL != "https://api.anthropic.com" || !routes[0].HasCredential {
		t.Fatalf("routes = %+v", routes)
	}
	opus := routes[0].Model("claude-opus-5")
	if opus.MaxTokens != 64000 || opus.Thinking[penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM] != "8192" || len(opus.Thinking) != 3 {
		t.Errorf("opus = %+v", opus)
	}
	if haiku := routes[0].Model("claude-haiku"); haiku.Thinking == nil || len(haiku.Thinking) != 0 {
		t.Errorf("a model listed with no levels must be non-thinking: %+v", haiku)
	}
	ds := routes[1].Model("deepseek-v4-flash")
	if !ds.NoVision || ds.Thinking[penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM] != "high" || routes[1].Type != "openai" || routes[1].Catalog != "deepseek" {
		t.Errorf("deepseek = %+v", ds)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "empty"},
		{"providers: []", "lists no providers"},
		{"providers:\n  - name: a\n    type: openai\n    apikey: x\n", "field apikey not found"},
		{"providers:\n  - name: a\n    type: palm\n", `type "palm"`},
		{"providers:\n  - name: a\n    type: openai\n  - name: a\n    type: openai\n", "used twice"},
		{"providers:\n  - name: a\n    type: openai\n    base_url: ftp://x\n", "want an http or https URL"},
		{"providers:\n  - name: a\n    type: openai\n    api_key_env: K\n    api_key_file: /k\n", "not both"},
		{"providers:\n  - name: a\n    type: openai\n    models: [{id: m, thinking: [huge]}]\n", `thinking level "huge"`},
		{"providers:\n  - name: a\n    type: anthropic\n    models: [{id: m, thinking: {low: lots}}]\n", "neither a budget"},
		{"providers:\n  - name: a\n    type: openai\n    models: [{id: m}, {id: m}]\n", "listed twice"},
		{"providers:\n  - name: a\n    type: anthropic\n    max_tokens_param: max_tokens\n", "type openai only"},
	} {
		_, err := routing.Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	cat := catalog.Builtin()
	env := map[string]string{
		"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "ANTHROPIC_API_KEY": "sk-a",
		"DEEPSEEK_API_KEY": "sk-d", "GEMINI_API_KEY": "g", "MISTRAL_API_KEY": "m", "XAI_API_KEY": "x", "GROQ_API_KEY": "q",
		"OPENROUTER_API_KEY": "r", "DASHSCOPE_API_KEY": "d", "MOONSHOT_API_KEY": "k", "ZHIPU_API_KEY": "z",
		"OLLAMA_HOST": "127.0.0.1:11434", "VLLM_BASE_URL": "http://127.0.0.1:8001/v1",
	}
	f, err := routing.FromEnv(config.MapLookup(env), cat)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]routing.Provider{}
	for _, p := range f.Providers {
		got[p.Name] = p
	}
	for _, name := range []string{"openai", "anthropic", "deepseek", "google", "mistral", "xai", "groq", "openrouter", "alibaba", "moonshotai", "zhipuai", "ollama", "vllm"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no preset %q from its variable; presets: %v", name, f.Providers)
		}
	}
	if len(got) != 13 {
		t.Errorf("%d presets, want 13 (zai must not take ZHIPU_API_KEY): %v", len(got), f.Providers)
	}
	if o := got["openai"]; o.BaseURL != "http://127.0.0.1:8000/v1" || o.APIKeyEnv != "OPENAI_API_KEY" || o.Catalog != "openai" {
		t.Errorf("openai preset = %+v", o)
	}
	if a := got["anthropic"]; a.Type != routing.TypeAnthropic || a.BaseURL != "https://api.anthropic.com" {
		t.Errorf("anthropic preset = %+v", a)
	}
	if o := got["ollama"]; o.BaseURL != "http://127.0.0.1:11434/v1" || o.APIKeyEnv != "" || o.Catalog != routing.CatalogNone {
		t.Errorf("ollama preset = %+v", o)
	}
	reg := registry.New()
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(env)}); err != nil {
		t.Fatal(err)
	}
	if n := len(reg.Names()); n != 13 {
		t.Errorf("routes = %v", reg.Names())
	}
	_, ds, _ := reg.Lookup("deepseek")
	if m := ds.Model("deepseek-reasoner"); !m.Known || m.MaxTokens == 0 || m.Cost == nil {
		t.Errorf("the deepseek preset's models come from the catalog: %+v", m)
	}
	if f, _ := routing.FromEnv(config.MapLookup(nil), cat); len(f.Providers) != 0 {
		t.Errorf("no keys, routes %v", f.Providers)
	}
	if _, err := routing.FromEnv(config.MapLookup(map[string]string{"VLLM_BASE_URL": "ftp://x"}), cat); err == nil || !strings.Contains(err.Error(), "VLLM_BASE_URL") {
		t.Errorf("a bad local URL = %v", err)
	}
}

// TestUnsetKeyVariableWarns checks that a providers file naming a key
// variable that is not set builds (the route has no credential) and says
// so in the log, naming the variable.
func TestUnsetKeyVariableWarns(t *testing.T) {
	f, err := routing.Parse([]byte("providers:\n  - name: deepseek\n    type: openai\n    api_key_env: DEEPSEEK_API_KEY\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	reg := registry.New()
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(nil), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if _, rt, _ := reg.Lookup("deepseek"); rt.HasCredential || rt.CredentialSource != "env DEEPSEEK_API_KEY" {
		t.Errorf("route = %+v", rt)
	}
	if !strings.Contains(logged.String(), "key variable is not set") || !strings.Contains(logged.String(), "DEEPSEEK_API_KEY") {
		t.Errorf("log = %q", logged.String())
	}
}

// TestCatalogAndFileOverrides checks that a route follows its catalog
// provider and that the file's fields win per model.
func TestCatalogAndFileOverrides(t *testing.T) {
	f, err := routing.Parse([]byte(`
providers:
  - name: oai
    type: openai
    catalog: openai
    models:
      - id: gpt-4o
        max_tokens: 1000
        cost: {input: 1}
      - id: my-finetune
        context_window: 32000
        reasoning: true
        thinking: [low, high]
  - name: local
    type: openai
    base_url: http://127.0.0.1:8000/v1
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(nil)}); err != nil {
		t.Fatal(err)
	}
	_, oai, _ := reg.Lookup("oai")
	if oai.Catalog != "openai" || len(oai.Models) < 40 {
		t.Fatalf("oai route lists %d models of catalog %q", len(oai.Models), oai.Catalog)
	}
	gpt4o := oai.Model("gpt-4o")
	if gpt4o.MaxTokens != 1000 || gpt4o.ContextWindow != 128000 || gpt4o.Cost.Input != 1 || gpt4o.Cost.Output != 10 || len(gpt4o.Thinking) != 0 {
		t.Errorf("gpt-4o = %+v cost %+v", gpt4o, gpt4o.Cost)
	}
	ft := oai.Model("my-finetune")
	if !ft.Known || ft.Thinking[penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH] != "high" || ft.ContextWindow != 32000 {
		t.Errorf("added model = %+v", ft)
	}
	if _, local, _ := reg.Lookup("local"); local.Catalog != "" || len(local.Models) != 0 || local.Model("x").Known {
		t.Errorf("a route the catalog does not know lists %+v", local)
	}
}

func TestBuildIsAllOrNothingAndKeepsKeysOut(t *testing.T) {
	f, err := routing.Parse([]byte("providers:\n  - name: a\n    type: openai\n  - name: b\n    type: openai\n    api_key_env: BAD\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	err = routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(map[string]string{"BAD": "sk-has space\x01"})})
	if err == nil || strings.Contains(err.Error(), "sk-has") || !strings.Contains(err.Error(), "BAD") {
		t.Fatalf("err = %v", err)
	}
	if len(reg.Names()) != 0 {
		t.Errorf("routes registered after a failed build: %v", reg.Names())
	}

	ok, err := routing.Parse([]byte("providers:\n  - name: a\n    type: openai\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := routing.Build(ok, reg, routing.Deps{Lookup: config.MapLookup(nil)}); err != nil {
		t.Fatal(err)
	}
	if err := routing.Build(ok, reg, routing.Deps{Lookup: config.MapLookup(nil)}); !errors.Is(err, registry.ErrDuplicateRoute) {
		t.Errorf("second build = %v", err)
	}
	if _, rt, _ := reg.Lookup("a"); rt.HasCredential {
		t.Error("a route without a key claims a credential")
	}
	missing, _ := routing.Parse([]byte("providers:\n  - name: c\n    type: openai\n    api_key_file: /nonexistent/key\n"))
	if err := routing.Build(missing, reg, routing.Deps{Lookup: config.MapLookup(nil)}); err == nil {
		t.Error("a missing key file was accepted")
	}
}
