// Package pgtest gives a test a PostgreSQL schema of its own in the test
// database, so that tests against the real server can run side by side
// and leave nothing behind.
//
// The server is, in this order: the one at PENGUIN_TEST_POSTGRES_URL; a
// local one at DefaultURL (trust auth, a database called test) when it
// answers; else a private server the test process starts from Debian's
// PostgreSQL binaries in a temporary directory, on a free port, and which
// ends with the process (PENGUIN_TEST_POSTGRES_URL=private asks for that
// one straight away). So `make test` needs no PostgreSQL service and no
// database made by hand, only the postgresql package.
//
// When there is no server to be had (the binaries are missing, say), the
// test fails saying what to install, because a skip would hide a broken
// store; PENGUIN_SKIP_POSTGRES=1 turns the failure into a skip on
// machines without PostgreSQL, except under CI (CI set), which must run
// these tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the test server when PENGUIN_TEST_POSTGRES_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// envURL names the server to use; "private" asks for a private one.
const envURL = "PENGUIN_TEST_POSTGRES_URL"

// server is the test process's server, found (or started) once.
var server = sync.OnceValues(func() (string, error) {
	switch u := os.Getenv(envURL); u {
	case "private":
		return startPrivate()
	case "":
	default:
		return u, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, DefaultURL); err == nil {
		_ = conn.Close(ctx)
		return DefaultURL, nil
	}
	return startPrivate()
})

// BaseURL returns the URL of the test server, without a schema (see the
// package comment for which server), ending tb when there is none.
func BaseURL(tb testing.TB) string {
	tb.Helper()
	u, err := server()
	if err != nil {
		Unreachable(tb, "127.0.0.1", err)
	}
	return u
}

// Unreachable ends tb because no server could be had at base (err): it
// fails, or skips when PENGUIN_SKIP_POSTGRES=1 outside CI, saying how to
// fix it either way.
func Unreachable(tb testing.TB, base string, err error) {
	tb.Helper()
	if os.Getenv("PENGUIN_SKIP_POSTGRES") == "1" && os.Getenv("CI") == "" {
		tb.Skipf("PostgreSQL at %s: %v; skipped (PENGUIN_SKIP_POSTGRES=1)", base, err)
	}
	tb.Fatalf("PostgreSQL at %s: %v\n"+
		"Install Debian's postgresql package (the tests start a server of their own), point %s at a server, "+
		"or set PENGUIN_SKIP_POSTGRES=1 to skip the PostgreSQL tests on this machine (not under CI).", base, err, envURL)
}

// URL creates a schema named after prefix and a random suffix, dropped
// (with everything in it) when tb ends, and returns a store URL whose
// search_path selects it.
func URL(tb testing.TB, prefix string) string {
	tb.Helper()
	base := BaseURL(tb)
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
