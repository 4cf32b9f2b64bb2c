package agentapi_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine/agentapi"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/gateway"
)

// server is an AgentService on a real port, over a SQLite store, with a
// real llm service (the emulator behind it) and environment service.
type server struct {
	client   penguinv1.AgentServiceClient
	store    store.AgentStore
	http     *httptest.Server
	backends *enginetest.Backends
	library  string
}

func newServer(t *testing.T, turns ...emulator.Turn) *server {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := enginetest.NewBackends(t, turns...)
	dial := func(addr string) *grpc.ClientConn {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	lib := t.TempDir()
	srv := agentapi.New(agentapi.Options{
		Store: st.(store.AgentStore), LLM: penguinv1.NewLLMServiceClient(dial(b.LLM)),
		Environment: penguinv1.NewEnvironmentServiceClient(dial(b.Environment)), SkillLibrary: lib,
		ModelSettings: st,
	})
	addr := enginetest.Serve(t, "engine", func(g *grpc.Server) { penguinv1.RegisterAgentServiceServer(g, srv) })
	client := penguinv1.NewAgentServiceClient(dial(addr))
	gw := gateway.New(nil, gateway.Options{Agents: client})
	h := httptest.NewServer(gw)
	t.Cleanup(h.Close)
	return &server{client: client, store: st.(store.AgentStore), http: h, backends: b, library: lib}
}

func wantCode(t *testing.T, err error, code codes.Code, contains ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	for _, c := range contains {
		if !strings.Contains(status.Convert(err).Message(), c) {
			t.Fatalf("error %q does not say %q", status.Convert(err).Message(), c)
		}
	}
}

// do calls an HTTP route and returns the status and body.
func (s *server) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.http.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// tarGz builds an archive; a value starting with "->" is a symbolic link.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
		if target, ok := strings.CutPrefix(body, "->"); ok {
			hdr = &tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// files returns an agent's files from the store.
func (s *server) files(t *testing.T, agent string) map[string]string {
	t.Helper()
	_, list, err := s.store.ReadAgent(t.Context(), "default", agent)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range list {
		out[f.Path] = string(f.Data)
	}
	return out
}

const skillMD = "---\nname: pdf\ndescription: Read PDF files.\n---\n# PDF\n"

func TestAgentsAndArchives(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "main"}); err != nil {
		t.Fatal(err)
	}
	if f := s.files(t, "main"); !strings.Contains(f["system_config.yaml"], "system_prompt") || f[".vault.yaml"] == "" {
		t.Fatalf("the template's files: %v", f)
	}
	_, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "main"})
	wantCode(t, err, codes.AlreadyExists)
	_, err = c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "../x"})
	wantCode(t, err, codes.InvalidArgument, "name")
	if _, err := c.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Agent: "main", Scope: "user", Name: "a.md", Content: "fact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "copy", FromAgent: "main"}); err != nil {
		t.Fatal(err)
	}
	if f := s.files(t, "copy"); f["memory/user/a.md"] != "" || f["system_config.yaml"] != s.files(t, "main")["system_config.yaml"] {
		t.Fatalf("a copy takes the configuration, not the memory: %v", f)
	}
	if _, err := c.RenameAgent(ctx, &penguinv1.RenameAgentRequest{Agent: "copy", NewName: "second"}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListAgents(ctx, &penguinv1.ListAgentsRequest{})
	if err != nil || len(list.GetAgents()) != 2 || list.GetAgents()[1].GetName() != "second" {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := c.DeleteAgent(ctx, &penguinv1.DeleteAgentRequest{Agent: "second"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteAgent(ctx, &penguinv1.DeleteAgentRequest{Agent: "second"})
	wantCode(t, err, codes.NotFound)
	_, err = c.ListAgents(ctx, &penguinv1.ListAgentsRequest{Project: "other"})
	wantCode(t, err, codes.NotFound)

	// Export, import into a fresh server: the same bytes, and the same
	// archive again.
	exp, err := c.ExportAgent(ctx, &penguinv1.ExportAgentRequest{Agent: "main"})
	if err != nil {
		t.Fatal(err)
	}
	fresh := newServer(t)
	if _, err := fresh.client.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "main", Archive: exp.GetArchive()}); err != nil {
		t.Fatal(err)
	}
	if a, b := s.files(t, "main"), fresh.files(t, "main"); !equalMaps(a, b) {
		t.Fatalf("imported files differ:\n%v\n%v", a, b)
	}
	again, err := fresh.client.ExportAgent(ctx, &penguinv1.ExportAgentRequest{Agent: "main"})
	if err != nil || !bytes.Equal(again.GetArchive(), exp.GetArchive()) {
		t.Fatalf("the re-exported archive differs (%v)", err)
	}
	// PenguinHarness's layout: the files under agent_state/.
	ref := tarGz(t, map[string]string{"agent_state/system_config.yaml": "max_turns: 7\n", "agent_state/AGENTS.md": "be brief\n", "agent_state/.vault.toml": "TOKEN = \"v\"\n"})
	if _, err := c.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "ref", Archive: ref}); err != nil {
		t.Fatal(err)
	}
	if f := s.files(t, "ref"); f["system_config.yaml"] != "max_turns: 7\n" || f["AGENTS.md"] != "be brief\n" {
		t.Fatalf("reference layout imported as %v", f)
	}
	names, err := c.ListVault(ctx, &penguinv1.ListVaultRequest{Agent: "ref"})
	if err != nil || len(names.GetNames()) != 1 || names.GetNames()[0] != "TOKEN" {
		t.Fatalf("PenguinHarness's vault: %v %v", names, err)
	}
	// Replacing needs replace, and a stale version is refused.
	_, err = c.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "ref", Archive: exp.GetArchive()})
	wantCode(t, err, codes.AlreadyExists, "replace")
	_, err = c.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "ref", Archive: exp.GetArchive(), Replace: true, Version: 99})
	wantCode(t, err, codes.Aborted)
	if _, err := c.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "ref", Archive: exp.GetArchive(), Replace: true}); err != nil {
		t.Fatal(err)
	}
	if !equalMaps(s.files(t, "ref"), s.files(t, "main")) {
		t.Fatal("a replacing import left files of the old agent")
	}
	// Bad archives: nothing is written.
	before := s.files(t, "ref")
	for name, archive := range map[string][]byte{
		"../":      tarGz(t, map[string]string{"system_config.yaml": "", "../evil": "x"}),
		"link":     tarGz(t, map[string]string{"system_config.yaml": "", "skills/x": "->/etc"}),
		"yaml":     tarGz(t, map[string]string{"system_config.yaml": "max_turns: [\n"}),
		"not gzip": []byte("plain text"),
		"too big":  bytes.Repeat([]byte{0}, 3<<20+1),
	} {
		_, err := c.ImportAgent(ctx, &penguinv1.ImportAgentRequest{Agent: "ref", Archive: archive, Replace: true})
		wantCode(t, err, codes.InvalidArgument, "archive")
		if !equalMaps(before, s.files(t, "ref")) {
			t.Fatalf("a refused import (%s) changed the agent", name)
		}
	}

	// Through HTTP: the export is a tar.gz download that imports back.
	resp, err := http.Get(s.http.URL + "/api/projects/default/agents/main/export")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" || !bytes.Equal(body, exp.GetArchive()) {
		t.Fatalf("HTTP export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	code, out := s.do(t, "POST", "/api/projects/default/agents/viahttp/import", map[string]any{"archive": body})
	if code != 200 {
		t.Fatalf("HTTP import: %d %s", code, out)
	}
	code, out = s.do(t, "POST", "/api/projects/default/agents", map[string]any{"name": "h2"})
	if code != 201 {
		t.Fatalf("HTTP create: %d %s", code, out)
	}
	code, out = s.do(t, "PATCH", "/api/projects/default/agents/h2", map[string]any{"new_name": "h3"})
	if code != 200 || !strings.Contains(string(out), `"h3"`) {
		t.Fatalf("HTTP rename: %d %s", code, out)
	}
	code, out = s.do(t, "GET", "/api/projects/default/agents", nil)
	if code != 200 || !strings.Contains(string(out), `"viahttp"`) || !strings.Contains(string(out), `"h3"`) {
		t.Fatalf("HTTP list: %d %s", code, out)
	}
	code, _ = s.do(t, "DELETE", "/api/projects/default/agents/h3", nil)
	if code != 200 {
		t.Fatalf("HTTP delete: %d", code)
	}
	code, out = s.do(t, "POST", "/api/projects/default/agents/bad/import", map[string]any{"archive": tarGz(t, map[string]string{"a/../../x": "y"})})
	if code != 400 || !strings.Contains(string(out), "archive") {
		t.Fatalf("HTTP bad import: %d %s", code, out)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestConfig(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetAgentConfig(ctx, &penguinv1.GetAgentConfigRequest{Agent: "a", File: "system_config.yaml"})
	if err != nil || got.GetVersion() == 0 {
		t.Fatalf("get: %v %v", got, err)
	}
	text := "# my agent\nmax_turns: 12 # a comment\nmodel:\n  provider: emu\n  model_id: m\n"
	up, err := c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "system_config.yaml", Content: text, Version: got.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	// The writer that read before it gets ABORTED with the current version.
	_, err = c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "system_config.yaml", Content: "max_turns: 1\n", Version: got.GetVersion()})
	wantCode(t, err, codes.Aborted, "current version")
	// Broken YAML and an unknown key: the line is named, nothing written.
	_, err = c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "system_config.yaml", Content: "max_turns: 3\nmodel: [\n", Version: up.GetVersion()})
	wantCode(t, err, codes.InvalidArgument, "content", "system_config.yaml:2")
	_, err = c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "system_config.yaml", Content: "max_turns: 3\nmax_turnz: 4\n", Version: up.GetVersion()})
	wantCode(t, err, codes.InvalidArgument, "max_turnz", "system_config.yaml:2")
	_, err = c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "other.txt", Content: "x"})
	wantCode(t, err, codes.InvalidArgument, "file")
	if s.files(t, "a")["system_config.yaml"] != text {
		t.Fatal("a refused write changed the file")
	}
	// AGENTS.md, new: version 0.
	if _, err := c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "AGENTS.md", Content: "Be brief."}); err != nil {
		t.Fatal(err)
	}
	// The model: set keeps the comments; get reads it.
	if _, err := c.SetAgentModel(ctx, &penguinv1.SetAgentModelRequest{Agent: "a", Model: enginetest.Model}); err != nil {
		t.Fatal(err)
	}
	cfg := s.files(t, "a")["system_config.yaml"]
	if !strings.Contains(cfg, "# my agent") || !strings.Contains(cfg, "# a comment") || strings.Index(cfg, "max_turns") > strings.Index(cfg, "model") {
		t.Fatalf("the comments or key order were lost:\n%s", cfg)
	}
	m, err := c.GetAgentModel(ctx, &penguinv1.GetAgentModelRequest{Agent: "a"})
	if err != nil || m.GetModel().GetModelId() != "m" {
		t.Fatalf("model: %v %v", m, err)
	}
	_, err = c.SetAgentModel(ctx, &penguinv1.SetAgentModelRequest{Agent: "a", Model: &penguinv1.ModelRef{Provider: "emu"}})
	wantCode(t, err, codes.InvalidArgument, "model")
	// A provider the project has no route for is refused, naming the
	// routes it has; the file is not touched.
	_, err = c.SetAgentModel(ctx, &penguinv1.SetAgentModelRequest{Agent: "a", Model: &penguinv1.ModelRef{Provider: "nowhere", ModelId: "x"}})
	wantCode(t, err, codes.InvalidArgument, "model.provider", `"nowhere" is not a provider route`, "emu")
	if s.files(t, "a")["system_config.yaml"] != cfg {
		t.Fatal("a refused model changed the configuration")
	}

	// Through HTTP: read, write with a stale version (409), bad YAML (400).
	code, out := s.do(t, "GET", "/api/projects/default/agents/a/config/system_config.yaml", nil)
	var read struct {
		Content string `json:"content"`
		Version string `json:"version"`
	}
	if code != 200 || json.Unmarshal(out, &read) != nil || read.Content != cfg {
		t.Fatalf("HTTP get config: %d %s", code, out)
	}
	code, out = s.do(t, "PUT", "/api/projects/default/agents/a/config/system_config.yaml", map[string]any{"content": "max_turns: 2\n", "version": "1"})
	if code != 409 || !strings.Contains(string(out), "aborted") {
		t.Fatalf("HTTP stale write: %d %s", code, out)
	}
	code, out = s.do(t, "PUT", "/api/projects/default/agents/a/config/system_config.yaml", map[string]any{"content": "max_turns: [\n", "version": read.Version})
	if code != 400 || !strings.Contains(string(out), "system_config.yaml:1") {
		t.Fatalf("HTTP broken YAML: %d %s", code, out)
	}
	code, out = s.do(t, "PUT", "/api/projects/default/agents/a/config/system_config.yaml", map[string]any{"content": "max_turns: 2\n", "version": read.Version})
	if code != 200 {
		t.Fatalf("HTTP write: %d %s", code, out)
	}
	code, out = s.do(t, "PUT", "/api/projects/default/agents/a/model", map[string]any{"model": map[string]string{"provider": "emu", "model_id": "m"}})
	if code != 200 {
		t.Fatalf("HTTP set model: %d %s", code, out)
	}
	code, out = s.do(t, "GET", "/api/projects/default/agents/a/model", nil)
	if code != 200 || !strings.Contains(string(out), `"model_id":"m"`) {
		t.Fatalf("HTTP get model: %d %s", code, out)
	}
}

func TestModelTest(t *testing.T) {
	s := newServer(t, emulator.Turn{Text: "ok"})
	res, err := s.client.TestModel(t.Context(), &penguinv1.TestModelRequest{Model: enginetest.Model})
	if err != nil || !res.GetOk() {
		t.Fatalf("test of a served model: %v %v", res, err)
	}
	res, err = s.client.TestModel(t.Context(), &penguinv1.TestModelRequest{Model: &penguinv1.ModelRef{Provider: "emu", ModelId: "nope"}})
	if err != nil || res.GetOk() || res.GetMessage() == "" {
		t.Fatalf("test of an unknown model: %v %v", res, err)
	}
	code, out := s.do(t, "POST", "/api/projects/default/models/test", map[string]any{"model": map[string]string{"provider": "emu", "model_id": "nope"}})
	if code != 200 || !strings.Contains(string(out), `"message"`) {
		t.Fatalf("HTTP model test: %d %s", code, out)
	}
	// The test runs with the routes of the project the route names: one
	// that does not exist is refused, not tried with the default's.
	code, out = s.do(t, "POST", "/api/projects/other/models/test", map[string]any{"model": map[string]string{"provider": "emu", "model_id": "m"}})
	if code != 404 || !strings.Contains(string(out), "other") {
		t.Fatalf("HTTP model test in a project that does not exist: %d %s", code, out)
	}
}

// TestModelSettings: a project's settings of a local model, set and
// listed through gRPC and HTTP, replaced and removed; every bad input
// refused naming its field, with nothing written.
func TestModelSettings(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	local := &penguinv1.ModelRef{Provider: "emu", ModelId: "local-7b"}
	set, err := c.SetModelSettings(ctx, &penguinv1.SetModelSettingsRequest{Settings: &penguinv1.ModelSettings{
		Model: local, ContextWindow: 32768, Price: &penguinv1.ModelPrice{Input: 0.1, Output: 0.2},
	}})
	if err != nil || set.GetSettings().GetContextWindow() != 32768 || set.GetSettings().GetPrice().GetOutput() != 0.2 {
		t.Fatalf("SetModelSettings: %v, %v", set, err)
	}
	list := func() string {
		t.Helper()
		got, err := c.ListModelSettings(ctx, &penguinv1.ListModelSettingsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return protojson.Format(got)
	}
	want := list()
	if !strings.Contains(want, `"local-7b"`) || !strings.Contains(want, `"32768"`) {
		t.Fatalf("ListModelSettings: %s", want)
	}
	code, out := s.do(t, "GET", "/api/projects/default/models/settings", nil)
	if code != 200 || !strings.Contains(string(out), `"local-7b"`) || !strings.Contains(string(out), `"contextWindow":"32768"`) && !strings.Contains(string(out), `"context_window":"32768"`) {
		t.Fatalf("GET models/settings: %d %s", code, out)
	}
	for _, bad := range []struct {
		set   *penguinv1.ModelSettings
		field string
	}{
		{&penguinv1.ModelSettings{Model: local, ContextWindow: 100}, "settings.context_window"},
		{&penguinv1.ModelSettings{Model: local, ContextWindow: -1}, "settings.context_window"},
		{&penguinv1.ModelSettings{Model: local, Price: &penguinv1.ModelPrice{Input: -1}}, "settings.price.input"},
		{&penguinv1.ModelSettings{Model: local, Price: &penguinv1.ModelPrice{Output: math.Inf(1)}}, "settings.price.output"},
		{&penguinv1.ModelSettings{Model: local, Price: &penguinv1.ModelPrice{CacheRead: proto.Float64(math.NaN())}}, "settings.price.cache_read"},
		{&penguinv1.ModelSettings{Model: &penguinv1.ModelRef{Provider: "nowhere", ModelId: "x"}, ContextWindow: 8192}, "settings.model.provider"},
		{&penguinv1.ModelSettings{Model: &penguinv1.ModelRef{Provider: "emu"}, ContextWindow: 8192}, "settings.model"},
		{nil, "settings.model"},
	} {
		_, err := c.SetModelSettings(ctx, &penguinv1.SetModelSettingsRequest{Settings: bad.set})
		wantCode(t, err, codes.InvalidArgument, bad.field)
	}
	code, out = s.do(t, "PUT", "/api/projects/default/models/settings", map[string]any{
		"settings": map[string]any{"model": map[string]string{"provider": "emu", "model_id": "local-7b"}, "context_window": 10},
	})
	if code != 400 || !strings.Contains(string(out), "settings.context_window") {
		t.Fatalf("PUT a window too small: %d %s", code, out)
	}
	if got := list(); got != want {
		t.Fatalf("a refused change was written:\n%s\nwant\n%s", got, want)
	}
	// Replaced through HTTP (no window now, a cache price), then removed.
	code, out = s.do(t, "PUT", "/api/projects/default/models/settings", map[string]any{
		"settings": map[string]any{"model": map[string]string{"provider": "emu", "model_id": "local-7b"}, "price": map[string]any{"input": 1, "output": 2, "cache_read": 0.5}},
	})
	if code != 200 {
		t.Fatalf("PUT models/settings: %d %s", code, out)
	}
	if got := list(); strings.Contains(got, "32768") || !strings.Contains(got, "0.5") {
		t.Fatalf("after the replacement: %s", got)
	}
	if _, err := c.SetModelSettings(ctx, &penguinv1.SetModelSettingsRequest{Settings: &penguinv1.ModelSettings{Model: local}}); err != nil {
		t.Fatal(err)
	}
	if got := list(); strings.Contains(got, "local-7b") {
		t.Fatalf("after the removal: %s", got)
	}
	code, out = s.do(t, "GET", "/api/projects/other/models/settings", nil)
	if code != 404 {
		t.Fatalf("the settings of a project that does not exist: %d %s", code, out)
	}
}

func TestSkills(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	archive := tarGz(t, map[string]string{"pdf/SKILL.md": skillMD, "pdf/scripts/read.sh": "echo\n"})
	res, err := c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_Archive{Archive: archive}})
	if err != nil || res.GetSkill().GetName() != "pdf" || res.GetSkill().GetFiles() != 2 {
		t.Fatalf("install: %v %v", res, err)
	}
	if f := s.files(t, "a"); f["skills/pdf/scripts/read.sh"] != "echo\n" {
		t.Fatalf("installed files: %v", f)
	}
	_, err = c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_Archive{Archive: archive}})
	wantCode(t, err, codes.AlreadyExists)
	before := s.files(t, "a")
	for name, bad := range map[string][]byte{
		"no front matter": tarGz(t, map[string]string{"SKILL.md": "# PDF\n"}),
		"no description":  tarGz(t, map[string]string{"SKILL.md": "---\nname: x\n---\n"}),
		"../":             tarGz(t, map[string]string{"SKILL.md": skillMD, "../../escape": "x"}),
		"symlink":         tarGz(t, map[string]string{"SKILL.md": skillMD, "link": "->/etc/passwd"}),
		"oversized":       bytes.Repeat([]byte{1}, 2<<20+1),
		"no SKILL.md":     tarGz(t, map[string]string{"README.md": "x"}),
	} {
		_, err := c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_Archive{Archive: bad}, Replace: true})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v, want InvalidArgument", name, err)
		}
		if !equalMaps(before, s.files(t, "a")) {
			t.Fatalf("%s: a refused install wrote files", name)
		}
	}
	// From the skill library on the server, and not from outside it.
	dir := filepath.Join(s.library, "lint")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: lint\ndescription: Lint code.\n---\n"), 0o644)
	if _, err := c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_ServerDir{ServerDir: "lint"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_ServerDir{ServerDir: "/etc"}})
	wantCode(t, err, codes.InvalidArgument, "server_dir")
	os.Symlink("/etc/passwd", filepath.Join(dir, "passwd"))
	_, err = c.InstallSkill(ctx, &penguinv1.InstallSkillRequest{Agent: "a", Source: &penguinv1.InstallSkillRequest_ServerDir{ServerDir: "lint"}, Replace: true})
	wantCode(t, err, codes.InvalidArgument, "symbolic link")

	if _, err := c.SetSkillEnabled(ctx, &penguinv1.SetSkillEnabledRequest{Agent: "a", Name: "pdf", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSkills(ctx, &penguinv1.ListSkillsRequest{Agent: "a"})
	if err != nil || len(list.GetSkills()) != 2 || list.GetSkills()[0].GetName() != "lint" || list.GetSkills()[1].GetEnabled() {
		t.Fatalf("list after disabling: %v %v", list, err)
	}
	if f := s.files(t, "a"); f["skills/.disabled/pdf/SKILL.md"] != skillMD || f["skills/pdf/SKILL.md"] != "" {
		t.Fatalf("disabled skill's files: %v", f)
	}
	// Through HTTP: enable, list, uninstall.
	if code, out := s.do(t, "PUT", "/api/projects/default/agents/a/skills/pdf/enabled", map[string]any{"enabled": true}); code != 200 {
		t.Fatalf("HTTP enable: %d %s", code, out)
	}
	code, out := s.do(t, "GET", "/api/projects/default/agents/a/skills", nil)
	if code != 200 || !strings.Contains(string(out), `"description":"Read PDF files."`) {
		t.Fatalf("HTTP list: %d %s", code, out)
	}
	if code, out := s.do(t, "DELETE", "/api/projects/default/agents/a/skills/pdf", nil); code != 200 {
		t.Fatalf("HTTP uninstall: %d %s", code, out)
	}
	if code, _ := s.do(t, "DELETE", "/api/projects/default/agents/a/skills/pdf", nil); code != 404 {
		t.Fatalf("HTTP second uninstall: %d", code)
	}
	code, out = s.do(t, "POST", "/api/projects/default/agents/a/skills", map[string]any{"archive": archive})
	if code != 201 {
		t.Fatalf("HTTP install: %d %s", code, out)
	}
	code, out = s.do(t, "POST", "/api/projects/default/agents/a/skills", map[string]any{"archive": tarGz(t, map[string]string{"SKILL.md": skillMD, "x": "->/"}), "replace": true})
	if code != 400 || !strings.Contains(string(out), "link") {
		t.Fatalf("HTTP symlink install: %d %s", code, out)
	}
}

func TestMemory(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	put := func(scope, name, content string) {
		t.Helper()
		if _, err := c.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Agent: "a", Scope: scope, Name: name, Content: content}); err != nil {
			t.Fatal(err)
		}
	}
	put("user", "MEMORY.md", "- [Style](style.md): how to write\n- [Tools](tools.md): which tools\n")
	put("user", "style.md", "---\nname: style\ndescription: how to write\ntype: feedback\n---\nShort sentences.\n")
	put("user", "tools.md", "Use rg.\n")
	put("proj-0123abcd", "notes.md", "x")
	scopes, err := c.ListMemoryScopes(ctx, &penguinv1.ListMemoryScopesRequest{Agent: "a"})
	if err != nil || len(scopes.GetScopes()) != 2 || scopes.GetScopes()[0].GetKey() != "user" || scopes.GetScopes()[0].GetFiles() != 3 {
		t.Fatalf("scopes: %v %v", scopes, err)
	}
	files, err := c.ListMemoryFiles(ctx, &penguinv1.ListMemoryFilesRequest{Agent: "a", Scope: "user"})
	if err != nil || len(files.GetFiles()) != 3 || files.GetFiles()[1].GetFrontMatter()["type"] != "feedback" {
		t.Fatalf("files: %v %v", files, err)
	}
	got, err := c.GetMemoryFile(ctx, &penguinv1.GetMemoryFileRequest{Agent: "a", Scope: "user", Name: "tools.md"})
	if err != nil || got.GetContent() != "Use rg.\n" {
		t.Fatalf("get: %v %v", got, err)
	}
	_, err = c.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Agent: "a", Scope: "user", Name: "tools.md", Content: "y", Version: got.GetVersion() - 1})
	wantCode(t, err, codes.Aborted)
	_, err = c.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Agent: "a", Scope: "user", Name: "../x.md", Content: "y"})
	wantCode(t, err, codes.InvalidArgument, "name")
	_, err = c.UpdateMemoryFile(ctx, &penguinv1.UpdateMemoryFileRequest{Agent: "a", Scope: "../..", Name: "x.md", Content: "y"})
	wantCode(t, err, codes.InvalidArgument, "scope")
	del, err := c.DeleteMemoryFile(ctx, &penguinv1.DeleteMemoryFileRequest{Agent: "a", Scope: "user", Name: "style.md"})
	if err != nil || del.GetPruned() != 1 {
		t.Fatalf("delete: %v %v", del, err)
	}
	if f := s.files(t, "a"); f["memory/user/MEMORY.md"] != "- [Tools](tools.md): which tools\n" || f["memory/user/style.md"] != "" {
		t.Fatalf("after delete: %q", f["memory/user/MEMORY.md"])
	}
	exp, err := c.ExportMemory(ctx, &penguinv1.ExportMemoryRequest{Agent: "a", Scope: "user"})
	if err != nil || !strings.Contains(exp.GetDocument(), "Use rg.") {
		t.Fatalf("export: %v %v", exp, err)
	}
	doc := `{"scope":"user","files":{"tools.md":"Use fd.","new.md":"new"}}`
	res, err := c.ImportMemory(ctx, &penguinv1.ImportMemoryRequest{Agent: "a", Scope: "user", Document: doc})
	if err != nil || res.GetWritten() != 1 || res.GetSkipped() != 1 {
		t.Fatalf("skip import: %v %v", res, err)
	}
	_, err = c.ImportMemory(ctx, &penguinv1.ImportMemoryRequest{Agent: "a", Scope: "user", Document: doc, Mode: "overwrite"})
	wantCode(t, err, codes.FailedPrecondition, "confirm")
	before := s.files(t, "a")
	for _, bad := range []string{`{"scope":"user","files":{"a.md":`, `{"files":{"../a.md":"x"}}`, `{"files":{"a.md":"x"},"extra":1}`, `[1]`} {
		_, err = c.ImportMemory(ctx, &penguinv1.ImportMemoryRequest{Agent: "a", Scope: "user", Document: bad, Mode: "replace", Confirm: true})
		wantCode(t, err, codes.InvalidArgument, "document")
		if !equalMaps(before, s.files(t, "a")) {
			t.Fatalf("a refused import (%s) changed memory", bad)
		}
	}
	res, err = c.ImportMemory(ctx, &penguinv1.ImportMemoryRequest{Agent: "a", Scope: "user", Document: doc, Mode: "replace", Confirm: true})
	if err != nil || res.GetWritten() != 2 || res.GetDeleted() != 1 {
		t.Fatalf("replace import: %v %v", res, err)
	}
	if f := s.files(t, "a"); f["memory/user/tools.md"] != "Use fd." || f["memory/user/MEMORY.md"] != "" {
		t.Fatalf("after replace: %v", f)
	}
	// Through HTTP.
	p := "/api/projects/default/agents/a/memory"
	if code, out := s.do(t, "GET", p, nil); code != 200 || !strings.Contains(string(out), "proj-0123abcd") {
		t.Fatalf("HTTP scopes: %d %s", code, out)
	}
	if code, out := s.do(t, "PUT", p+"/user/files/h.md", map[string]any{"content": "via http"}); code != 200 {
		t.Fatalf("HTTP put: %d %s", code, out)
	}
	if code, out := s.do(t, "GET", p+"/user/files", nil); code != 200 || !strings.Contains(string(out), `"h.md"`) {
		t.Fatalf("HTTP files: %d %s", code, out)
	}
	if code, out := s.do(t, "GET", p+"/user/files/h.md", nil); code != 200 || !strings.Contains(string(out), "via http") {
		t.Fatalf("HTTP get: %d %s", code, out)
	}
	if code, out := s.do(t, "DELETE", p+"/user/files/h.md", nil); code != 200 {
		t.Fatalf("HTTP delete: %d %s", code, out)
	}
	if code, out := s.do(t, "GET", p+"/user/export", nil); code != 200 || !strings.Contains(string(out), "Use fd.") {
		t.Fatalf("HTTP export: %d %s", code, out)
	}
	if code, out := s.do(t, "POST", p+"/user/import", map[string]any{"document": "{not json"}); code != 400 || !strings.Contains(string(out), "document") {
		t.Fatalf("HTTP malformed import: %d %s", code, out)
	}
	if code, out := s.do(t, "POST", p+"/user/import", map[string]any{"document": doc, "mode": "overwrite"}); code != 409 || !strings.Contains(string(out), "confirm") {
		t.Fatalf("HTTP unconfirmed import: %d %s", code, out)
	}
}

func TestVault(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value"
	if _, err := c.SetVault(ctx, &penguinv1.SetVaultRequest{Agent: "a", Name: "API_TOKEN", Value: secret}); err != nil {
		t.Fatal(err)
	}
	_, err := c.SetVault(ctx, &penguinv1.SetVaultRequest{Agent: "a", Name: "1-BAD NAME", Value: secret})
	wantCode(t, err, codes.InvalidArgument, "name")
	if strings.Contains(err.Error(), secret) {
		t.Fatal("an error carries the value")
	}
	names, err := c.ListVault(ctx, &penguinv1.ListVaultRequest{Agent: "a"})
	if err != nil || len(names.GetNames()) != 1 || names.GetNames()[0] != "API_TOKEN" {
		t.Fatalf("names: %v %v", names, err)
	}
	if f := s.files(t, "a")[".vault.yaml"]; !strings.Contains(f, secret) {
		t.Fatalf("the vault file lacks the value: %q", f)
	}
	code, out := s.do(t, "GET", "/api/projects/default/agents/a/vault", nil)
	if code != 200 || !strings.Contains(string(out), "API_TOKEN") || strings.Contains(string(out), secret) {
		t.Fatalf("HTTP list: %d %s", code, out)
	}
	if code, out := s.do(t, "PUT", "/api/projects/default/agents/a/vault/OTHER", map[string]any{"value": "v2"}); code != 200 {
		t.Fatalf("HTTP set: %d %s", code, out)
	}
	if code, out := s.do(t, "PUT", "/api/projects/default/agents/a/vault/not-a-name", map[string]any{"value": secret}); code != 400 || strings.Contains(string(out), secret) {
		t.Fatalf("HTTP bad name: %d %s", code, out)
	}
	if code, _ := s.do(t, "DELETE", "/api/projects/default/agents/a/vault/OTHER", nil); code != 200 {
		t.Fatalf("HTTP delete: %d", code)
	}
	if _, err := c.DeleteVault(ctx, &penguinv1.DeleteVaultRequest{Agent: "a", Name: "API_TOKEN"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteVault(ctx, &penguinv1.DeleteVaultRequest{Agent: "a", Name: "API_TOKEN"})
	wantCode(t, err, codes.NotFound)
}

func TestMCPServers(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "mcpserver")
	build := exec.Command("go", "build", "-o", bin, "../../environment/mcp/testdata/mcpserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
	if _, err := c.PutMCPServer(ctx, &penguinv1.PutMCPServerRequest{Agent: "a", Server: &penguinv1.MCPServerSpec{Name: "tools", Command: bin, Permission: "r"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.TestMCPServer(ctx, &penguinv1.TestMCPServerRequest{Agent: "a", Name: "tools"})
	if err != nil || !res.GetOk() || len(res.GetTools()) == 0 {
		t.Fatalf("test: %v %v", res, err)
	}
	before := s.files(t, "a")
	_, err = c.PutMCPServer(ctx, &penguinv1.PutMCPServerRequest{Agent: "a", Server: &penguinv1.MCPServerSpec{Name: "ghost", Command: "/nonexistent/mcp-server"}})
	wantCode(t, err, codes.InvalidArgument, "server.command")
	_, err = c.PutMCPServer(ctx, &penguinv1.PutMCPServerRequest{Agent: "a", Server: &penguinv1.MCPServerSpec{Name: "bad", Url: "http://127.0.0.1:1/mcp", Permission: "everything"}})
	wantCode(t, err, codes.InvalidArgument, "permission")
	if !equalMaps(before, s.files(t, "a")) {
		t.Fatal("a refused server was written")
	}
	if _, err := c.PutMCPServer(ctx, &penguinv1.PutMCPServerRequest{Agent: "a", Server: &penguinv1.MCPServerSpec{Name: "remote", Url: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer tok"}}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListMCPServers(ctx, &penguinv1.ListMCPServersRequest{Agent: "a"})
	if err != nil || len(list.GetServers()) != 2 || list.GetServers()[1].GetHeaders()["Authorization"] != "" {
		t.Fatalf("list: %v %v", list, err)
	}
	// An edit that leaves a header empty keeps its value.
	if _, err := c.PutMCPServer(ctx, &penguinv1.PutMCPServerRequest{Agent: "a", Server: &penguinv1.MCPServerSpec{Name: "remote", Url: "http://127.0.0.1:2/mcp", Headers: map[string]string{"Authorization": ""}}}); err != nil {
		t.Fatal(err)
	}
	if f := s.files(t, "a")["system_config.yaml"]; !strings.Contains(f, "Bearer tok") || !strings.Contains(f, "127.0.0.1:2") {
		t.Fatalf("the edit: %s", f)
	}
	res, err = c.TestMCPServer(ctx, &penguinv1.TestMCPServerRequest{Agent: "a", Name: "remote"})
	if err != nil || res.GetOk() || res.GetMessage() == "" {
		t.Fatalf("test of an unreachable server: %v %v", res, err)
	}
	// Through HTTP.
	p := "/api/projects/default/agents/a/mcp"
	if code, out := s.do(t, "GET", p, nil); code != 200 || strings.Contains(string(out), "Bearer") || !strings.Contains(string(out), `"remote"`) {
		t.Fatalf("HTTP list: %d %s", code, out)
	}
	if code, out := s.do(t, "POST", p+"/tools/test", nil); code != 200 || !strings.Contains(string(out), `"ok":true`) {
		t.Fatalf("HTTP test: %d %s", code, out)
	}
	if code, out := s.do(t, "POST", p, map[string]any{"server": map[string]any{"name": "ghost", "command": "/nonexistent/x"}}); code != 400 || !strings.Contains(string(out), "server.command") {
		t.Fatalf("HTTP missing command: %d %s", code, out)
	}
	if code, out := s.do(t, "DELETE", p+"/remote", nil); code != 200 {
		t.Fatalf("HTTP delete: %d %s", code, out)
	}
	_, err = c.DeleteMCPServer(ctx, &penguinv1.DeleteMCPServerRequest{Agent: "a", Name: "remote"})
	wantCode(t, err, codes.NotFound)
}

func TestTools(t *testing.T) {
	s := newServer(t)
	ctx := t.Context()
	c := s.client
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	const head = "# tools of a\nmax_turns: 9 # kept\n"
	cur, err := c.GetAgentConfig(ctx, &penguinv1.GetAgentConfigRequest{Agent: "a", File: "system_config.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateAgentConfig(ctx, &penguinv1.UpdateAgentConfigRequest{Agent: "a", File: "system_config.yaml", Content: head +
		"tools:\n  custom:\n    - name: deploy\n      description: Ship it.\n      command: echo shipped\n      parameters: {type: object, properties: {}}\n", Version: cur.GetVersion()}); err != nil {
		t.Fatal(err)
	}
	list := func() map[string]*penguinv1.AgentTool {
		t.Helper()
		resp, err := c.ListAgentTools(ctx, &penguinv1.ListAgentToolsRequest{Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*penguinv1.AgentTool{}
		for _, tool := range resp.GetTools() {
			out[tool.GetName()] = tool
		}
		return out
	}
	tools := list()
	for name, kind := range map[string]string{"exec_command": "builtin", "read_file": "builtin", "run_subagent": "engine", "deploy": "custom"} {
		if tools[name] == nil || tools[name].GetKind() != kind || !tools[name].GetEnabled() || tools[name].GetDescription() == "" {
			t.Fatalf("%s: %v", name, tools[name])
		}
	}
	if tools["read_file"].GetPermission() != "r" || tools["exec_command"].GetPermission() != "rw" || tools["read_image"].GetForModel() != "vision" {
		t.Fatalf("permissions and model classes: %v %v %v", tools["read_file"], tools["exec_command"], tools["read_image"])
	}
	// Disabling one writes the others; the comments stay.
	if _, err := c.SetAgentToolEnabled(ctx, &penguinv1.SetAgentToolEnabledRequest{Agent: "a", Name: "exec_command"}); err != nil {
		t.Fatal(err)
	}
	cfg := s.files(t, "a")["system_config.yaml"]
	if !strings.Contains(cfg, "# tools of a") || !strings.Contains(cfg, "# kept") || !strings.Contains(cfg, "- name: read_file") || strings.Contains(cfg, "name: exec_command") || !strings.Contains(cfg, "command: echo shipped") {
		t.Fatalf("after disabling exec_command:\n%s", cfg)
	}
	if tools := list(); tools["exec_command"].GetEnabled() || !tools["read_file"].GetEnabled() || !tools["run_subagent"].GetEnabled() {
		t.Fatalf("after disabling: %v %v", tools["exec_command"], tools["read_file"])
	}
	// Enabling it again names every builtin: the list goes, as if never
	// edited.
	if code, out := s.do(t, "PUT", "/api/projects/default/agents/a/tools/exec_command/enabled", map[string]any{"enabled": true}); code != 200 {
		t.Fatalf("HTTP enable: %d %s", code, out)
	}
	if cfg := s.files(t, "a")["system_config.yaml"]; strings.Contains(cfg, "builtin") || !strings.Contains(cfg, "custom:") {
		t.Fatalf("after enabling every tool again:\n%s", cfg)
	}
	code, out := s.do(t, "GET", "/api/projects/default/agents/a/tools", nil)
	if code != 200 || !strings.Contains(string(out), `"name":"exec_command"`) || !strings.Contains(string(out), `"kind":"custom"`) {
		t.Fatalf("HTTP list: %d %s", code, out)
	}
	// The template's commented examples under tools: survive a switch
	// off and on.
	if _, err := c.CreateAgent(ctx, &penguinv1.CreateAgentRequest{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		if _, err := c.SetAgentToolEnabled(ctx, &penguinv1.SetAgentToolEnabledRequest{Agent: "b", Name: "read_file", Enabled: on}); err != nil {
			t.Fatal(err)
		}
	}
	if cfg := s.files(t, "b")["system_config.yaml"]; !strings.Contains(cfg, "\ntools:\n") || !strings.Contains(cfg, "# builtin:") || !strings.Contains(cfg, "# The tool set.") {
		t.Fatalf("the template's tools block after a switch off and on:\n%s", cfg)
	}
	// An unknown tool, or a custom one, is not a builtin to switch.
	before := s.files(t, "a")
	for _, name := range []string{"nope", "deploy"} {
		_, err := c.SetAgentToolEnabled(ctx, &penguinv1.SetAgentToolEnabledRequest{Agent: "a", Name: name})
		wantCode(t, err, codes.NotFound, name)
	}
	if !equalMaps(before, s.files(t, "a")) {
		t.Fatal("a refused switch changed the agent")
	}
}
