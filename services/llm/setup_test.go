package llm_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
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
	if err != nil || len(ps.GetProviders()) != 1 || ps.GetProviders()[0].GetName() != "local" || ps.GetProviders()[0].GetHasCredential() || ps.GetNotice() != "" {
		t.Errorf("providers = %v, %v", ps, err)
	}

	// The environment's presets join the file's routes.
	both, err := llm.Setup(llm.Config{ProvidersFile: path, Lookup: config.MapLookup(map[string]string{"ANTHROPIC_API_KEY": "sk-a"})})
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := both.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{}); len(ps.GetProviders()) != 2 || ps.GetProviders()[0].GetType() != "anthropic" ||
		ps.GetProviders()[0].GetCredentialSource() != "env ANTHROPIC_API_KEY" || ps.GetProviders()[0].GetCatalog() != "anthropic" {
		t.Errorf("providers from the file and the environment = %v", ps)
	}
	ms, err := both.ListModels(t.Context(), &penguinv1.ListModelsRequest{Provider: "anthropic"})
	if err != nil || len(ms.GetModels()) < 10 {
		t.Fatalf("anthropic models = %d, %v", len(ms.GetModels()), err)
	}
	for _, m := range ms.GetModels() {
		if m.GetModel().GetModelId() == "claude-sonnet-4-5" {
			if m.GetMaxTokens() != 64000 || !m.GetReasoning() || m.GetPrice().GetOutput() != 15 || m.GetThinkingWire()["high"] != "16384" || len(m.GetThinkingLevels()) != 6 {
				t.Errorf("claude-sonnet-4-5 = %v", m)
			}
		}
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers: [{name: x, type: nope}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := llm.Setup(llm.Config{ProvidersFile: bad, Lookup: config.MapLookup(nil)}); err == nil || !strings.Contains(err.Error(), `type "nope"`) {
		t.Errorf("an invalid providers file at start-up = %v", err)
	}
}

// TestFirstRun starts the service with no provider at all: it serves,
// says how to add one in every answer, and picks up a providers file
// written later (the format the web app writes: a key in a 0600 file
// named by api_key_file), without a restart.
func TestFirstRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "providers.yaml")
	logs := &llmtest.LogRecorder{}
	svc, err := llm.Setup(llm.Config{ProvidersFile: path, Lookup: config.MapLookup(nil), Logger: slog.New(logs)})
	if err != nil {
		t.Fatalf("no provider must not fail Setup: %v", err)
	}
	ps, _ := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
	ms, _ := svc.ListModels(t.Context(), &penguinv1.ListModelsRequest{})
	for _, notice := range []string{ps.GetNotice(), ms.GetNotice()} {
		if !strings.Contains(notice, "no model provider is configured") || !strings.Contains(notice, "OPENAI_API_KEY") || !strings.Contains(notice, "providers file") {
			t.Errorf("notice = %q", notice)
		}
	}
	var frames []*penguinv1.StreamGenerateResponse
	err = svc.Generate(t.Context(), &penguinv1.StreamGenerateRequest{
		Model: &penguinv1.ModelRef{Provider: "openai", ModelId: "gpt-4o"}, NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")},
	}, func(f *penguinv1.StreamGenerateResponse) error { frames = append(frames, f); return nil })
	if err != nil || len(frames) != 1 {
		t.Fatalf("Generate = %v, %d frames", err, len(frames))
	}
	o := frames[0].GetOutcome()
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_MISSING_CREDENTIAL ||
		!o.GetPermanent() || !strings.Contains(o.GetMessage(), "no model provider is configured") {
		t.Errorf("outcome = %v", o)
	}

	emu := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "hello"}, {Text: "again"}}}, emulator.WithAPIKey("sk-web"))
	t.Cleanup(emu.Close)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); svc.Watch(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	keyFile := filepath.Join(dir, "keys", "deepseek")
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte("sk-web\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, path, "providers:\n  - name: deepseek\n    type: openai\n    base_url: "+emu.OpenAIBaseURL()+"\n    api_key_file: "+keyFile+"\n")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.All())
		}
	})
	eventually.Within(t, 10*time.Second, "the new providers file is picked up", func() bool {
		ps, _ := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
		return len(ps.GetProviders()) == 1 && ps.GetNotice() == ""
	})
	r := generate(t, svc, "deepseek", "deepseek-chat")
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || r.Texts() != "hello" {
		t.Fatalf("after the reload: %v\n%s", r.Outcome, llmtest.Dump(r.Frames))
	}

	// A broken file keeps the routes in use, and says so.
	writeAtomically(t, path, "providers:\n  - name: deepseek\n    type: openai\n    api_key_file: /nonexistent/key\n")
	eventually.Within(t, 10*time.Second, "the broken file is reported", func() bool {
		ps, _ := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
		return strings.Contains(ps.GetNotice(), "did not load") && len(ps.GetProviders()) == 1
	})
	if r := generate(t, svc, "deepseek", "deepseek-chat"); r.Texts() != "again" {
		t.Fatalf("the old routes stopped serving: %v", r.Outcome)
	}
	if len(logs.Find("the provider routes did not load; the routes in use stay")) == 0 {
		t.Error("the failed reload was not logged")
	}
}

// TestWatchFollowsTheKeyFile: a key file written again (a key rotated)
// is picked up by the watch while the providers file that names it stays
// as it was, since the watch stamps the key files the file names as well
// as the file (and parses the file again only when it changes).
func TestWatchFollowsTheKeyFile(t *testing.T) {
	dir := t.TempDir()
	emu := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "hello"}}}, emulator.WithAPIKey("sk-new"))
	t.Cleanup(emu.Close)
	keyFile := filepath.Join(dir, "deepseek.key")
	if err := os.WriteFile(keyFile, []byte("sk-expired\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  - name: deepseek\n    type: openai\n    base_url: "+emu.OpenAIBaseURL()+"\n    api_key_file: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, err := llm.Setup(llm.Config{ProvidersFile: path, Lookup: config.MapLookup(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if r := generate(t, svc, "deepseek", "deepseek-chat"); r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH {
		t.Fatalf("with the old key: %v", r.Outcome)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); svc.Watch(ctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	writeAtomically(t, keyFile, "sk-new\n")
	eventually.Within(t, 10*time.Second, "the rotated key is used", func() bool {
		return generate(t, svc, "deepseek", "deepseek-chat").Texts() == "hello"
	})
}

func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func generate(t *testing.T, svc *llm.Service, provider, model string) llmtest.Result {
	t.Helper()
	var r llmtest.Result
	err := svc.Generate(t.Context(), &penguinv1.StreamGenerateRequest{
		Model: &penguinv1.ModelRef{Provider: provider, ModelId: model}, NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")},
	}, func(f *penguinv1.StreamGenerateResponse) error {
		r.Frames = append(r.Frames, f)
		if o := f.GetOutcome(); o != nil {
			r.Outcome = o
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	llmtest.Validate(t, r.Frames)
	return r
}
