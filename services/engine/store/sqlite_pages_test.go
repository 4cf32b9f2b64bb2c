package store_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// createSessionPages is the most pages a new session's commit writes to
// the WAL, on average, once the store holds a few hundred sessions: one
// leaf each of the row, its primary key, its two indexes by time, the
// first event, the event's primary key and its shared part's index (7),
// and the pages of the leaves' splits now and then. With the indexes by
// time in descending order, whose leftmost leaf took every new session
// and was rebalanced with its siblings and their parent, it was 12.1.
const createSessionPages = 10.5

// New sessions' commits (CreateSession with a session_meta, whose system
// prompt is a shared part the store holds already) write at most
// createSessionPages pages each to the WAL on average, counted from the
// WAL's frames after a checkpoint has started it over.
func TestSQLiteCreateSessionPages(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	path := filepath.Join(t.TempDir(), "pages.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prompt := strings.Repeat("You are Penguin, a careful coding agent. Read before you write. ", 75)
	create := func(i int) {
		id := fmt.Sprintf("task-%08d", i)
		meta := &penguinv1.SessionMeta{SessionId: id, Provider: "openai", ModelId: "mock", SystemPrompt: prompt,
			Workspace: "/work/" + id, AgentState: "/agents/default"}
		first := store.Event{Sequence: 1, Message: &penguinv1.OmniMessage{Timestamp: timestamppb.Now(),
			Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: meta}}}
		if err := st.CreateSession(ctx, &store.Session{ID: id, Config: []byte(`{"seq_high":1,"context_seq":1}`)}, first); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		create(i)
	}
	settle := st.(store.Settler)
	measured, pages := 0, 0
	for i := 300; i < 500; i++ {
		if err := settle.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		before := walSalt(t, path)
		create(i)
		frames, salt := walFrames(t, path)
		if salt == before {
			// The checkpoint left the WAL to go on rather than start
			// over: this commit's frames are not told apart.
			continue
		}
		measured++
		pages += frames
	}
	if measured < 100 {
		t.Fatalf("only %d of 200 commits were measured", measured)
	}
	if mean := float64(pages) / float64(measured); mean > createSessionPages {
		t.Fatalf("a new session's commit wrote %.2f pages to the WAL on average, want at most %.1f", mean, createSessionPages)
	}
}

// walSalt returns the salts of the WAL's header, which change when the
// WAL starts over.
func walSalt(t *testing.T, path string) string {
	_, salt := walFrames(t, path)
	return salt
}

// walFrames counts the frames of the WAL at path that belong to its
// current start (their salts are the header's), and returns the salts.
func walFrames(t *testing.T, path string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		return 0, ""
	}
	page := int(binary.BigEndian.Uint32(b[8:12]))
	salt := string(b[16:24])
	n := 0
	for off := 32; off+24+page <= len(b) && string(b[off+8:off+16]) == salt; off += 24 + page {
		n++
	}
	return n, salt
}
