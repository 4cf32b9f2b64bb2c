package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/proto"
)

// TestNewSchemaAsMigrated checks that a new database, which gets its whole
// schema as one script, ends with the schema, the seeded rows and the
// recorded versions of a database brought up from the first version one
// migration at a time.
func TestNewSchemaAsMigrated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	fresh, stepped := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "stepped.db")

	// A database at version 1, as the first release left it.
	db, err := sql.Open("sqlite", stepped)
	if err != nil {
		t.Fatal(err)
	}
	first := sqliteMigrations()[0]
	for _, stmt := range append([]string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`,
	}, append(first.stmts, fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, 0)`, first.version))...) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{fresh, stepped} {
		s, err := openSQLite(ctx, path, buildOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		// The schema_migrations table itself is made by a statement of its
		// own, with the text of the migration path's.
		`SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master WHERE name <> 'schema_migrations' ORDER BY type, name`,
		`SELECT version FROM schema_migrations ORDER BY version`,
		`SELECT id, name, admin FROM users ORDER BY id`,
		`SELECT id, name FROM projects ORDER BY id`,
		`SELECT project_id, user_id, role FROM memberships ORDER BY project_id, user_id`,
	} {
		want, got := dump(ctx, t, stepped, q), dump(ctx, t, fresh, q)
		if got != want {
			t.Errorf("%s\nnew database:\n%s\nmigrated one by one:\n%s", q, got, want)
		}
		if want == "" {
			t.Errorf("%s: no rows", q)
		}
	}
}

// dump is the rows q reads from the database at path, one a line.
func dump(ctx context.Context, t *testing.T, path, q string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSharedPayloadsMigration checks version 9 on a database that a
// release before it wrote: its events, stored whole, read back as they
// were and beside new ones whose large parts are shared; and the
// statements of a replica older than version 9 (as that release ran
// them) fail on the migrated schema instead of reading a body without
// its shared part, or quarantining it as torn.
func TestSharedPayloadsMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	old := sqliteMigrations()[:8]
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);`+
		schemaScript(old, 0)); err != nil {
		t.Fatal(err)
	}
	meta := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{
		SessionId: "old", SystemPrompt: strings.Repeat("An old prompt. ", 100)}}}
	whole, err := proto.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO sessions (id, created_at, updated_at) VALUES ('old', 1, 1)`,
		`INSERT INTO events (session_id, seq, kind, payload, appended_at) VALUES ('old', 1, 'session_meta', ?, 1)`,
	} {
		var args []any
		if strings.Contains(stmt, "?") {
			args = []any{whole}
		}
		if _, err := db.ExecContext(ctx, stmt, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openSQLite(ctx, path, buildOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	tools := &penguinv1.ToolListReady{}
	for range 20 {
		tools.Tools = append(tools.Tools, &penguinv1.ToolDefinition{Name: "read_file", Description: strings.Repeat("Reads. ", 10)})
	}
	next := Event{Sequence: 2, Message: &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: tools}}}
	if err := s.AppendEvents(ctx, "old", next); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadEvents(ctx, "old", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !proto.Equal(got[0].Message, meta) || !proto.Equal(got[1].Message, next.Message) {
		t.Fatalf("ReadEvents after the migration = %v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The older replica, still running beside the migrated schema.
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var shared int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE shared IS NOT NULL`).Scan(&shared); err != nil || shared != 1 {
		t.Fatalf("%d events refer to a shared part (%v), want 1", shared, err)
	}
	for _, stmt := range []string{
		`SELECT seq, kind, payload FROM events WHERE session_id = 'old' AND seq > 0 ORDER BY seq LIMIT -1`,
		`INSERT INTO events (session_id, seq, kind, payload, appended_at) SELECT 'old', 3, 'text', x'', 1`,
		`INSERT OR REPLACE INTO torn_events (session_id, seq, kind, payload, quarantined_at)
			SELECT session_id, seq, kind, payload, 1 FROM events WHERE session_id = 'old' AND seq = 2`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err == nil || !strings.Contains(err.Error(), "payload") {
			t.Errorf("an older replica's %q on the migrated schema: error %v, want one naming the payload column", stmt, err)
		}
	}
}
