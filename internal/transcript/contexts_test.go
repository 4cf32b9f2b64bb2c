package transcript_test

import (
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/transcript"
)

func TestContextsSplitAtEachSessionMeta(t *testing.T) {
	meta := msg("2026-07-18T03:10:22.531Z", &penguinv1.SessionMeta{SessionId: "s"})
	text := msg("2026-07-18T03:10:22.531Z", &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: "x"})
	begin := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{}}}
	end := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{}}}
	for _, c := range []struct {
		name string
		log  []*penguinv1.OmniMessage
		want []int
	}{
		{"one context", []*penguinv1.OmniMessage{meta, text, text}, []int{1, 1, 1}},
		{"compacted twice", []*penguinv1.OmniMessage{meta, text, begin, end, meta, text, begin, end, meta}, []int{1, 1, 1, 1, 2, 2, 2, 2, 3}},
		{"a log without its head", []*penguinv1.OmniMessage{text, meta, text}, []int{1, 2, 2}},
	} {
		var cs transcript.Contexts
		for i, m := range c.log {
			if got := cs.Of(m); got != c.want[i] {
				t.Errorf("%s: message %d in context %d, want %d", c.name, i, got, c.want[i])
			}
		}
	}
	if got := transcript.FileName("session-2026-07-18-11-10-22-3f8a1c2d", 2); got != "session-2026-07-18-11-10-22-3f8a1c2d_002.jsonl" {
		t.Errorf("file name = %q", got)
	}
	if got := transcript.FileName("s", 1234); got != "s_1234.jsonl" {
		t.Errorf("file name past 999 = %q", got)
	}
}
