package providers_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/providers"
	"github.com/penguin-agent/penguin/services/llm/registry"
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
	f, err := providers.Parse([]byte(strings.Replace(file, "KEYFILE", keyFile, 1)))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	if err := providers.Build(f, reg, providers.Deps{Lookup: config.MapLookup(map[string]string{"DEEPSEEK_API_KEY": "sk-ds"})}); err != nil {
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
	if !ds.NoVision || ds.Thinking[penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM] != "high" || routes[1].Type != "openai" {
		t.Errorf("deepseek = %+v", ds)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"", "empty"},
		{"providers: []", "lists no providers"},
		{"providers:\n  - name: a\n    type: openai\n    apikey: x\n", "field apikey not found"},
		{"providers:\n  - name: a\n    type: gemini\n", `type "gemini"`},
		{"providers:\n  - name: a\n    type: openai\n  - name: a\n    type: openai\n", "used twice"},
		{"providers:\n  - name: a\n    type: openai\n    base_url: ftp://x\n", "want an http or https URL"},
		{"providers:\n  - name: a\n    type: openai\n    api_key_env: K\n    api_key_file: /k\n", "not both"},
		{"providers:\n  - name: a\n    type: openai\n    models: [{id: m, thinking: [huge]}]\n", `thinking level "huge"`},
		{"providers:\n  - name: a\n    type: anthropic\n    models: [{id: m, thinking: {low: lots}}]\n", "neither a budget"},
		{"providers:\n  - name: a\n    type: openai\n    models: [{id: m}, {id: m}]\n", "listed twice"},
		{"providers:\n  - name: a\n    type: anthropic\n    max_tokens_param: max_tokens\n", "type openai only"},
	} {
		_, err := providers.Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	f := providers.FromEnv(config.MapLookup(map[string]string{
		"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "ANTHROPIC_API_KEY": "sk-a",
	}))
	if len(f.Providers) != 2 || f.Providers[0].BaseURL != "http://127.0.0.1:8000/v1" || f.Providers[1].Type != "anthropic" {
		t.Fatalf("file = %+v", f)
	}
	reg := registry.New()
	if err := providers.Build(f, reg, providers.Deps{Lookup: config.MapLookup(map[string]string{"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"})}); err != nil {
		t.Fatal(err)
	}
	if got := reg.Names(); len(got) != 2 {
		t.Errorf("routes = %v", got)
	}
	if f := providers.FromEnv(config.MapLookup(nil)); len(f.Providers) != 0 {
		t.Errorf("no keys, routes %v", f.Providers)
	}
}

func TestBuildIsAllOrNothingAndKeepsKeysOut(t *testing.T) {
	f, err := providers.Parse([]byte("providers:\n  - name: a\n    type: openai\n  - name: b\n    type: openai\n    api_key_env: BAD\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	err = providers.Build(f, reg, providers.Deps{Lookup: config.MapLookup(map[string]string{"BAD": "sk-has space\x01"})})
	if err == nil || strings.Contains(err.Error(), "sk-has") || !strings.Contains(err.Error(), "BAD") {
		t.Fatalf("err = %v", err)
	}
	if len(reg.Names()) != 0 {
		t.Errorf("routes registered after a failed build: %v", reg.Names())
	}

	ok, err := providers.Parse([]byte("providers:\n  - name: a\n    type: openai\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Build(ok, reg, providers.Deps{Lookup: config.MapLookup(nil)}); err != nil {
		t.Fatal(err)
	}
	if err := providers.Build(ok, reg, providers.Deps{Lookup: config.MapLookup(nil)}); !errors.Is(err, registry.ErrDuplicateRoute) {
		t.Errorf("second build = %v", err)
	}
	if _, rt, _ := reg.Lookup("a"); rt.HasCredential {
		t.Error("a route without a key claims a credential")
	}
	missing, _ := providers.Parse([]byte("providers:\n  - name: c\n    type: openai\n    api_key_file: /nonexistent/key\n"))
	if err := providers.Build(missing, reg, providers.Deps{Lookup: config.MapLookup(nil)}); err == nil {
		t.Error("a missing key file was accepted")
	}
}
