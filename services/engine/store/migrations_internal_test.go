package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
