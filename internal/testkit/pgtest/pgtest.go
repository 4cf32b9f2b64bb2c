// Package pgtest gives a test a PostgreSQL schema of its own in the test
// database, so that tests against the real server can run side by side
// and leave nothing behind.
//
// The server is the one at PENGUIN_TEST_POSTGRES_URL, or DefaultURL (a
// local server with trust auth and a database called test). When it
// cannot be reached the test fails, because CI provides it and a skip
// would hide a broken store; PENGUIN_SKIP_POSTGRES=1 turns the failure
// into a skip on machines without PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the test server when PENGUIN_TEST_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL returns the URL of the test server, without a schema.
func BaseURL() string {
	if u := os.Getenv("PENGUIN_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Unreachable ends tb because the server at base could not be reached
// (err): it fails, or skips when PENGUIN_SKIP_POSTGRES=1, saying how to
// fix it either way.
func Unreachable(tb testing.TB, base string, err error) {
	tb.Helper()
	if os.Getenv("PENGUIN_SKIP_POSTGRES") == "1" {
		tb.Skipf("PostgreSQL at %s is unreachable (%v) and PENGUIN_SKIP_POSTGRES=1", base, err)
	}
	tb.Fatalf("PostgreSQL at %s is unreachable: %v\n"+
		"Start it (trust auth, database test), point PENGUIN_TEST_POSTGRES_URL at another one, "+
		"or set PENGUIN_SKIP_POSTGRES=1 to skip the PostgreSQL tests on this machine.", base, err)
}

// URL creates a schema named after prefix and a random suffix, dropped
// (with everything in it) when tb ends, and returns a store URL whose
// search_path selects it.
func URL(tb testing.TB, prefix string) string {
	tb.Helper()
	base := BaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		Unreachable(tb, base, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := pgx.Identifier{prefix + "_" + hex.EncodeToString(b[:])}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema.Sanitize()); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err == nil {
			_, err = c.Exec(ctx, "DROP SCHEMA "+schema.Sanitize()+" CASCADE")
			_ = c.Close(ctx)
		}
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema[0], err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("PostgreSQL URL %q: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema[0])
	u.RawQuery = q.Encode()
	return u.String()
}
