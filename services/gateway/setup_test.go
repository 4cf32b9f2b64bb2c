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
	"github.com/penguin-agent/penguin/services/llm/providers"
)

// startLLM serves a real llm service over gRPC on a loopback port, with
// no key in its environment, watching providersFile every 50ms.
func startLLM(t *testing.T, providersFile string) penguinv1.LLMServiceClient {
	t.Helper()
	svc, err := llm.Setup(llm.Config{ProvidersFile: providersFile, Lookup: config.MapLookup(nil)})
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
	})
	return penguinv1.NewLLMServiceClient(conn)
}

type setupAnswer struct {
	Provider string `json:"provider"`
	KeyFile  string `json:"key_file"`
	Active   bool   `json:"active"`
	Notice   string `json:"notice"`
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

// TestFirstRunProviderForm: a server with no provider says so; the form
// writes a route into the providers file (the key in a 0600 file of its
// own, the file's other routes and comments kept), and answers once the
// real llm service, reloading the file by itself, lists the route, whose
// catalog models and prices are then offered.
func TestFirstRunProviderForm(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	form := `{"name":"openai","type":"openai-responses","api_key":"sk-test-123","models":["my-finetune"]}`
	if resp, body := do(t, "POST", web.URL+"/api/setup/provider", form); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "--providers") {
		t.Fatalf("without a providers file: %d %s", resp.StatusCode, body)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "providers.yaml")
	existing := "# my routes\nproviders:\n  - name: local\n    type: openai\n    base_url: http://127.0.0.1:9/v1\n    api_key_env: LOCAL_KEY # kept\n"
	if err := os.WriteFile(file, []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	web = start(t, strictEngine(), gateway.Options{ProvidersFile: file, LLM: startLLM(t, file)})
	if _, body := do(t, "GET", web.URL+"/api/models?provider=openai", ""); !strings.Contains(body, `unknown provider \"openai\"`) {
		t.Fatalf("models before the form: %s", body)
	}
	setup := decode[struct {
		ProvidersFile string `json:"providers_file"`
		Providers     []struct{ ID, Type string }
	}](t, func() string { _, b := do(t, "GET", web.URL+"/api/setup", ""); return b }())
	offered := map[string]string{}
	for _, p := range setup.Providers {
		offered[p.ID] = p.Type
	}
	if setup.ProvidersFile != file || offered["openai"] != "openai-responses" || offered["anthropic"] != "anthropic" || offered["google"] != "gemini" {
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
	if got, _ := os.ReadFile(file); string(got) != existing {
		t.Fatalf("a refused form changed the file:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.key")); !os.IsNotExist(err) {
		t.Fatalf("a refused form wrote a key file: %v", err)
	}

	resp, body := do(t, "POST", web.URL+"/api/setup/provider", form)
	ans := decode[setupAnswer](t, body)
	if resp.StatusCode != http.StatusOK || !ans.Active || ans.KeyFile != filepath.Join(dir, "openai.key") {
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
	f, err := providers.Load(file)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if len(f.Providers) != 2 || f.Providers[0].Name != "local" || f.Providers[1].Name != "openai" || f.Providers[1].APIKeyFile != ans.KeyFile {
		t.Fatalf("routes %+v", f.Providers)
	}
	fi, err := os.Stat(ans.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v)", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(file)
	if strings.Contains(string(raw), "sk-test-123") || !strings.Contains(string(raw), "# my routes") || !strings.Contains(string(raw), "# kept") {
		t.Fatalf("providers file:\n%s", raw)
	}

	// A server of one's own needs no key; the same name replaces the route.
	resp, body = do(t, "POST", web.URL+"/api/setup/provider", `{"name":"local","type":"openai","base_url":"http://127.0.0.1:9/v2","models":["qwen3"]}`)
	if ans := decode[setupAnswer](t, body); resp.StatusCode != http.StatusOK || !ans.Active || ans.KeyFile != "" {
		t.Fatalf("replace: %d %s", resp.StatusCode, body)
	}
	f, err = providers.Load(file)
	if err != nil || len(f.Providers) != 2 || f.Providers[0].BaseURL != "http://127.0.0.1:9/v2" || f.Providers[0].APIKeyEnv != "" || f.Providers[0].Models[0].ID != "qwen3" {
		t.Fatalf("after replacing: %+v %v", f, err)
	}
}

// TestProviderFormWithoutLLM: a gateway with no llm client writes the
// file but cannot say whether the route is in use, and says so.
func TestProviderFormWithoutLLM(t *testing.T) {
	file := filepath.Join(t.TempDir(), "providers.yaml")
	web := start(t, strictEngine(), gateway.Options{ProvidersFile: file})
	resp, body := do(t, "POST", web.URL+"/api/setup/provider", `{"name":"anthropic","type":"anthropic","api_key":"sk-ant"}`)
	if ans := decode[setupAnswer](t, body); resp.StatusCode != http.StatusOK || ans.Active || !strings.Contains(ans.Notice, "no llm service") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if f, err := providers.Load(file); err != nil || f.Providers[0].Type != "anthropic" {
		t.Fatalf("%+v %v", f, err)
	}
}
