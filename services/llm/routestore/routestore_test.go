package routestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/llm/routestore"
	"github.com/penguin-agent/penguin/services/llm/routing"
)

const secret = "0123456789abcdef0123456789abcdef-test-secret"

func sealer(t *testing.T, s string) *routestore.Sealer {
	t.Helper()
	sl, err := routestore.NewSealer([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

// stores are the two databases the table lives in. The PostgreSQL URL
// caps its pool as a deployment's store URL does (pool_max_conns), which
// a server refuses as an unknown parameter unless the store reads it.
func stores(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":     filepath.Join(t.TempDir(), "routes.db"),
		"postgresql": pgtest.URL(t, "routestore") + "&pool_max_conns=2",
	}
}

// TestStore: routes are added, listed with their keys opened, updated
// (keeping or replacing the key) and removed; each write moves the
// version; the key is nowhere in the database in the clear; a key sealed
// under another secret, or moved to another route, does not open.
func TestStore(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			st, err := routestore.Open(ctx, url, sealer(t, secret))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			v0, err := st.Version(ctx)
			if err != nil {
				t.Fatal(err)
			}
			const key = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
			p := routing.Provider{Name: "team", Type: "openai", BaseURL: "http://127.0.0.1:9/v1", Models: []routing.Model{{ID: "m1"}}}
			if err := st.Add(ctx, "apollo", p, key); err != nil {
				t.Fatal(err)
			}
			if err := st.Add(ctx, "apollo", p, key); !errors.Is(err, routestore.ErrExists) {
				t.Fatalf("second add: %v", err)
			}
			if err := st.Add(ctx, "", p, ""); err != nil { // a global route of the same name, without a key
				t.Fatal(err)
			}
			routes, v1, err := st.List(ctx)
			if err != nil || len(routes) != 2 || v1 != v0+2 {
				t.Fatalf("list: %+v v%d (from v%d) %v", routes, v1, v0, err)
			}
			global, own := routes[0], routes[1]
			if global.Project != "" || global.Provider.APIKey != "" || own.Project != "apollo" || own.Provider.APIKey != key ||
				own.Provider.Models[0].ID != "m1" || own.Err != nil {
				t.Fatalf("routes: %+v", routes)
			}

			// Update keeps the key unless given; "" removes it.
			p.BaseURL = "http://127.0.0.1:9/v2"
			if err := st.Update(ctx, "apollo", p, nil); err != nil {
				t.Fatal(err)
			}
			routes, _, _ = st.List(ctx)
			if routes[1].Provider.BaseURL != p.BaseURL || routes[1].Provider.APIKey != key {
				t.Fatalf("after update: %+v", routes[1].Provider)
			}
			if err := st.Update(ctx, "bravo", p, nil); !errors.Is(err, routestore.ErrNotFound) {
				t.Fatalf("update of another project's: %v", err)
			}

			// The database holds no key in the clear.
			db := openRaw(t, url)
			var spec string
			var sealed []byte
			if err := db.QueryRowContext(ctx, `SELECT spec, sealed_key FROM llm_provider_routes WHERE project = 'apollo'`).Scan(&spec, &sealed); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(spec, key) || bytes.Contains(sealed, []byte(key)) || bytes.Contains(sealed, []byte("abcdefghij")) {
				t.Fatalf("the key is in the clear: spec %q sealed %q", spec, sealed)
			}
			// Moved onto the global route, the sealed key does not open.
			if _, err := db.ExecContext(ctx, rebind(url, `UPDATE llm_provider_routes SET sealed_key = $1, key_id = (SELECT key_id FROM llm_provider_routes WHERE project = 'apollo') WHERE project = ''`), sealed); err != nil {
				t.Fatal(err)
			}
			routes, _, _ = st.List(ctx)
			if routes[0].Err == nil || !strings.Contains(routes[0].Err.Error(), "moved from another route") || routes[1].Err != nil {
				t.Fatalf("a moved key: %v / %v", routes[0].Err, routes[1].Err)
			}
			// Under another secret, no key opens, and the error says why.
			other, err := routestore.Open(ctx, url, sealer(t, strings.Repeat("x", 40)))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			routes, _, _ = other.List(ctx)
			if routes[1].Err == nil || !strings.Contains(routes[1].Err.Error(), "another route key secret") || routes[1].Provider.APIKey != "" {
				t.Fatalf("another secret: %+v", routes[1])
			}

			if err := st.Remove(ctx, "apollo", "team"); err != nil {
				t.Fatal(err)
			}
			if err := st.Remove(ctx, "apollo", "team"); !errors.Is(err, routestore.ErrNotFound) {
				t.Fatalf("second remove: %v", err)
			}
			if v, _ := st.Version(ctx); v != v0+4 {
				t.Fatalf("version %d after four writes from %d", v, v0)
			}
		})
	}
}

// openRaw opens the store's database directly, with pgx's plain driver
// (which takes no pool settings) for PostgreSQL.
func openRaw(t *testing.T, url string) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if strings.HasPrefix(url, "postgres") {
		driver = "pgx"
		url = strings.Replace(url, "&pool_max_conns=2", "", 1)
	}
	db, err := sql.Open(driver, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func rebind(url, q string) string {
	if strings.HasPrefix(url, "postgres") {
		return q
	}
	return strings.ReplaceAll(q, "$", "?")
}

// TestKeyRotation: with a new secret first and the old one after it,
// keys sealed under the old one still open and new ones are sealed under
// the new one; Reseal moves every old key onto the new secret, after
// which the old one can go. A key that opens under none of the secrets
// stops Reseal before it moves anything, and is named.
func TestKeyRotation(t *testing.T) {
	const (
		oldSecret = "old-0123456789abcdef0123456789abcdef"
		newSecret = "new-0123456789abcdef0123456789abcdef"
		stranger  = "stranger-0123456789abcdef0123456789abcdef"
	)
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			open := func(secrets string) *routestore.Store {
				st, err := routestore.Open(ctx, url, sealer(t, secrets))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}
			keys := func(st *routestore.Store) map[string]string {
				routes, _, err := st.List(ctx)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for _, r := range routes {
					out[r.Project+"/"+r.Provider.Name] = r.Provider.APIKey
					if r.Err != nil {
						out[r.Project+"/"+r.Provider.Name] = "error: " + r.Err.Error()
					}
				}
				return out
			}
			route := func(n string) routing.Provider {
				return routing.Provider{Name: n, Type: "openai", BaseURL: "http://127.0.0.1:9/v1"}
			}
			old := open(oldSecret)
			for _, r := range []struct{ project, name, key string }{
				{"", "global", "sk-global-0123456789abcdef"}, {"apollo", "team", "sk-team-0123456789abcdef"}, {"apollo", "keyless", ""},
			} {
				if err := old.Add(ctx, r.project, route(r.name), r.key); err != nil {
					t.Fatal(err)
				}
			}
			if err := open(stranger).Add(ctx, "bravo", route("lost"), "sk-lost-0123456789abcdef"); err != nil {
				t.Fatal(err)
			}

			rotated := open(newSecret + "\n" + oldSecret + "\n")
			if got := keys(rotated); got["/global"] != "sk-global-0123456789abcdef" || got["apollo/team"] != "sk-team-0123456789abcdef" {
				t.Fatalf("the old secret, second, opens nothing: %v", got)
			}
			if err := rotated.Add(ctx, "apollo", route("fresh"), "sk-fresh-0123456789abcdef"); err != nil {
				t.Fatal(err)
			}
			if got := keys(old)["apollo/fresh"]; !strings.Contains(got, "another route key secret") {
				t.Fatalf("a key added after the rotation is sealed under the old secret: %q", got)
			}

			v0, _ := rotated.Version(ctx)
			n, err := rotated.Reseal(ctx)
			if err == nil || n != 0 || !strings.Contains(err.Error(), `route "lost" of project "bravo"`) || !strings.Contains(err.Error(), "nothing was re-sealed") {
				t.Fatalf("reseal with a key no secret opens: %d, %v", n, err)
			}
			if got := keys(old); got["/global"] != "sk-global-0123456789abcdef" || got["apollo/team"] != "sk-team-0123456789abcdef" {
				t.Fatalf("a failed reseal moved keys: %v", got)
			}
			if v, _ := rotated.Version(ctx); v != v0 {
				t.Fatalf("a failed reseal moved the version from %d to %d", v0, v)
			}

			if err := rotated.Remove(ctx, "bravo", "lost"); err != nil {
				t.Fatal(err)
			}
			if n, err := rotated.Reseal(ctx); n != 2 || err != nil {
				t.Fatalf("reseal: moved %d, %v; want the two old keys", n, err)
			}
			if n, err := rotated.Reseal(ctx); n != 0 || err != nil {
				t.Fatalf("a second reseal: moved %d, %v", n, err)
			}
			want := map[string]string{"/global": "sk-global-0123456789abcdef", "apollo/team": "sk-team-0123456789abcdef",
				"apollo/keyless": "", "apollo/fresh": "sk-fresh-0123456789abcdef"}
			if got := keys(open(newSecret)); !maps.Equal(got, want) {
				t.Fatalf("under the new secret alone after the reseal: %v, want %v", got, want)
			}
		})
	}
}

// TestSealer: a secret too short is refused; a masked key shows its
// vendor prefix and last four characters, never the rest.
func TestSealer(t *testing.T) {
	if _, err := routestore.NewSealer([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := routestore.NewSealer([]byte(secret + "\nshort")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a short earlier secret: %v", err)
	}
	if _, err := routestore.NewSealer([]byte("\n \n")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("no secret: %v", err)
	}
	for key, want := range map[string]string{
		"":                                     "",
		"tiny-key":                             "••••",
		"sk-ant-api03-abcdefghijklmnopqrstuvw": "sk-ant…tuvw",
		"sk-0123456789abcdefXYZ9":              "sk-…XYZ9",
	} {
		if got := routestore.Mask(key); got != want {
			t.Errorf("Mask(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestLoadSecret: a missing file is made once, with a random secret
// readable by its owner alone, and read back after.
func TestLoadSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "routes.key")
	if _, err := routestore.LoadSecret(path, false); err == nil {
		t.Fatal("a missing file was not an error without create")
	}
	a, err := routestore.LoadSecret(path, true)
	if err != nil || len(a) < routestore.MinSecret {
		t.Fatalf("%q %v", a, err)
	}
	b, err := routestore.LoadSecret(path, true)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("read back %q, made %q (%v)", b, a, err)
	}
	sealer(t, string(a))
}

// TestOpenTogether: replicas that start together each open the store on
// an empty database at once; every one succeeds (on PostgreSQL,
// concurrent CREATE TABLE IF NOT EXISTS can fail without the migration's
// lock).
func TestOpenTogether(t *testing.T) {
	for name, url := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			const n = 8
			errs := make(chan error, n)
			for range n {
				go func() {
					st, err := routestore.Open(ctx, url, sealer(t, secret))
					if err == nil {
						err = st.Close()
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Errorf("open: %v", err)
				}
			}
		})
	}
}

// TestNewFilePageSize checks that a SQLite file the route store makes has
// the engine store's page size: a server opens the route store first, so
// it makes the file the engine then shares.
func TestNewFilePageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "penguin.db")
	st, err := routestore.Open(context.Background(), path, sealer(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var size int
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil || size != 1024 {
		t.Fatalf("page_size %d, %v; want 1024", size, err)
	}
}

// TestOpenWhileAnotherWrites: once its tables are there, the store opens
// and lists its routes while another connection holds the SQLite file's
// write lock, as the engine's migration does while the all-in-one server
// sets both up at once: an open of an existing database only reads.
// Before, its migration and its list took the write lock (BEGIN
// IMMEDIATE) and waited for the other connection until the context's end.
func TestOpenWhileAnotherWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "penguin.db")
	st, err := routestore.Open(t.Context(), path, sealer(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	p := routing.Provider{Name: "team", Type: "openai", BaseURL: "http://127.0.0.1:9/v1", Models: []routing.Model{{ID: "m1"}}}
	if err := st.Add(t.Context(), "", p, ""); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	writer, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer writer.ExecContext(context.Background(), `ROLLBACK`)

	// The bound only ends a wait for the lock, which is the failure.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	st, err = routestore.Open(ctx, path, sealer(t, secret))
	if err != nil {
		t.Fatalf("open while another connection holds the write lock: %v", err)
	}
	defer st.Close()
	routes, _, err := st.List(ctx)
	if err != nil || len(routes) != 1 || routes[0].Provider.Name != "team" {
		t.Fatalf("list while another connection holds the write lock: %+v %v", routes, err)
	}
}
