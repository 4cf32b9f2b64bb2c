package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/engine/store/storetest"
)

// testLogger sends a store's log lines to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// sqliteFiles remembers which file backs which store, for the corrupter.
type sqliteFiles struct {
	mu    sync.Mutex
	paths map[store.Store]string
}

func (f *sqliteFiles) open(t *testing.T) store.Store {
	path := filepath.Join(t.TempDir(), "penguin.db")
	s, err := store.Open(testkit.Context(t, time.Minute), "sqlite:"+path, store.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("Open(sqlite:%s): %v", path, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	f.mu.Lock()
	f.paths[s] = path
	f.mu.Unlock()
	return s
}

// corrupt overwrites a payload through a separate connection to the file.
func (f *sqliteFiles) corrupt(t *testing.T, s store.Store, sessionID string, seq int64, payload []byte) {
	t.Helper()
	res, err := f.db(t, s).ExecContext(testkit.Context(t, time.Minute), `UPDATE events SET body = ? WHERE session_id = ? AND seq = ?`, payload, sessionID, seq)
	if err != nil {
		t.Fatalf("corrupt: %v", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("corrupt: %d rows updated, want 1", n)
	}
}

// TestSQLiteConformance runs the shared suite against SQLite files.
func TestSQLiteConformance(t *testing.T) {
	f := &sqliteFiles{paths: make(map[store.Store]string)}
	// The parent "directory" of the unreachable database is a regular
	// file, so the database can never be created.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, f.open, storetest.WithCorrupter(f.corrupt), storetest.WithUnreachable(func(ctx context.Context) (store.Store, error) {
		return store.Open(ctx, "sqlite:"+filepath.Join(blocker, "penguin.db"))
	}), storetest.WithSharedPayloads(storetest.SharedPayloads{
		Count: f.countShared, Damage: f.damageShared, DeleteOld: f.deleteOld}))
}

// db opens a separate connection to the file behind s, with no foreign
// keys checked.
func (f *sqliteFiles) db(t *testing.T, s store.Store) *sql.DB {
	t.Helper()
	f.mu.Lock()
	path := f.paths[s]
	f.mu.Unlock()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// countShared counts the shared parts of events in the file behind s.
func (f *sqliteFiles) countShared(t *testing.T, s store.Store) int {
	t.Helper()
	var n int
	if err := f.db(t, s).QueryRowContext(testkit.Context(t, time.Minute), `SELECT COUNT(*) FROM shared_payloads`).Scan(&n); err != nil {
		t.Fatalf("count shared parts: %v", err)
	}
	return n
}

// deleteOld deletes a session as a replica older than the shared parts
// did.
func (f *sqliteFiles) deleteOld(t *testing.T, s store.Store, sessionID string) {
	t.Helper()
	if _, err := f.db(t, s).ExecContext(testkit.Context(t, time.Minute), `PRAGMA foreign_keys = ON; DELETE FROM sessions WHERE id = ?`, sessionID); err != nil {
		t.Fatalf("delete session %s: %v", sessionID, err)
	}
}

// damageShared overwrites every shared part with body, or deletes them
// all when body is nil.
func (f *sqliteFiles) damageShared(t *testing.T, s store.Store, body []byte) {
	t.Helper()
	q, args := `UPDATE shared_payloads SET body = ?`, []any{body}
	if body == nil {
		q, args = `DELETE FROM shared_payloads`, nil
	}
	if _, err := f.db(t, s).ExecContext(testkit.Context(t, time.Minute), q, args...); err != nil {
		t.Fatalf("damage shared parts: %v", err)
	}
}

// TestOpenSQLiteURLForms checks every accepted spelling of a SQLite store,
// that parent directories are created, that the file is in WAL mode with
// foreign keys on and 1 KiB pages, and that data survives closing and
// reopening.
func TestOpenSQLiteURLForms(t *testing.T) {
	dir := t.TempDir()
	ctx := testkit.Context(t, time.Minute)
	for _, tc := range []struct{ name, url, path string }{
		{"sqlite scheme", "sqlite:" + filepath.Join(dir, "a", "b", "one.db"), filepath.Join(dir, "a", "b", "one.db")},
		{"sqlite URL", "sqlite://" + filepath.Join(dir, "two.db"), filepath.Join(dir, "two.db")},
		{"file scheme", "file:" + filepath.Join(dir, "three.db"), filepath.Join(dir, "three.db")},
		{"plain path", filepath.Join(dir, "c", "four.db"), filepath.Join(dir, "c", "four.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.Open(ctx, tc.url)
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.url, err)
			}
			if err := s.CreateSession(ctx, &store.Session{ID: "persist"}); err != nil {
				t.Fatal(err)
			}
			if err := s.AppendEvents(ctx, "persist", store.Event{Sequence: 1, Message: storetest.Messages()[0]}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var mode string
			if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
			}
			// A new database has 1 KiB pages, which the WAL writes whole.
			var page int
			if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil || page != 1024 {
				t.Fatalf("page_size = %d, %v; want 1024", page, err)
			}
			// Reopen: migrations are idempotent and the data is there.
			s, err = store.Open(ctx, tc.url)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()
			evs, err := s.ReadEvents(ctx, "persist", 0, 0)
			if err != nil || len(evs) != 1 || !proto.Equal(evs[0].Message, storetest.Messages()[0]) {
				t.Fatalf("after reopen: %d events, %v", len(evs), err)
			}
			var versions, latest int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&versions, &latest); err != nil || versions != latest || versions < 2 {
				t.Fatalf("schema_migrations has %d rows up to version %d (%v) after two opens, want one per migration", versions, latest, err)
			}
		})
	}
}

// TestOpenSQLiteMemory checks the in-memory store used by tests: private
// to its Store, and with foreign keys enforced (a delete cascades).
func TestOpenSQLiteMemory(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	for _, url := range []string{":memory:", "sqlite::memory:"} {
		a, err := store.Open(ctx, url)
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		defer a.Close()
		b, err := store.Open(ctx, url)
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		defer b.Close()
		if err := a.CreateSession(ctx, &store.Session{ID: "m"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.GetSession(ctx, "m"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: a second in-memory store sees the first one's session (%v)", url, err)
		}
		if err := a.AppendEvents(ctx, "m", store.Event{Sequence: 1, Message: storetest.Messages()[1]}); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.AcquireLease(ctx, "m", "r", "", time.Minute); err != nil || !ok {
			t.Fatalf("AcquireLease = %v, %v", ok, err)
		}
		if err := a.DeleteSession(ctx, "m"); err != nil {
			t.Fatal(err)
		}
		if err := a.CreateSession(ctx, &store.Session{ID: "m"}); err != nil {
			t.Fatal(err)
		}
		if evs, err := a.ReadEvents(ctx, "m", 0, 0); err != nil || len(evs) != 0 {
			t.Fatalf("%s: events survived the delete: %d, %v", url, len(evs), err)
		}
	}
}

// TestOpenRejectsBadURLs checks that a URL the store does not understand
// is ErrInvalid with a message that says why.
func TestOpenRejectsBadURLs(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	for _, tc := range []struct{ url, want string }{
		{"", "empty store URL"},
		{"mysql://localhost/db", `unsupported store URL scheme "mysql"`},
		{"sqlite:", "has no path"},
		{"file:", "has no path"},
		{"sqlite:/tmp/x.db?mode=ro", "contains '?'"},
		{"postgres://%zz", "postgres URL"},
	} {
		s, err := store.Open(ctx, tc.url)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) succeeded", tc.url)
		}
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Open(%q) = %v; want ErrInvalid mentioning %q", tc.url, err, tc.want)
		}
	}
}

// TestOpenSQLiteUnavailable checks that a file that cannot be created is
// ErrUnavailable, which the engine reports as codes.Unavailable.
func TestOpenSQLiteUnavailable(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(blocker, "sub", "penguin.db"), // parent is a file
		t.TempDir(), // a directory, not a database file
	} {
		s, err := store.Open(ctx, path)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%q) succeeded", path)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Open(%q) = %v; want ErrUnavailable", path, err)
		}
	}
	// A file that is not a database.
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := store.Open(ctx, junk); err == nil {
		s.Close()
		t.Fatal("Open(junk file) succeeded")
	} else if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open(junk file) = %v; want ErrUnavailable", err)
	}
}

// TestSQLiteTornRecordIsLoggedAndQuarantined checks the side effects of a
// torn last record that the shared suite cannot see: a warning naming the
// session and sequence, and the record kept in torn_events for forensics.
func TestSQLiteTornRecordIsLoggedAndQuarantined(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	path := filepath.Join(t.TempDir(), "torn.db")
	var logs bytes.Buffer
	var mu sync.Mutex
	s, err := store.Open(ctx, path, store.WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSession(ctx, &store.Session{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	msgs := storetest.Messages()
	if err := s.AppendEvents(ctx, "t", store.Event{Sequence: 1, Message: msgs[0]}, store.Event{Sequence: 2, Message: msgs[5]}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	garbage := []byte{0x0a, 0xff, 0x7f} // a length-delimited field cut short
	if _, err := db.ExecContext(ctx, `UPDATE events SET body = ? WHERE session_id = 't' AND seq = 2`, garbage); err != nil {
		t.Fatal(err)
	}
	evs, err := s.ReadEvents(ctx, "t", 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("ReadEvents = %d events, %v; want 1", len(evs), err)
	}
	mu.Lock()
	line := logs.String()
	mu.Unlock()
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "torn") || !strings.Contains(line, "session_id=t") || !strings.Contains(line, "sequence=2") {
		t.Fatalf("log = %q; want a warning naming session t and sequence 2", line)
	}
	var kept []byte
	if err := db.QueryRowContext(ctx, `SELECT payload FROM torn_events WHERE session_id = 't' AND seq = 2`).Scan(&kept); err != nil || !bytes.Equal(kept, garbage) {
		t.Fatalf("quarantined payload = %x, %v; want %x", kept, err, garbage)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestPayloadKind checks the kind column's values: the trace format's
// payload type names.
func TestPayloadKind(t *testing.T) {
	want := []string{"session_meta", "tool_list_ready", "mcp_connect_begin", "mcp_connect_end", "request_begin", "text", "text",
		"image_url", "inline_data", "thinking", "thinking", "inline_thinking", "text", "tool_call", "approval_decision",
		"tool_call_output", "tool_call_output", "request_end", "token_usage", "request_end", "compaction_begin", "compaction_end",
		"subagent", "abort", "abort"}
	msgs := storetest.Messages()
	if len(msgs) != len(want) {
		t.Fatalf("corpus has %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if got := store.PayloadKind(m); got != want[i] {
			t.Errorf("PayloadKind(message %d) = %q, want %q", i, got, want[i])
		}
	}
	if got := store.PayloadKind(&penguinv1.OmniMessage{}); got != "" {
		t.Errorf("PayloadKind(empty) = %q", got)
	}
}

// bigEvents opens a store in a file of its own with one session, calls
// before (when not nil) on it, then appends events events of 8 KiB to the
// session. It returns the store, the path of its file, the file's size
// when the events were not appended yet, and their bytes.
func bigEvents(ctx context.Context, t *testing.T, events int, before func(store.Store)) (s store.Store, path string, size, bytes int64) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "big.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateSession(ctx, &store.Session{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(s)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 8<<10)
	for i := 1; i <= events; i++ {
		msg := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: big}}}
		if err := s.AppendEvents(ctx, "c", store.Event{Sequence: int64(i), Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	return s, path, info.Size(), int64(events * len(big))
}

// TestSQLiteCheckpointsInTheBackground checks that the WAL is copied into
// the database file by the store's own checkpointer, not left for the
// commit that fills it: a few hundred pages of events reach the database
// file within seconds, long before the writer's backstop (ten thousand
// pages) would checkpoint them.
func TestSQLiteCheckpointsInTheBackground(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	_, path, before, want := bigEvents(ctx, t, 200, nil) // about 1.6 MB, some 400 pages
	deadline := time.After(20 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size()-before >= want {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the database file grew by %d bytes, want the %d bytes of events checkpointed into it", info.Size()-before, want)
		case <-poll.C:
		}
	}
}

// TestSQLiteSettleCheckpointsAtOnce checks that Settle copies what was
// written into the database file before it returns, as a server needs
// before it reports ready, without waiting for the background
// checkpointer; and that an in-memory store has nothing to settle.
func TestSQLiteSettleCheckpointsAtOnce(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	settle := func(s store.Store) {
		if err := s.(store.Settler).Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The session's row is settled first, so that the file's growth is
	// the events'.
	s, path, before, want := bigEvents(ctx, t, 20, settle)
	settle(s)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size()-before < want {
		t.Fatalf("the database file grew by %d bytes once settled, want the %d bytes of events checkpointed into it", info.Size()-before, want)
	}
	mem, err := store.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	settle(mem)
}

// A clean Close leaves the database in one file: the WAL is checkpointed
// and truncated (or removed), and everything written reads back.
func TestSQLiteCloseLeavesNoWAL(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	path := filepath.Join(t.TempDir(), "close.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, &store.Session{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 8<<10)
	for i := 1; i <= 100; i++ { // about 800 KB through the WAL
		msg := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: big}}}
		if err := s.AppendEvents(ctx, "c", store.Event{Sequence: int64(i), Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	// A read keeps the read pool's connections open until Close.
	if _, err := s.ReadEvents(ctx, "c", 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path + "-wal"); err == nil && info.Size() > 0 {
		t.Fatalf("Close left a WAL of %d bytes", info.Size())
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if evs, err := s.ReadEvents(ctx, "c", 0, 0); err != nil || len(evs) != 100 {
		t.Fatalf("after reopening: %d events, %v", len(evs), err)
	}
}

// The SQLite store counts the write transactions it commits: one for an
// autocommit statement, one for a batch, none for a read.
func TestSQLiteCountsCommits(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	for _, url := range []string{filepath.Join(t.TempDir(), "commits.db"), ":memory:"} {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c, ok := s.(store.CommitCounter)
		if !ok {
			t.Fatalf("%s: the SQLite store does not count its commits", url)
		}
		base := c.Commits() // the schema's migration
		text := func(s string) *penguinv1.OmniMessage {
			return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: s}}}
		}
		steps := []struct {
			what string
			do   func() error
			want int64
		}{
			{"create", func() error { return s.CreateSession(ctx, &store.Session{ID: "c"}) }, 1},
			{"one event", func() error { return s.AppendEvents(ctx, "c", store.Event{Sequence: 1, Message: text("a")}) }, 1},
			{"a batch", func() error {
				return s.AppendEvents(ctx, "c", store.Event{Sequence: 2, Message: text("b")}, store.Event{Sequence: 3, Message: text("c")})
			}, 1},
			{"a read", func() error { _, err := s.ReadEvents(ctx, "c", 0, 0); return err }, 0},
		}
		for _, st := range steps {
			before := c.Commits()
			if err := st.do(); err != nil {
				t.Fatalf("%s: %s: %v", url, st.what, err)
			}
			if got := c.Commits() - before; got != st.want {
				t.Errorf("%s: %s committed %d transactions, want %d", url, st.what, got, st.want)
			}
		}
		if base < 1 {
			t.Errorf("%s: opening committed %d transactions, want the migration's", url, base)
		}
	}
}

// While readers read every millisecond, each background checkpoint starts
// the WAL over from its beginning, instead of leaving it to grow by every
// page written until the writer's backstop (ten thousand pages).
//
// Each of a dozen rounds appends a hundred events (a few hundred pages),
// waits for the checkpointer's next checkpoint and appends one more event:
// the WAL's header counts a restart when that append writes the WAL from
// its beginning again. Rounds wait for the checkpoints they count rather
// than for a time, so a slow or loaded machine runs the same test; a
// checkpoint waits only checkpointBusyTimeout for a reader to finish, so a
// reader descheduled in its read can deny one restart, and two in three
// rounds are enough. Without the background checkpoints no round restarts.
func TestSQLiteWALStartsOverUnderLoad(t *testing.T) {
	const rounds, batch = 12, 100
	ctx := testkit.Context(t, time.Minute)
	path := filepath.Join(t.TempDir(), "wal.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSession(ctx, &store.Session{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	defer readers.Wait()
	defer close(stop)
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				if _, err := s.GetSession(ctx, "w"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	text := strings.Repeat("y", 1<<10)
	seq := int64(0)
	appendOne := func() {
		seq++
		msg := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: text}}}
		if err := s.AppendEvents(ctx, "w", store.Event{Sequence: seq, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	restarted := 0
	for range rounds {
		for range batch {
			appendOne()
		}
		before, ckpts := walRestarts(t, path), store.BackgroundCheckpoints(s)
		deadline := time.Now().Add(10 * time.Second)
		for store.BackgroundCheckpoints(s) == ckpts {
			if time.Now().After(deadline) {
				t.Fatal("no background checkpoint in 10 s after a hundred appends")
			}
			time.Sleep(5 * time.Millisecond)
		}
		appendOne()
		if walRestarts(t, path) > before {
			restarted++
		}
	}
	if restarted*3 < rounds*2 {
		t.Fatalf("the WAL started over after %d of %d background checkpoints, want two in three at least", restarted, rounds)
	}
	t.Logf("the WAL started over after %d of %d background checkpoints", restarted, rounds)
}

// walRestarts reads how many times the WAL of the database at path has
// started over: its header's checkpoint sequence number, a big-endian
// 32-bit integer at offset 12.
func walRestarts(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 16)
	if _, err := io.ReadFull(f, hdr); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[12:])
}

// AcquireLeaseRead takes the lease as AcquireLease does, and reads the
// row and a short log with it on the writer: in one commit, and with no
// statement on the readers. A log longer than LeaseReadEvents is left
// out, and a lease another owner holds reads nothing.
func TestSQLiteAcquireLeaseRead(t *testing.T) {
	ctx := testkit.Context(t, time.Minute)
	text := func(s string) *penguinv1.OmniMessage {
		return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: s}}}
	}
	for _, url := range []string{filepath.Join(t.TempDir(), "leaseread.db"), ":memory:"} {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		lr, ok := s.(store.LeaseReader)
		if !ok {
			t.Fatalf("%s: the SQLite store does not read with the lease", url)
		}
		want := &store.Session{ID: "l", Title: "the row", ProjectID: store.DefaultProject}
		if err := s.CreateSession(ctx, want, store.Event{Sequence: 1, Message: text("a")}, store.Event{Sequence: 3, Message: text("b")}); err != nil {
			t.Fatal(err)
		}
		commits, reads := s.(store.CommitCounter).Commits(), s.(store.ReadCounter).Reads()
		taken, r, err := lr.AcquireLeaseRead(ctx, "l", "me", "addr", time.Minute)
		if err != nil || !taken || r == nil {
			t.Fatalf("%s: AcquireLeaseRead = %v, %v, %v; want the lease and a read", url, taken, r, err)
		}
		if r.Row.ID != "l" || r.Row.Title != want.Title || !r.Row.CreatedAt.Equal(want.CreatedAt) || r.Row.LastSequence != 3 {
			t.Fatalf("%s: AcquireLeaseRead read the row %+v; want the row created", url, r.Row)
		}
		if !r.Whole || len(r.Log) != 2 || r.Log[0].Sequence != 1 || r.Log[1].Message.GetText().GetText() != "b" {
			t.Fatalf("%s: AcquireLeaseRead read the log %v (whole: %v); want its two events", url, r.Log, r.Whole)
		}
		if n := s.(store.CommitCounter).Commits() - commits; n != 1 {
			t.Errorf("%s: AcquireLeaseRead committed %d transactions, want 1", url, n)
		}
		if n := s.(store.ReadCounter).Reads() - reads; n != 0 {
			t.Errorf("%s: AcquireLeaseRead ran %d statements on the readers, want none", url, n)
		}
		if owner, _, _, err := s.LeaseHolder(ctx, "l"); err != nil || owner != "me" {
			t.Fatalf("%s: LeaseHolder = %q, %v; want me", url, owner, err)
		}
		taken, r, err = lr.AcquireLeaseRead(ctx, "l", "other", "addr", time.Minute)
		if err != nil || taken || r != nil {
			t.Fatalf("%s: AcquireLeaseRead of a held lease = %v, %v, %v; want neither lease nor read", url, taken, r, err)
		}
		if _, _, err := lr.AcquireLeaseRead(ctx, "none", "me", "addr", time.Minute); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: AcquireLeaseRead of an unknown session: %v; want ErrNotFound", url, err)
		}
		long := make([]store.Event, store.LeaseReadEvents)
		for i := range long {
			long[i] = store.Event{Sequence: int64(4 + i), Message: text("more")}
		}
		if err := s.AppendEvents(ctx, "l", long...); err != nil {
			t.Fatal(err)
		}
		if _, r, err = lr.AcquireLeaseRead(ctx, "l", "me", "addr", time.Minute); err != nil || r.Row.LastSequence != long[len(long)-1].Sequence || r.Whole || r.Log != nil {
			t.Fatalf("%s: AcquireLeaseRead of a long log = %+v, %v; want the row and no log", url, r, err)
		}
	}
}
