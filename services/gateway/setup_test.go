package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/gateway"
	"github.com/penguin-agent/penguin/services/llm"
)

// startLLM serves a real llm service over gRPC on a loopback port, with
// no key in its environment, the providers file providersFile, and a
// SQLite route store in dir when dir is not empty.
func startLLM(t testing.TB, providersFile, dir string) penguinv1.LLMServiceClient {
	t.Helper()
	cfg := llm.Config{ProvidersFile: providersFile, Lookup: config.MapLookup(nil)}
	if dir != "" {
		cfg.RouteStore, cfg.RouteSecret = filepath.Join(dir, "routes.db"), []byte("a-route-key-secret-of-at-least-32-bytes")
	}
	svc, err := llm.Setup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	penguinv1.RegisterLLMServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	watched := make(chan struct{})
	ctx, stop := context.WithCancel(context.Background())
	go func() { defer close(watched); svc.Watch(ctx, 50*time.Millisecond) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		<-watched
		_ = conn.Close()
		srv.Stop()
		_ = svc.Close()
	})
	return penguinv1.NewLLMServiceClient(conn)
}

type setupAnswer struct {
	Provider string `json:"provider"`
	Replaced bool   `json:"replaced"`
	Route    struct {
		Name    string `json:"name"`
		Origin  string `json:"origin"`
		KeyHint string `json:"key_hint"`
		Project string `json:"project"`
	} `json:"route"`
}

type modelsAnswer struct {
	Models []struct {
		Model struct {
			Provider string `json:"provider"`
			ModelID  string `json:"model_id"`
		} `json:"model"`
		Price *struct{ Input, Output float64 } `json:"price"`
	} `json:"models"`
	Notice string `json:"notice"`
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// TestFirstRunProviderForm: the form adds a route through the llm
// service, which keeps it in its route store (the key encrypted, shown
// masked) and uses it at once: its catalog models and prices are
// offered. The same name again replaces it. Malformed forms are refused
// with nothing stored, the providers file's routes cannot be replaced,
// and a service without a route store says how to get one. The form
// writes no file.
func TestFirstRunProviderForm(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	form := `{"name":"openai","type":"openai-responses","api_key":"` + key + `","models":["my-finetune"]}`
	web := start(t, strictEngine(), gateway.Options{LLM: startLLM(t, "", "")})
	if resp, body := do(t, "POST", web.URL+"/api/setup/provider", form); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "--routes-store") {
		t.Fatalf("without a route store: %d %s", resp.StatusCode, body)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "providers.yaml")
	existing := "providers:\n  - name: local\n    type: openai\n    base_url: http://127.0.0.1:9/v1\n"
	if err := os.WriteFile(file, []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	web = start(t, strictEngine(), gateway.Options{LLM: startLLM(t, file, dir)})
	if _, body := do(t, "GET", web.URL+"/api/models?provider=openai", ""); !strings.Contains(body, `unknown provider \"openai\"`) {
		t.Fatalf("models before the form: %s", body)
	}
	setup := decode[struct {
		Providers []struct{ ID, Type string }
	}](t, func() string { _, b := do(t, "GET", web.URL+"/api/setup", ""); return b }())
	offered := map[string]string{}
	for _, p := range setup.Providers {
		offered[p.ID] = p.Type
	}
	if offered["openai"] != "openai-responses" || offered["anthropic"] != "anthropic" || offered["google"] != "gemini" {
		t.Fatalf("setup status: %+v", setup)
	}

	for _, bad := range []string{
		`{"name":"../evil","type":"openai","api_key":"k"}`,
		`{"name":"x","type":"nonsense","api_key":"k"}`,
		`{"name":"x","type":"openai","api_key":"two words"}`,
		`{"name":"x","type":"openai"}`,
		`{"name":"x","type":"openai","api_key":"k","base_url":"file:///etc"}`,
		`{"name":"x","type":"openai","api_key":"k","models":["a","a"]}`,
		`{"name":"x","type":"openai","api_key":"k","models":["no spaces please"]}`,
		`{"name":"x","type":"openai","api_key":"k","extra":1}`,
	} {
		if resp, body := do(t, "POST", web.URL+"/api/setup/provider", bad); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"invalid_argument"`) {
			t.Fatalf("form %s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, "POST", web.URL+"/api/setup/provider", `{"name":"local","type":"openai","base_url":"http://127.0.0.1:9/v2"}`); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "providers file") {
		t.Fatalf("replacing the file's route: %d %s", resp.StatusCode, body)
	}
	if _, body := do(t, "GET", web.URL+"/api/providers", ""); strings.Count(body, `"name"`) != 1 {
		t.Fatalf("refused forms stored routes: %s", body)
	}

	resp, body := do(t, "POST", web.URL+"/api/setup/provider", form)
	ans := decode[setupAnswer](t, body)
	if resp.StatusCode != http.StatusOK || ans.Replaced || ans.Route.Origin != "store" || ans.Route.KeyHint != "sk-t…cdef" || strings.Contains(body, key) {
		t.Fatalf("form: %d %s", resp.StatusCode, body)
	}
	// The llm service uses the route already: the catalog's models of
	// the provider, with prices, and the form's own.
	_, body = do(t, "GET", web.URL+"/api/models?provider=openai", "")
	models := decode[modelsAnswer](t, body)
	priced, own := false, false
	for _, m := range models.Models {
		priced = priced || m.Model.ModelID == "gpt-4o" && m.Price != nil && m.Price.Input > 0
		own = own || m.Model.ModelID == "my-finetune"
	}
	if !priced || !own || models.Notice != "" {
		t.Fatalf("models after the form: priced gpt-4o %v, my-finetune %v, notice %q", priced, own, models.Notice)
	}
	// The same name replaces the route; the providers file is untouched,
	// and no key file is written.
	resp, body = do(t, "POST", web.URL+"/api/setup/provider", `{"name":"openai","type":"openai","api_key":"sk-other-0123456789abcdef"}`)
	if ans := decode[setupAnswer](t, body); resp.StatusCode != http.StatusOK || !ans.Replaced || ans.Route.KeyHint != "sk-o…cdef" {
		t.Fatalf("replace: %d %s", resp.StatusCode, body)
	}
	if got, _ := os.ReadFile(file); string(got) != existing {
		t.Fatalf("the form changed the providers file:\n%s", got)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".key") {
			t.Fatalf("the form wrote a key file: %s", e.Name())
		}
	}
	// The route routes: list, remove.
	if _, body := do(t, "GET", web.URL+"/api/providers", ""); !strings.Contains(body, `"key_hint":"sk-o…cdef"`) || strings.Contains(body, "sk-other-0123") {
		t.Fatalf("listing: %s", body)
	}
	if resp, body := do(t, "DELETE", web.URL+"/api/providers/openai", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("remove: %d %s", resp.StatusCode, body)
	}
	if _, body := do(t, "GET", web.URL+"/api/models?provider=openai", ""); !strings.Contains(body, `unknown provider \"openai\"`) {
		t.Fatalf("models after the removal: %s", body)
	}
}

// TestProviderFormWithoutLLM: a gateway that reaches no llm service says
// so.
func TestProviderFormWithoutLLM(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	resp, body := do(t, "POST", web.URL+"/api/setup/provider", `{"name":"anthropic","type":"anthropic","api_key":"sk-ant"}`)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(body, "no llm service") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
