package llm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm"
)

func TestSetup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  - name: local\n    type: openai\n    base_url: http://127.0.0.1:1/v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := llm.Setup(llm.Config{ProvidersFile: path, Lookup: config.MapLookup(nil), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
	if err != nil || len(ps.GetProviders()) != 1 || ps.GetProviders()[0].GetName() != "local" || ps.GetProviders()[0].GetHasCredential() {
		t.Errorf("providers = %v, %v", ps, err)
	}

	fromEnv, err := llm.Setup(llm.Config{Lookup: config.MapLookup(map[string]string{"ANTHROPIC_API_KEY": "sk-a"})})
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := fromEnv.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{}); len(ps.GetProviders()) != 1 || ps.GetProviders()[0].GetType() != "anthropic" {
		t.Errorf("providers from the environment = %v", ps)
	}

	if _, err := llm.Setup(llm.Config{Lookup: config.MapLookup(nil)}); err == nil || !strings.Contains(err.Error(), "no providers configured") {
		t.Errorf("no providers: %v", err)
	}
	if _, err := llm.Setup(llm.Config{ProvidersFile: filepath.Join(t.TempDir(), "missing.yaml"), Lookup: config.MapLookup(nil)}); err == nil {
		t.Error("a missing providers file was accepted")
	}
}
