package llm_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm"
)

// TestCatalogMatrixAccepted sends every model of every catalog provider, at
// every thinking level, through the gateway (the provider presets, turned
// on by their key variables, pointed at the emulator's route for that
// provider) into the strict emulator, and expects every request accepted:
// the gateway's request shaping agrees with what the providers accept as
// the catalog describes them. A model that calls tools is sent tools and a
// history with a tool call and its result.
func TestCatalogMatrixAccepted(t *testing.T) {
	emu := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "ok", Usage: emulator.Usage{Input: 10, Output: 2}}},
		OnExhausted: emulator.ExhaustedRepeatLast}, emulator.WithoutRecording())
	t.Cleanup(emu.Close)
	cat := catalog.Builtin()
	env := map[string]string{"LMSTUDIO_BASE_URL": emu.URL + "/lmstudio/v1"}
	for _, p := range cat.Providers {
		if v := p.KeyVar(); v != "" {
			env[v] = "sk-matrix"
			env[strings.TrimSuffix(v, "_API_KEY")+"_BASE_URL"] = emu.URL + "/" + p.ID + "/v1"
		}
	}
	env["ANTHROPIC_BASE_URL"] = emu.URL + "/anthropic"
	svc, err := llm.Setup(llm.Config{Lookup: config.MapLookup(env)})
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
	if len(ps.GetProviders()) != len(cat.Providers) {
		t.Fatalf("%d routes for %d catalog providers: %v", len(ps.GetProviders()), len(cat.Providers), ps)
	}

	type job struct {
		provider string
		model    *catalog.Model
		level    penguinv1.ThinkingLevel
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var refused []string
	accepted := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				out := matrixRequest(t, svc, j.provider, j.model, j.level)
				mu.Lock()
				if out.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED {
					accepted++
				} else {
					refused = append(refused, fmt.Sprintf("%s/%s at %s: %s", j.provider, j.model.ID, j.level, out.GetMessage()))
				}
				mu.Unlock()
			}
		})
	}
	total := 0
	for _, p := range cat.Providers {
		for _, m := range p.Models {
			for l := penguinv1.ThinkingLevel_THINKING_LEVEL_NONE; l <= penguinv1.ThinkingLevel_THINKING_LEVEL_MAX; l++ {
				total++
				jobs <- job{p.ID, m, l}
			}
		}
	}
	close(jobs)
	wg.Wait()
	np, nm := cat.Size()
	t.Logf("matrix: %d providers, %d models x 6 thinking levels = %d requests, %d accepted", np, nm, total, accepted)
	if len(refused) > 0 {
		t.Errorf("%d of %d requests refused, for example:\n  %s", len(refused), total, strings.Join(refused[:min(len(refused), 20)], "\n  "))
	}
}

func matrixRequest(t *testing.T, svc *llm.Service, provider string, m *catalog.Model, level penguinv1.ThinkingLevel) *penguinv1.LLMOutcome {
	req := &penguinv1.StreamGenerateRequest{
		Model:         &penguinv1.ModelRef{Provider: provider, ModelId: m.ID},
		SystemPrompt:  "You are terse.",
		ThinkingLevel: level,
		NewMessages:   []*penguinv1.OmniMessage{omni.UserText("list the files")},
	}
	if m.Tools {
		req.Tools = []*penguinv1.ToolDefinition{{Name: "exec_command", Description: "run a command",
			Parameters: `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`}}
		req.History = []*penguinv1.OmniMessage{
			omni.UserText("what is here?"),
			omni.ToolCall("call_1", "exec_command", `{"cmd":"ls"}`),
			omni.ToolCallOutput("call_1", "a.txt", penguinv1.StopReason_STOP_REASON_COMPLETED),
			omni.AssistantText("One file."),
		}
	}
	var out *penguinv1.LLMOutcome
	err := svc.Generate(t.Context(), req, func(f *penguinv1.StreamGenerateResponse) error {
		if o := f.GetOutcome(); o != nil {
			out = o
		}
		return nil
	})
	if err != nil {
		return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "refused before sending: " + err.Error()}
	}
	return out
}
