package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
)

// TestProviderRoutesAcrossReplicas: two llm service processes share a
// route store on PostgreSQL. A project's route added through the engine
// (which reaches replica A only, and passes the call on after its access
// check) is listed by replica B within a couple of seconds and serves B's
// requests for that project with the right key (the scripted provider
// refuses any other), and no other project's; the key is nowhere in the
// database in the clear; and its removal reaches B as fast. Then a route
// added through the web app's form on the engine's HTTP gateway (penguin
// serve engine --http-listen, as the engine pods of a deployment run) is
// listed by B as well. Each of those changes is in the engine's audit
// log of the project, without the key.
func TestProviderRoutesAcrossReplicas(t *testing.T) {
	t.Parallel()
	const key = "sk-e2e-route-0123456789abcdef"
	dir := t.TempDir()
	script := filepath.Join(dir, "script.yaml")
	keyFile := filepath.Join(dir, "routes.key")
	for path, content := range map[string]string{
		script:  "turns:\n  - text: hello from the stored route\non_exhausted: repeat_last\n",
		keyFile: "e2e-route-key-secret-0123456789abcdef\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mock := start(t, "mockllm routes", []string{"ROUTE_KEY=" + key}, "mockllm", "--listen", "127.0.0.1:0", "--script", script, "--api-key-env", "ROUTE_KEY")
	mockURL := mock.WaitLog("mockllm listening", nil, "url", time.Minute)
	pg := pgtest.URL(t, "e2e_routes")
	replica := func(name string) string {
		p := start(t, "serve llm "+name, nil, "serve", "llm", "--listen", "127.0.0.1:0", "--routes-store", pg, "--routes-key-file", keyFile)
		return grpcAddr(p, "llm")
	}
	addrA, addrB := replica("a"), replica("b")
	b := dialLLM(t, addrB)
	env := start(t, "serve environment", nil, "serve", "environment", "--listen", "127.0.0.1:0", "--root", t.TempDir())
	engine := start(t, "serve engine", nil, "serve", "engine", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--llm", addrA, "--environment", grpcAddr(env, "environment"), "--home", t.TempDir())
	viaEngine := dialLLM(t, grpcAddr(engine, "engine"))

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	route := &penguinv1.ProviderRoute{Name: "team", Type: "openai", BaseUrl: mockURL + "/v1", Models: []string{"scripted"}}
	added, err := viaEngine.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "default", Route: route, ApiKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(added.String(), key) || added.GetProvider().GetKeyHint() == "" {
		t.Fatalf("added: %v", added)
	}
	start := time.Now()
	listedOn := func(c penguinv1.LLMServiceClient, project string, names ...string) bool {
		name := "team"
		if len(names) > 0 {
			name = names[0]
		}
		resp, err := c.ListProviders(ctx, &penguinv1.ListProvidersRequest{Project: project})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.GetProviders() {
			if p.GetName() == name {
				return true
			}
		}
		return false
	}
	for !listedOn(b, "default") {
		if time.Since(start) > 5*time.Second {
			t.Fatal("replica B did not list the route within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("replica B listed the route %v after replica A stored it", time.Since(start).Round(time.Millisecond))
	if listedOn(b, "other") || listedOn(b, "") {
		t.Fatal("replica B lists the project's route for another project or globally")
	}

	text, out := generateOn(ctx, t, b, "default")
	if out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || !strings.Contains(text, "hello from the stored route") {
		t.Fatalf("replica B's request: %q %v", text, out)
	}
	// Another project has no route of that name (here no route at all):
	// refused before any provider I/O, as for any unknown route.
	if text, out, err := drainGenerate(ctx, b, "other"); text != "" || (status.Code(err) != codes.InvalidArgument && out.GetCode() != penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL) {
		t.Fatalf("another project's request on the route: %q %v %v", text, out, err)
	}

	conn, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var spec string
	var sealed []byte
	if err := conn.QueryRow(ctx, "SELECT spec, sealed_key FROM llm_provider_routes WHERE project = 'default' AND name = 'team'").Scan(&spec, &sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(spec, key) || strings.Contains(string(sealed), "0123456789") {
		t.Fatalf("the key is in the database in the clear: %q %q", spec, sealed)
	}

	if _, err := viaEngine.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Project: "default", Name: "team"}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for listedOn(b, "default") {
		if time.Since(start) > 5*time.Second {
			t.Fatal("replica B still lists the removed route after 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	web := "http://" + engine.WaitLog("HTTP gateway listening", nil, "addr", time.Minute)
	form := `{"project":"default","name":"web","type":"openai","base_url":"` + mockURL + `/v1","api_key":"` + key + `","models":["scripted"]}`
	resp, err := http.Post(web+"/api/setup/provider", "application/json", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), key) {
		t.Fatalf("the web form on the engine's gateway: %s %s", resp.Status, body)
	}
	start = time.Now()
	for !listedOn(b, "default", "web") {
		if time.Since(start) > 5*time.Second {
			t.Fatal("replica B did not list the route added through the engine's web form within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The engine, which owns the audit log, recorded each change made
	// through it (the gRPC calls and the web form), with no key.
	engineConn, err := grpcclient.New(grpcAddr(engine, "engine"), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer engineConn.Close()
	log, err := penguinv1.NewProjectServiceClient(engineConn).ListAudit(ctx, &penguinv1.ListAuditRequest{ProjectId: "default"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range log.GetRecords() {
		if strings.Contains(r.String(), key) || strings.Contains(r.String(), "0123456789abcdef") {
			t.Fatalf("an audit record holds the key: %v", r)
		}
		if strings.HasPrefix(r.GetAction(), "provider_route.") {
			got = append(got, r.GetAction()+" "+r.GetTarget()+" "+r.GetDetail())
		}
	}
	want := []string{"provider_route.add web api key set", "provider_route.remove team ", "provider_route.add team api key set"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the engine's audit log of default, newest first, has %q; want %q", got, want)
	}
}

func dialLLM(t *testing.T, addr string) penguinv1.LLMServiceClient {
	t.Helper()
	conn, err := grpcclient.New(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return penguinv1.NewLLMServiceClient(conn)
}

func generateRequest(project string) *penguinv1.StreamGenerateRequest {
	return &penguinv1.StreamGenerateRequest{
		Model: &penguinv1.ModelRef{Provider: "team", ModelId: "scripted"}, Project: project,
		NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")},
	}
}

// drainGenerate runs one request on c for project and returns its text
// and outcome, or the error that refused it.
func drainGenerate(ctx context.Context, c penguinv1.LLMServiceClient, project string) (string, *penguinv1.LLMOutcome, error) {
	stream, err := c.StreamGenerate(ctx, generateRequest(project))
	if err != nil {
		return "", nil, err
	}
	var text strings.Builder
	var out *penguinv1.LLMOutcome
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return text.String(), out, nil
		}
		if err != nil {
			return text.String(), out, err
		}
		if o := resp.GetOutcome(); o != nil {
			out = o
		}
		text.WriteString(resp.GetMessage().GetText().GetText())
	}
}

func generateOn(ctx context.Context, t *testing.T, c penguinv1.LLMServiceClient, project string) (string, *penguinv1.LLMOutcome) {
	t.Helper()
	text, out, err := drainGenerate(ctx, c, project)
	if err != nil {
		t.Fatal(err)
	}
	return text, out
}

// TestProviderKeyRotationThroughEngine rotates the route key secret of
// a running `penguin serve` with `penguin providers rotate-key --engine`:
// a key sealed under the old secret opens under the new one alone
// afterwards, and the engine's global audit log records the rotation
// (who, no key).
func TestProviderKeyRotationThroughEngine(t *testing.T) {
	t.Parallel()
	const (
		key = "sk-rot-0123456789abcdefghij"
		s1  = "first-0123456789abcdef0123456789abcdef"
		s2  = "second-0123456789abcdef0123456789abcdef"
	)
	home := t.TempDir()
	setKey := func(secrets ...string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "routes.key"), []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	serve := func() (*netns.Proc, string) {
		t.Helper()
		p := start(t, "penguin serve", []string{"PENGUIN_HOME=" + home}, "serve", "--listen", "127.0.0.1:0", "--root", "/")
		return p, grpcAddr(p, "penguin")
	}
	penguin := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(testkit.Context(t, time.Minute), bin.penguin, args...)
		cmd.Env = e2etest.BaseEnv(t)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("penguin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const hint = "sk-r…ghij"

	setKey(s1)
	srv, addr := serve()
	penguin(key+"\n", "providers", "add", "team", "--base-url", "http://127.0.0.1:9/v1", "--engine", addr)
	srv.Stop(10 * time.Second)

	setKey(s2, s1)
	srv, addr = serve()
	if out := penguin("", "providers", "rotate-key", "--engine", addr); !strings.Contains(out, "re-sealed 1 stored API keys") {
		t.Fatalf("rotate-key --engine: %q", out)
	}
	conn, err := grpcclient.New(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := penguinv1.NewProjectServiceClient(conn).ListAudit(testkit.Context(t, time.Minute), &penguinv1.ListAuditRequest{})
	_ = conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range log.GetRecords() {
		if strings.Contains(r.String(), key) || strings.Contains(r.String(), s1) || strings.Contains(r.String(), s2) {
			t.Fatalf("an audit record holds a secret: %v", r)
		}
		found = found || (r.GetAction() == "provider_keys.reseal" && r.GetActor() == "admin")
	}
	if !found {
		t.Fatalf("the global audit log has no provider_keys.reseal by admin: %v", log.GetRecords())
	}
	srv.Stop(10 * time.Second)

	setKey(s2)
	_, addr = serve()
	if out := penguin("", "providers", "list", "--engine", addr); !strings.Contains(out, hint) {
		t.Fatalf("after the rotation, the new secret alone does not open the key:\n%s", out)
	}
}
