package routestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/llm/providers"
	"github.com/penguin-agent/penguin/services/llm/routestore"
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

// stores are the two databases the table lives in.
func stores(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":     filepath.Join(t.TempDir(), "routes.db"),
		"postgresql": pgtest.URL(t, "routestore"),
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
			p := providers.Provider{Name: "team", Type: "openai", BaseURL: "http://127.0.0.1:9/v1", Models: []providers.Model{{ID: "m1"}}}
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

func openRaw(t *testing.T, url string) *sql.DB {
	t.Helper()
	driver := "sqlite"
	if strings.HasPrefix(url, "postgres") {
		driver = "pgx"
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

// TestSealer: a secret too short is refused; a masked key shows its
// vendor prefix and last four characters, never the rest.
func TestSealer(t *testing.T) {
	if _, err := routestore.NewSealer([]byte("short")); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("short secret: %v", err)
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
