package session

import (
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// The loop gets the agent's numbers and texts: with the built-in agent
// config, the reconnect ladder is 2 s, 4 s, 8 s, 16 s, 30 s and the
// compaction texts are the agent state's defaults.
func TestSettingsCarryTheAgentDefaults(t *testing.T) {
	st := &agentstate.State{Config: agentconfig.Default()}
	row := &store.Session{Provider: "p", ModelID: "m"}
	meta := &penguinv1.SessionMeta{SystemPrompt: "sys", ModelContextWindow: 100000}
	set := settings(st, row, config{}, meta, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, nil, nil)

	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := set.Retry.Delay(i+1, 0); got != w {
			t.Errorf("reconnect %d waits %s, want %s", i+1, got, w)
		}
	}
	if set.Retry.MaxRetries != 5 {
		t.Errorf("MaxRetries = %d, want 5", set.Retry.MaxRetries)
	}
	c := set.Compaction
	if c.Prompt != agentconfig.DefaultCompactionPrompt || c.RetryNote != agentconfig.DefaultCompactionRetryNote || c.ExtractSummary == nil || c.WrapSummary == nil {
		t.Errorf("compaction texts are not the agent state's: %+v", c)
	}
	// The context trigger is capped below the model's window.
	if c.ContextThreshold != 100000-2048 || c.TurnsThreshold != 0 || c.Mode != penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE {
		t.Errorf("compaction triggers = %+v", c)
	}
	if set.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM || c.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM {
		t.Errorf("thinking = %v / %v, want the agent's medium", set.ThinkingLevel, c.ThinkingLevel)
	}
	if set.MaxTurns != -1 || set.MaxTokens != 32000 || set.RequestTimeoutMs == nil || *set.RequestTimeoutMs != 120000 || set.SystemPrompt != "sys" {
		t.Errorf("request settings = %+v", set)
	}
}

func TestSettingsOverrides(t *testing.T) {
	cfg := agentconfig.Default()
	cfg.Compaction.TurnsThreshold = 12
	st := &agentstate.State{Config: cfg}
	row := &store.Session{ThinkingLevel: penguinv1.ThinkingLevel_THINKING_LEVEL_LOW}
	set := settings(st, row, config{MaxTurns: 7}, &penguinv1.SessionMeta{}, penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH, nil, nil)
	// The task's level wins for the task; compaction keeps the session's.
	if set.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH || set.Compaction.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_LOW {
		t.Errorf("thinking = %v, compaction %v", set.ThinkingLevel, set.Compaction.ThinkingLevel)
	}
	if set.MaxTurns != 7 || set.Compaction.TurnsThreshold != 12 {
		t.Errorf("MaxTurns %d, TurnsThreshold %d", set.MaxTurns, set.Compaction.TurnsThreshold)
	}
	// No window known: the default window caps the trigger.
	if set.Compaction.ContextThreshold != agentconfig.DefaultContextWindow-2048 {
		t.Errorf("ContextThreshold = %d", set.Compaction.ContextThreshold)
	}
	if s := settings(st, row, config{MaxTurns: -3}, &penguinv1.SessionMeta{}, 0, nil, nil); s.MaxTurns != -1 {
		t.Errorf("a negative session max_turns gives MaxTurns %d, want no limit", s.MaxTurns)
	}
}
