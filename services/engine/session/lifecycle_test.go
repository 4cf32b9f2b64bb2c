package session

import (
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/store"
)

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
		ev(12, omni.UserText("more")),
		ev(13, requestBegin()),
		ev(14, omni.ToolCall("c2", "t", "{}")),
		ev(15, omni.ToolCall("c3", "t", "{}")),
		ev(16, requestEnd(completed)),
		ev(17, omni.ToolCallOutput("c2", "out", 0)),
		ev(18, omni.ToolCallOutput("c3", "out", 0)),
		ev(19, requestBegin()),
	}
	cases := []struct {
		upTo int64
		want int64 // last sequence kept
	}{
		{0, 18},  // the whole log, up to the last request begun
		{18, 18}, // the last turn with all its outputs
		{17, 12}, // an output missing: before the turn with the calls
		{16, 12}, // right after request_end: no output yet
		{12, 12},
		{11, 11}, // up to the last completed turn
		{9, 6},   // inside a request: back to the last completed turn and its tool output
		{6, 6},
		{5, 2}, // right after request_end: the output is not there yet, so the turn goes
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
