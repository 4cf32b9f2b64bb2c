package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelsCommand prints the catalog as a table and as JSON, with an
// override file laid over it, and refuses an unknown provider.
func TestModelsCommand(t *testing.T) {
	t.Parallel()
	r := penguinIn(t, []string{"DEEPSEEK_API_KEY=sk-x"}, "models", "--provider", "deepseek")
	if r.code != 0 || !strings.Contains(r.stdout, "deepseek-reasoner") || !strings.Contains(r.stdout, "DEEPSEEK_API_KEY (set: the preset route is on)") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	over := filepath.Join(t.TempDir(), "over.json")
	if err := os.WriteFile(over, []byte(`{"providers":[{"id":"deepseek","models":[{"id":"deepseek-chat","output":1234,"cost":{"input":9,"output":9}}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = penguinIn(t, nil, "models", "--provider", "deepseek", "--catalog", over, "--json")
	var cat struct {
		Providers []struct {
			ID     string `json:"id"`
			Models []struct {
				ID     string `json:"id"`
				Output int64  `json:"output"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil || len(cat.Providers) != 1 {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	found := false
	for _, m := range cat.Providers[0].Models {
		found = found || (m.ID == "deepseek-chat" && m.Output == 1234)
	}
	if !found {
		t.Errorf("the override did not reach deepseek-chat: %s", r.stdout)
	}
	if r := penguinIn(t, nil, "models", "--provider", "nope"); r.code != 1 || !strings.Contains(r.stderr, `no provider "nope"`) {
		t.Errorf("unknown provider: exit %d %q", r.code, r.stderr)
	}
}
