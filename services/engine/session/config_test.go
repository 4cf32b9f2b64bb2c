package session

import (
	"reflect"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/store"
)

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

// A task's end and a binding of the session's own environment change
// the config's members by their JSON names, in the store: what they make
// of a config is what the same change of the parsed config would be, and
// the members they do not name (a person's pin, the turn limit) stay.
func TestEndChangesAreTheConfigsFields(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := config{MaxTurns: 3, Pinned: true, SharedEnvironment: true, SeqHigh: 100, ContextSeq: 4, Note: "[turn_aborted]", NoteSeq: 1,
		LastEnd: &taskEnd{Sequence: 90, Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "m", NotRecorded: true}}
	if err := st.CreateSession(ctx, &store.Session{ID: "s", Config: start.bytes()}); err != nil {
		t.Fatal(err)
	}
	text := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: "x"}}}
	for i, tc := range []struct {
		high, contextSeq int64
		end              *taskEnd
		note             string
	}{
		{high: 50, end: &taskEnd{Sequence: 50, Status: penguinv1.StopReason_STOP_REASON_COMPLETED}},
		{high: 200, contextSeq: 7, end: &taskEnd{Sequence: 200, Status: penguinv1.StopReason_STOP_REASON_ABORTED, Message: "stopped"}, note: "[turn_retried]"},
	} {
		seq := int64(i + 1)
		want := start
		want.SeqHigh = max(want.SeqHigh, tc.high)
		want.LastEnd = tc.end
		want.Note, want.NoteSeq = tc.note, seq
		if tc.contextSeq > 0 {
			want.ContextSeq = tc.contextSeq
		}
		if i == 1 {
			want.SharedEnvironment = false
		}
		changes := endChanges(tc.high, tc.end, tc.note, tc.contextSeq)
		if i == 1 {
			changes = append(changes, store.ConfigChange{Key: configSharedEnvironment})
		}
		err := st.WriteSession(ctx, "s", store.SessionWrite{
			Events: []store.Event{{Sequence: seq, Message: text}},
			Patch:  &store.SessionPatch{Config: changes},
		})
		if err != nil {
			t.Fatal(err)
		}
		row, err := st.GetSession(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseConfig(row.Config)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("end %d: config %s = %+v (%v), want %+v", i, row.Config, got, err, want)
		}
		start = want
	}
}
