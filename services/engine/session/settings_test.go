package session

import (
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// The loop gets the agent's numbers and texts: with the built-in agent
// config, the reconnect ladder is 2 s, 4 s, 8 s, 16 s, 30 s and the
// compaction texts are the agent state's defaults.
func TestSettingsCarryTheAgentDefaults(t *testing.T) {
	st := &agentstate.State{Config: agentstate.Default()}
	row := &store.Session{Provider: "p", ModelID: "m"}
	meta := &penguinv1.SessionMeta{SystemPrompt: "sys", ModelContextWindow: 100000}
	set := settings(st, row, config{}, meta, penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, nil)

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
	if c.Prompt != agentstate.DefaultCompactionPrompt || c.RetryNote != agentstate.DefaultCompactionRetryNote || c.ExtractSummary == nil || c.WrapSummary == nil {
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
	cfg := agentstate.Default()
	cfg.Compaction.TurnsThreshold = 12
	st := &agentstate.State{Config: cfg}
	row := &store.Session{ThinkingLevel: penguinv1.ThinkingLevel_THINKING_LEVEL_LOW}
	set := settings(st, row, config{MaxTurns: 7}, &penguinv1.SessionMeta{}, penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH, nil)
	// The task's level wins for the task; compaction keeps the session's.
	if set.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH || set.Compaction.ThinkingLevel != penguinv1.ThinkingLevel_THINKING_LEVEL_LOW {
		t.Errorf("thinking = %v, compaction %v", set.ThinkingLevel, set.Compaction.ThinkingLevel)
	}
	if set.MaxTurns != 7 || set.Compaction.TurnsThreshold != 12 {
		t.Errorf("MaxTurns %d, TurnsThreshold %d", set.MaxTurns, set.Compaction.TurnsThreshold)
	}
	// No window known: the default window caps the trigger.
	if set.Compaction.ContextThreshold != agentstate.DefaultContextWindow-2048 {
		t.Errorf("ContextThreshold = %d", set.Compaction.ContextThreshold)
	}
	if s := settings(st, row, config{MaxTurns: -3}, &penguinv1.SessionMeta{}, 0, nil); s.MaxTurns != -1 {
		t.Errorf("a negative session max_turns gives MaxTurns %d, want no limit", s.MaxTurns)
	}
}

func ev(seq int64, m *penguinv1.OmniMessage) store.Event {
	return store.Event{Sequence: seq, Message: m}
}

func requestBegin() *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}}
}

func requestEnd(st penguinv1.StopReason) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: st}}}
}

func TestCutToTurn(t *testing.T) {
	completed := penguinv1.StopReason_STOP_REASON_COMPLETED
	log := []store.Event{
		ev(1, &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{}}}),
		ev(2, omni.UserText("go")),
		ev(3, requestBegin()),
		ev(4, omni.ToolCall("c1", "t", "{}")),
		ev(5, requestEnd(completed)),
		ev(6, omni.ToolCallOutput("c1", "out", 0)),
		ev(7, requestBegin()),
		ev(8, requestEnd(penguinv1.StopReason_STOP_REASON_FAILED)),
		ev(9, requestBegin()),
		ev(10, omni.AssistantText("done")),
		ev(11, requestEnd(completed)),
	}
	cases := []struct {
		upTo int64
		want int64 // last sequence kept
	}{
		{0, 11},  // the whole log
		{11, 11}, // up to the last completed turn
		{9, 6},   // inside a request: back to the last completed turn and its tool output
		{6, 6},
		{5, 5}, // right after request_end: the output is not there yet
		{4, 2}, // no completed request: the head up to the first request
		{1, 1},
	}
	for _, c := range cases {
		got := cutToTurn(log, c.upTo)
		if n := len(got); n == 0 || got[n-1].Sequence != c.want {
			t.Errorf("cutToTurn(up to %d) ends at %v, want %d", c.upTo, got, c.want)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	c := config{MaxTurns: 3, Depth: 1, SeqHigh: 42, ContextSeq: 7, Note: "[turn_aborted]", NoteSeq: 41, SharedEnvironment: true}
	got, err := parseConfig(c.bytes())
	if err != nil || got != c {
		t.Fatalf("parseConfig(bytes) = %+v, %v", got, err)
	}
	if empty, err := parseConfig(nil); err != nil || empty != (config{}) {
		t.Fatalf("parseConfig(nil) = %+v, %v", empty, err)
	}
	if _, err := parseConfig([]byte("{not json")); err == nil || !strings.Contains(err.Error(), "session config") {
		t.Fatalf("a corrupt config = %v", err)
	}
}

func TestTitle(t *testing.T) {
	if got := title("  fix\tthe\n\nbuild  "); got != "fix the build" {
		t.Errorf("title = %q", got)
	}
	long := strings.Repeat("é", 100)
	if got := []rune(title(long)); len(got) != 80 || got[79] != '…' {
		t.Errorf("a long prompt's title has %d runes, ends %q", len(got), string(got[len(got)-1]))
	}
}
