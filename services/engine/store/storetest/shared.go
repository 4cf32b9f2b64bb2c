package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SharedPayloads looks behind a store's back at the large parts of
// events that it keeps once per project (a session_meta's system prompt,
// a tool_list_ready's tools).
type SharedPayloads struct {
	// Count returns how many shared parts the database holds.
	Count func(t *testing.T, s store.Store) int
	// Damage replaces the bytes of every shared part with body, or
	// deletes every one when body is nil.
	Damage func(t *testing.T, s store.Store, body []byte)
	// DeleteOld deletes a session's row, and with it its records, as a
	// replica older than the shared parts did: with nothing else.
	DeleteOld func(t *testing.T, s store.Store, sessionID string)
}

// WithSharedPayloads supplies what the shared parts' tests need. Without
// it those tests fail.
func WithSharedPayloads(p SharedPayloads) Option { return func(s *suite) { s.shared = p } }

// bigMeta is a session_meta whose system prompt is large enough to be
// kept once: the prompt is prompt's, the rest the session's own.
func bigMeta(sessionID, prompt string) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_SessionMeta{
		SessionMeta: &penguinv1.SessionMeta{
			SessionId: sessionID, Provider: "deepseek", ModelId: "deepseek-v4-pro", ModelContextWindow: 128000,
			SystemPrompt: strings.Repeat(prompt+" You are a careful agent. ", 200),
			AgentState:   "/agents/" + sessionID, Workspace: "/work/" + sessionID, Source: "schedule",
		}}}
}

// bigTools is a tool_list_ready of n tools, some 10 KiB for n = 20.
func bigTools(n int, name string) *penguinv1.OmniMessage {
	tl := &penguinv1.ToolListReady{}
	for i := range n {
		tl.Tools = append(tl.Tools, &penguinv1.ToolDefinition{
			Name:        fmt.Sprintf("%s_%d", name, i),
			Description: strings.Repeat("Reads a file of the workspace and returns its lines. ", 8),
			Parameters:  `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"}},"required":["path"]}`,
		})
	}
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: tl}}
}

func (s *suite) needShared(t *testing.T) {
	if s.shared.Count == nil || s.shared.Damage == nil || s.shared.DeleteOld == nil {
		t.Fatal("no SharedPayloads given to storetest.Run (use WithSharedPayloads); shared parts are unverified")
	}
}

// testSharedPayloads checks that events with large parts that sessions
// share come back whole through every write path, that each part is kept
// once per project, and that deleting sessions takes a part with the last
// one that refers to it, never before.
func (s *suite) testSharedPayloads(t *testing.T, ctx context.Context, st store.Store) {
	s.needShared(t)
	logs := map[string][]store.Event{}
	write := func(id, project string, prompt ...string) {
		t.Helper()
		sess := &store.Session{ID: id, ProjectID: project}
		first := eventsOf(1, bigMeta(id, strings.Join(append([]string{"same"}, prompt...), " ")))
		if err := st.CreateSession(ctx, sess, first...); err != nil {
			t.Fatalf("CreateSession(%s): %v", id, err)
		}
		more := eventsOf(2, bigTools(20, "read"), text("hello"))
		if err := st.AppendEvents(ctx, id, more...); err != nil {
			t.Fatalf("AppendEvents(%s): %v", id, err)
		}
		// A new context of the same session: the same prompt again, and
		// the same tools again, through WriteSession.
		again := eventsOf(4, bigMeta(id, strings.Join(append([]string{"same"}, prompt...), " ")), bigTools(20, "read"))
		if err := st.WriteSession(ctx, id, store.SessionWrite{Events: again}); err != nil {
			t.Fatalf("WriteSession(%s): %v", id, err)
		}
		logs[id] = append(append(first, more...), again...)
	}
	check := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			got, err := st.ReadEvents(ctx, id, 0, 0)
			if err != nil {
				t.Fatalf("ReadEvents(%s): %v", id, err)
			}
			checkEvents(t, logs[id], got)
		}
	}
	count := func(want int, when string) {
		t.Helper()
		if got := s.shared.Count(t, st); got != want {
			t.Fatalf("%s: %d shared parts stored, want %d", when, got, want)
		}
	}

	write("a", "")
	write("b", "")
	write("c", "elsewhere")
	check("a", "b", "c")
	// One prompt and one tool list per project.
	count(4, "three sessions in two projects")

	// A small system prompt stays in its event.
	small := eventsOf(1, &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{
		SessionMeta: &penguinv1.SessionMeta{SessionId: "small", SystemPrompt: "Be brief."}}})
	if err := st.CreateSession(ctx, &store.Session{ID: "small"}, small...); err != nil {
		t.Fatalf("CreateSession(small): %v", err)
	}
	logs["small"] = small
	check("small")
	count(4, "a session with a small prompt")

	// An append refused for its sequence stores no part either.
	wantErr(t, "append of a used sequence", st.AppendEvents(ctx, "a", eventsOf(2, bigTools(21, "other"))...), store.ErrConflict)
	wantErr(t, "append to an unknown session", st.AppendEvents(ctx, "nobody", eventsOf(1, bigTools(22, "other"))...), store.ErrNotFound)
	count(4, "refused appends")

	if err := st.DeleteSession(ctx, "a"); err != nil {
		t.Fatalf("DeleteSession(a): %v", err)
	}
	count(4, "one of two sessions of a project deleted")
	check("b", "c")
	if err := st.DeleteSession(ctx, "b"); err != nil {
		t.Fatalf("DeleteSession(b): %v", err)
	}
	count(2, "the project's last session deleted")
	check("c")
	if err := st.DeleteSession(ctx, "c"); err != nil {
		t.Fatalf("DeleteSession(c): %v", err)
	}
	count(0, "every session deleted")

	// A part deleted with its last session is stored anew by the next.
	write("d", "")
	check("d")
	count(2, "a new session after the parts were collected")

	// A session deleted by an older replica leaves its parts behind (here
	// a prompt no other session has); the project's next deletion
	// collects them.
	write("e", "", "older")
	s.shared.DeleteOld(t, st, "d")
	s.shared.DeleteOld(t, st, "e")
	count(3, "the sessions deleted by an older replica")
	write("f", "")
	write("g", "")
	s.shared.DeleteOld(t, st, "f")
	if err := st.DeleteSession(ctx, "g"); err != nil {
		t.Fatalf("DeleteSession(g): %v", err)
	}
	count(0, "the project's next deletion")
}

// testSharedPayloadMissing checks that an event whose shared part is
// missing or damaged is handled as a record that does not decode: in
// the middle of the log an error wrapping ErrCorrupt, at its end a torn
// record, quarantined, with nothing else lost.
func (s *suite) testSharedPayloadMissing(t *testing.T, ctx context.Context, st store.Store) {
	s.needShared(t)
	mid := eventsOf(1, bigMeta("mid", "p"), text("one"), text("two"))
	if err := st.CreateSession(ctx, &store.Session{ID: "mid"}, mid...); err != nil {
		t.Fatalf("CreateSession(mid): %v", err)
	}
	last := eventsOf(1, text("one"), bigTools(20, "t"))
	if err := st.CreateSession(ctx, &store.Session{ID: "last"}, last...); err != nil {
		t.Fatalf("CreateSession(last): %v", err)
	}
	// A part that decodes as an event of another kind is as damaged as
	// one that does not decode, and as one that is gone.
	other, err := proto.Marshal(text("not a tool list"))
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []struct {
		name string
		body []byte
	}{{"damaged", []byte{0xff, 0xff, 0xff, 0x01, 0x00}}, {"of another kind", other}, {"missing", nil}} {
		s.shared.Damage(t, st, damage.body)
		_, err := st.ReadEvents(ctx, "mid", 0, 0)
		wantErr(t, "ReadEvents over a record whose shared part is "+damage.name, err, store.ErrCorrupt)
		if msg := err.Error(); !strings.Contains(msg, "mid") || !strings.Contains(msg, "sequence 1") {
			t.Fatalf("error %q does not name the session and the sequence", msg)
		}
		got, err := st.ReadEvents(ctx, "mid", 1, 0)
		if err != nil {
			t.Fatalf("ReadEvents(mid, after 1): %v", err)
		}
		checkEvents(t, mid[1:], got)
	}

	// At the end of a log it is a torn record: skipped and quarantined.
	got, err := st.ReadEvents(ctx, "last", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents(last) with its last record's shared part missing: %v", err)
	}
	checkEvents(t, last[:1], got)
	next := eventsOf(3, text("three"))
	if err := st.AppendEvents(ctx, "last", next...); err != nil {
		t.Fatalf("AppendEvents after the quarantined record: %v", err)
	}
	got, err = st.ReadEvents(ctx, "last", 0, 0)
	if err != nil {
		t.Fatalf("ReadEvents(last) after the quarantine: %v", err)
	}
	checkEvents(t, append(last[:1:1], next...), got)

	// Sessions whose parts are gone can still be deleted.
	for _, id := range []string{"mid", "last"} {
		if err := st.DeleteSession(ctx, id); err != nil {
			t.Fatalf("DeleteSession(%s): %v", id, err)
		}
	}
}
