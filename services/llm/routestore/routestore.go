// Package routestore keeps the provider routes added through the llm
// service's API (AddProvider and kin) in a database every replica reads:
// PostgreSQL for a deployment of several replicas, or a SQLite file for
// one server. The table is the llm service's own, in the database the
// engine uses or any other.
//
// Each route is a providers file entry (its YAML, so the two stay one
// format), the project that owns it (empty for a global route), and its
// API key sealed with AES-256-GCM ([Sealer]): the database alone never
// yields a key. A version row, bumped in the same transaction as every
// change, is what replicas poll to see a change within a second.
package routestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	// PostgreSQL through a pgx pool, which reads the pool settings of the
	// URL (pool_max_conns, as the engine's store does) that pgx's plain
	// database/sql driver would send to the server as unknown parameters;
	// SQLite through modernc's pure-Go driver.
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/internal/sqlitefile"
	"github.com/penguin-agent/penguin/services/llm/routing"
)

// Errors of the store's writes, for the handlers to turn into codes.
var (
	// ErrExists: a route of that project and name is stored already.
	ErrExists = errors.New("a route of that name exists")
	// ErrNotFound: no such route is stored.
	ErrNotFound = errors.New("no such stored route")
)

// Route is one stored route, its key opened.
type Route struct {
	// Project owns the route; empty for a global route.
	Project string
	// Provider is the route; its APIKey is the opened key.
	Provider routing.Provider
	// Err is why the route cannot be used (its key does not open), nil
	// when it can.
	Err error
	// Updated is when it was last written.
	Updated time.Time
}

// Store is the route table. Create it with [Open].
type Store struct {
	db *sql.DB
	// pool is the PostgreSQL pool behind db (nil for SQLite), which
	// closing db leaves open.
	pool   *pgxpool.Pool
	pg     bool
	sealer *Sealer
	// path is the SQLite database file; empty on PostgreSQL.
	path string
}

// Open opens the route table in the database at url (a postgres:// or
// postgresql:// URL, or a SQLite path, "sqlite:PATH" or "file:PATH"),
// creating it when it is missing. Keys are sealed and opened with sealer.
func Open(ctx context.Context, url string, sealer *Sealer) (*Store, error) {
	if sealer == nil {
		return nil, errors.New("routestore: a sealer (the route key secret) is required")
	}
	s := &Store{sealer: sealer}
	var err error
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		s.pg = true
		if s.pool, err = pgxpool.New(ctx, url); err == nil {
			s.db = stdlib.OpenDBFromPool(s.pool)
		}
	case url == "":
		return nil, errors.New("routestore: empty store URL")
	default:
		path, ok := SQLitePath(url)
		if !ok {
			return nil, fmt.Errorf("routestore: unsupported store URL scheme %q (want postgres://, postgresql://, sqlite:, file: or a path)", path[:strings.Index(path, "://")])
		}
		s.path = path
		// synchronous=NORMAL, as the engine's store, whose file this
		// usually is: a commit in WAL mode then costs no fsync (a
		// checkpoint syncs), and a power failure may lose the last
		// commits but never corrupts the file. A server opens this store
		// before the engine's, so a new file is made here: with the
		// engine store's page size (1 KiB, see its package), which a
		// database keeps from its creation on, and in WAL mode already
		// (sqlitefile.Ensure: without SQLite's rollback journal).
		if !strings.ContainsAny(path, "?#") {
			sqlitefile.Ensure(path)
		}
		s.db, err = sql.Open("sqlite", path+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate&_pragma=page_size(1024)")
		// One writer at a time is SQLite's rule anyway; one connection
		// keeps the busy wait in the driver rather than in errors.
		s.db.SetMaxOpenConns(1)
	}
	if err != nil {
		return nil, fmt.Errorf("routestore: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("routestore: %w", err)
	}
	return s, nil
}

// SQLitePath returns the SQLite file a store URL names and true, or
// false when the URL names PostgreSQL or another scheme (path is then the
// URL without a SQLite prefix). A process that also opens the file
// itself, the all-in-one server, looks at it before the store opens.
func SQLitePath(url string) (path string, ok bool) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return url, false
	}
	path = url
	for _, p := range []string{"sqlite://", "sqlite:", "file:"} {
		if rest, ok := strings.CutPrefix(path, p); ok {
			path = rest
			break
		}
	}
	return path, strings.Index(path, "://") <= 0
}

// Close closes the database.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	return err
}

// q writes the query for the database: PostgreSQL's $1 placeholders are
// SQLite's ?1.
func (s *Store) q(query string) string {
	if s.pg {
		return query
	}
	return strings.ReplaceAll(query, "$", "?")
}

// migrateLock is the PostgreSQL advisory lock key the migration holds:
// replicas that start together would otherwise race on CREATE TABLE IF
// NOT EXISTS, which PostgreSQL lets fail with a unique violation.
const migrateLock = 0x70656e67_726f7574 // "pengrout"

// currentQuery reads every column of both tables and the version row,
// which a current schema has: it answers 1 then, and fails or answers 0
// before the migration.
const currentQuery = `SELECT (SELECT count(*) FROM llm_provider_routes_version WHERE id = 1) +
	(SELECT count(*) FROM (SELECT project, name, spec, sealed_key, key_id, updated_ms FROM llm_provider_routes LIMIT 0) AS cols)`

// migrate creates the tables when they are not there yet. It first reads
// whether the schema is current, which it is at every open but a new
// database's first: a read takes no write lock, so an open of an
// existing database waits for no writer (on a server's start, the
// engine's migration of the same SQLite file), and the all-in-one server
// sets the two up at once (internal/assemble). Otherwise it writes the
// tables in one transaction that takes the write lock (on SQLite, the
// store's BEGIN IMMEDIATE) or, on PostgreSQL, migrateLock first, so that
// of two processes opening a new database the second waits for the
// first to commit; its statements create only what is missing, and then
// find it there. On SQLite the statements go as one script, one call
// into the driver.
func (s *Store) migrate(ctx context.Context) error {
	var current int
	if err := s.db.QueryRowContext(ctx, currentQuery).Scan(&current); err == nil && current == 1 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	blob := "BLOB"
	if s.pg {
		blob = "BYTEA"
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return err
		}
	}
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS llm_provider_routes (
			project TEXT NOT NULL,
			name TEXT NOT NULL,
			spec TEXT NOT NULL,
			sealed_key ` + blob + `,
			key_id TEXT NOT NULL DEFAULT '',
			updated_ms BIGINT NOT NULL,
			PRIMARY KEY (project, name))`,
		`CREATE TABLE IF NOT EXISTS llm_provider_routes_version (
			id INTEGER PRIMARY KEY,
			version BIGINT NOT NULL)`,
		`INSERT INTO llm_provider_routes_version (id, version) VALUES (1, 0) ON CONFLICT (id) DO NOTHING`,
	}
	if !s.pg {
		stmts = []string{strings.Join(stmts, ";\n")}
	}
	for _, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// ChangeCheck returns a check that reports whether the table may have
// changed since its previous call, for a poller of Version that need not
// ask the database when nothing was written: on SQLite, a look at the
// stamps of the database file and its write-ahead log, which every
// commit writes, by this process or another (dirstamp.Files); nil on
// PostgreSQL, whose writes other machines make, where the poller asks.
func (s *Store) ChangeCheck() func() bool {
	if s.pg {
		return nil
	}
	return dirstamp.NewFiles(s.path, s.path+"-wal").Changed
}

// Version is the table's version: it changes with every write, so a
// replica that saw the same version has every route.
func (s *Store) Version(ctx context.Context) (int64, error) {
	var v int64
	err := s.db.QueryRowContext(ctx, `SELECT version FROM llm_provider_routes_version WHERE id = 1`).Scan(&v)
	return v, err
}

// List returns every stored route, sorted by project and name, and the
// version it was read at. A route whose key does not open is returned
// with Err set, so one bad row does not hide the others.
func (s *Store) List(ctx context.Context) ([]Route, int64, error) {
	// A read-only transaction: on SQLite a deferred one (BEGIN), which
	// takes no write lock, unlike the store's writes (BEGIN IMMEDIATE);
	// its snapshot begins at its first read, so the version and the rows
	// are of one commit.
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	var version int64
	if err := tx.QueryRowContext(ctx, `SELECT version FROM llm_provider_routes_version WHERE id = 1`).Scan(&version); err != nil {
		return nil, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT project, name, spec, sealed_key, key_id, updated_ms FROM llm_provider_routes ORDER BY project, name`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []Route
	for rows.Next() {
		var (
			r           Route
			name, spec  string
			sealed      []byte
			keyID       string
			updatedMsec int64
		)
		if err := rows.Scan(&r.Project, &name, &spec, &sealed, &keyID, &updatedMsec); err != nil {
			return nil, 0, err
		}
		r.Updated = time.UnixMilli(updatedMsec)
		if err := yaml.Unmarshal([]byte(spec), &r.Provider); err != nil {
			r.Err = fmt.Errorf("its stored spec does not parse: %w", err)
		}
		r.Provider.Name = name
		if r.Err == nil && (r.Provider.APIKeyEnv != "" || r.Provider.APIKeyFile != "") {
			r.Err = errors.New("a stored route takes its key from the store only, never from the server's environment or files")
		}
		if r.Err == nil && len(sealed) > 0 {
			r.Provider.APIKey, r.Err = s.sealer.open(r.Project, name, keyID, sealed)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, version, tx.Commit()
}

// Add stores a new route of project (empty: global) with key (empty:
// none); ErrExists when one of that name is there.
func (s *Store) Add(ctx context.Context, project string, p routing.Provider, key string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		spec, err := specOf(p)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, s.q(`INSERT INTO llm_provider_routes (project, name, spec, sealed_key, key_id, updated_ms)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (project, name) DO NOTHING`),
			project, p.Name, spec, s.sealed(project, p.Name, key), s.keyID(key), time.Now().UnixMilli())
		return affected(res, err, ErrExists)
	})
}

// Update replaces the stored route of project named p.Name; key nil keeps
// its key, "" removes it. ErrNotFound when there is none.
func (s *Store) Update(ctx context.Context, project string, p routing.Provider, key *string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		spec, err := specOf(p)
		if err != nil {
			return err
		}
		var res sql.Result
		if key == nil {
			res, err = tx.ExecContext(ctx, s.q(`UPDATE llm_provider_routes SET spec = $1, updated_ms = $2 WHERE project = $3 AND name = $4`),
				spec, time.Now().UnixMilli(), project, p.Name)
		} else {
			res, err = tx.ExecContext(ctx, s.q(`UPDATE llm_provider_routes SET spec = $1, sealed_key = $2, key_id = $3, updated_ms = $4
				WHERE project = $5 AND name = $6`),
				spec, s.sealed(project, p.Name, *key), s.keyID(*key), time.Now().UnixMilli(), project, p.Name)
		}
		return affected(res, err, ErrNotFound)
	})
}

// Remove deletes the stored route of project called name; ErrNotFound
// when there is none.
func (s *Store) Remove(ctx context.Context, project, name string) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q(`DELETE FROM llm_provider_routes WHERE project = $1 AND name = $2`), project, name)
		return affected(res, err, ErrNotFound)
	})
}

// Reseal moves every stored key that an earlier secret sealed onto the
// sealer's current one (a key rotation's last step), in one transaction,
// and returns how many it moved. When some key opens under none of the
// sealer's secrets it moves none and names them all: nothing is lost, and
// the operator can add the missing secret and try again.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	moved := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		type row struct {
			project, name, keyID string
			sealed               []byte
		}
		rows, err := tx.QueryContext(ctx, s.q(`SELECT project, name, key_id, sealed_key FROM llm_provider_routes
			WHERE sealed_key IS NOT NULL AND key_id <> $1 ORDER BY project, name`), s.sealer.id)
		if err != nil {
			return err
		}
		var old []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.project, &r.name, &r.keyID, &r.sealed); err != nil {
				rows.Close()
				return err
			}
			old = append(old, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var stuck []error
		resealed := make([][]byte, len(old))
		for i, r := range old {
			key, err := s.sealer.open(r.project, r.name, r.keyID, r.sealed)
			if err != nil {
				stuck = append(stuck, fmt.Errorf("route %q of project %q: %w", r.name, r.project, err))
				continue
			}
			resealed[i] = s.sealer.seal(r.project, r.name, key)
		}
		if len(stuck) > 0 {
			return fmt.Errorf("%d stored keys open under none of the given secrets; nothing was re-sealed: %w", len(stuck), errors.Join(stuck...))
		}
		for i, r := range old {
			if _, err := tx.ExecContext(ctx, s.q(`UPDATE llm_provider_routes SET sealed_key = $1, key_id = $2 WHERE project = $3 AND name = $4`),
				resealed[i], s.sealer.id, r.project, r.name); err != nil {
				return err
			}
		}
		moved = len(old)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return moved, nil
}

// write runs f in a transaction that also bumps the version, so that a
// replica polling the version sees the change with it.
func (s *Store) write(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE llm_provider_routes_version SET version = version + 1 WHERE id = 1`); err != nil {
		return err
	}
	return tx.Commit()
}

// sealed is key sealed for the route, or nil for no key.
func (s *Store) sealed(project, name, key string) []byte {
	if key == "" {
		return nil
	}
	return s.sealer.seal(project, name, key)
}

// keyID is the id of the secret a key is sealed under, or "" for no key.
func (s *Store) keyID(key string) string {
	if key == "" {
		return ""
	}
	return s.sealer.id
}

// specOf is the stored form of p: its providers file YAML, which never
// holds the key (Provider.APIKey is not serialised).
func specOf(p routing.Provider) (string, error) {
	p.APIKey = ""
	b, err := yaml.Marshal(p)
	return string(b), err
}

// affected turns a write's result into nil when it changed a row, and
// into none when it changed nothing.
func affected(res sql.Result, err, none error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return none
	}
	return nil
}
