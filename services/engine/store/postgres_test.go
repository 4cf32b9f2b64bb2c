package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/engine/store/storetest"
)

// pgEnv is a test PostgreSQL: an admin pool on the base URL, from which
// each test gets a fresh schema.
type pgEnv struct {
	base  string
	admin *pgxpool.Pool

	mu      sync.Mutex
	schemas map[store.Store]string
}

// newPGEnv connects to the test PostgreSQL (pgtest.BaseURL: the local one,
// or a private one it starts). When there is none the test fails, because
// a skip would hide a broken store; PENGUIN_SKIP_POSTGRES=1 turns the
// failure into a skip for machines without it.
func newPGEnv(tb testing.TB) *pgEnv {
	tb.Helper()
	base := pgtest.BaseURL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgxpool.New(ctx, base)
	if err == nil {
		err = admin.Ping(ctx)
		if err != nil {
			admin.Close()
		}
	}
	if err != nil {
		pgtest.Unreachable(tb, base, err)
	}
	tb.Cleanup(admin.Close)
	return &pgEnv{base: base, admin: admin, schemas: make(map[store.Store]string)}
}

// freshSchema creates a uniquely named schema, dropped when tb ends, and
// returns its name and a store URL whose search_path selects it.
func (e *pgEnv) freshSchema(tb testing.TB) (string, string) {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "penguin_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.admin.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema, withParam(tb, e.base, "search_path", schema)
}

// withParam returns u with one query parameter set.
func withParam(tb testing.TB, u, key, value string) string {
	tb.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatalf("parse %q: %v", u, err)
	}
	q := parsed.Query()
	q.Set(key, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// open opens a store on a fresh schema. The store is closed before the
// schema is dropped (cleanups run last-in first-out).
func (e *pgEnv) open(t *testing.T) store.Store {
	schema, u := e.freshSchema(t)
	s, err := store.Open(testkit.Context(t, time.Minute), u, store.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	e.mu.Lock()
	e.schemas[s] = schema
	e.mu.Unlock()
	return s
}

func (e *pgEnv) corrupt(t *testing.T, s store.Store, sessionID string, seq int64, payload []byte) {
	t.Helper()
	e.mu.Lock()
	schema := e.schemas[s]
	e.mu.Unlock()
	tag, err := e.admin.Exec(testkit.Context(t, time.Minute), `UPDATE `+pgx.Identifier{schema, "events"}.Sanitize()+
		` SET body = $1 WHERE session_id = $2 AND seq = $3`, payload, sessionID, seq)
	if err != nil {
		t.Fatalf("corrupt: %v", err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("corrupt: %d rows updated, want 1", tag.RowsAffected())
	}
}

// TestPostgresConformance runs the shared suite against PostgreSQL, one
// fresh schema per subtest.
func TestPostgresConformance(t *testing.T) {
	env := newPGEnv(t)
	port := closedPort(t)
	storetest.Run(t, env.open, storetest.WithCorrupter(env.corrupt), storetest.WithUnreachable(func(ctx context.Context) (store.Store, error) {
		return store.Open(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", port))
	}), storetest.WithSharedPayloads(storetest.SharedPayloads{
		Count: env.countShared, Damage: env.damageShared, DeleteOld: env.deleteOld}))
}

// sharedTable is the shared parts' table of the schema behind s.
func (e *pgEnv) sharedTable(s store.Store) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return pgx.Identifier{e.schemas[s], "shared_payloads"}.Sanitize()
}

// countShared counts the shared parts of events in the schema behind s.
func (e *pgEnv) countShared(t *testing.T, s store.Store) int {
	t.Helper()
	var n int
	if err := e.admin.QueryRow(testkit.Context(t, time.Minute), `SELECT COUNT(*) FROM `+e.sharedTable(s)).Scan(&n); err != nil {
		t.Fatalf("count shared parts: %v", err)
	}
	return n
}

// deleteOld deletes a session as a replica older than the shared parts
// did.
func (e *pgEnv) deleteOld(t *testing.T, s store.Store, sessionID string) {
	t.Helper()
	e.mu.Lock()
	table := pgx.Identifier{e.schemas[s], "sessions"}.Sanitize()
	e.mu.Unlock()
	if _, err := e.admin.Exec(testkit.Context(t, time.Minute), `DELETE FROM `+table+` WHERE id = $1`, sessionID); err != nil {
		t.Fatalf("delete session %s: %v", sessionID, err)
	}
}

// damageShared overwrites every shared part with body, or deletes them
// all when body is nil.
func (e *pgEnv) damageShared(t *testing.T, s store.Store, body []byte) {
	t.Helper()
	q, args := `UPDATE `+e.sharedTable(s)+` SET body = $1`, []any{body}
	if body == nil {
		q, args = `DELETE FROM `+e.sharedTable(s), nil
	}
	if _, err := e.admin.Exec(testkit.Context(t, time.Minute), q, args...); err != nil {
		t.Fatalf("damage shared parts: %v", err)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// TestPostgresUnreachable checks that opening a PostgreSQL nobody listens
// for fails promptly with ErrUnavailable, and that a server that never
// answers is bounded by the context.
func TestPostgresUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", closedPort(t))
	start := time.Now()
	s, err := store.Open(ctx, u)
	if err == nil {
		s.Close()
		t.Fatal("Open of a closed port succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open(closed port) = %v; want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open(closed port) took %v; want a prompt failure", d)
	}

	// A listener that accepts and never speaks: the context bounds Open.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	stop := make(chan struct{})
	conns.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				<-stop
				_ = c.Close()
			})
		}
	})
	defer func() {
		_ = l.Close()
		close(stop)
		conns.Wait()
	}()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	start = time.Now()
	s, err = store.Open(short, fmt.Sprintf("postgres://postgres@%s/test?sslmode=disable", l.Addr()))
	if err == nil {
		s.Close()
		t.Fatal("Open of a silent server succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open(silent server) = %v; want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open(silent server) took %v with a 300ms context", d)
	}
}

// proxy forwards loopback TCP connections to PostgreSQL until killed, so a
// test can make the database vanish under an open store.
type proxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	})
	t.Cleanup(p.kill)
	return p
}

// kill stops accepting and cuts every forwarded connection.
func (p *proxy) kill() {
	_ = p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestPostgresConnectionLost checks that a store whose database goes away
// after Open reports ErrUnavailable promptly, for reads and writes.
func TestPostgresConnectionLost(t *testing.T) {
	env := newPGEnv(t)
	_, u := env.freshSchema(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, parsed.Host)
	parsed.Host = p.l.Addr().String()
	ctx := testkit.Context(t, time.Minute)
	s, err := store.Open(ctx, parsed.String())
	if err != nil {
		t.Fatalf("Open through proxy: %v", err)
	}
	defer s.Close()
	if err := s.CreateSession(ctx, &store.Session{ID: "lost"}); err != nil {
		t.Fatal(err)
	}
	p.kill()

	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.GetSession(callCtx, "lost")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetSession after the database vanished = %v; want ErrUnavailable", err)
	}
	err = s.AppendEvents(callCtx, "lost", store.Event{Sequence: 1, Message: storetest.Messages()[5]})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AppendEvents after the database vanished = %v; want ErrUnavailable", err)
	}
	_, err = s.AcquireLease(callCtx, "lost", "r", "", time.Minute)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireLease after the database vanished = %v; want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("failing took %v; want prompt errors", d)
	}
}

// TestPostgresConcurrentMigrations opens one fresh schema from several
// goroutines at once, as replicas starting together do: every Open
// succeeds and each migration is recorded exactly once.
func TestPostgresConcurrentMigrations(t *testing.T) {
	env := newPGEnv(t)
	schema, u := env.freshSchema(t)
	ctx := testkit.Context(t, time.Minute)
	const replicas = 6
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	stores := make(chan store.Store, replicas)
	for range replicas {
		wg.Go(func() {
			s, err := store.Open(ctx, u)
			if err != nil {
				errs <- err
				return
			}
			stores <- s
		})
	}
	wg.Wait()
	close(errs)
	close(stores)
	for s := range stores {
		defer s.Close()
	}
	for err := range errs {
		t.Fatalf("concurrent Open: %v", err)
	}
	var rows, max int
	if err := env.admin.QueryRow(ctx, `SELECT COUNT(*), MAX(version) FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&rows, &max); err != nil {
		t.Fatal(err)
	}
	if rows != max {
		t.Fatalf("schema_migrations has %d rows for %d versions", rows, max)
	}
}

// TestPostgresMissingSchema checks that a search_path naming no existing
// schema fails Open with a message saying so.
func TestPostgresMissingSchema(t *testing.T) {
	env := newPGEnv(t)
	u := withParam(t, env.base, "search_path", "penguin_no_such_schema_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	s, err := store.Open(testkit.Context(t, time.Minute), u)
	if err == nil {
		s.Close()
		t.Fatal("Open with a missing schema succeeded")
	}
	if want := "no schema of the search_path exists"; !strings.Contains(err.Error(), want) {
		t.Fatalf("Open = %v; want a message containing %q", err, want)
	}
}
