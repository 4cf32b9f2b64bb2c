package floor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the driver Penguin's store uses
)

// The store's SQLite settings, those of Penguin's writer connection
// (services/engine/store/sqlite.go): WAL, synchronous=NORMAL, IMMEDIATE
// transactions, 1 KiB pages, the automatic checkpoint as a backstop only.
const (
	params = "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate&_pragma=wal_autocheckpoint(10000)&_pragma=journal_size_limit(1048576)&_pragma=page_size(1024)"
	// checkpointEvery is how long writes gather before the background
	// checkpoint, as in Penguin's store.
	checkpointEvery = 250 * time.Millisecond
)

// schema is the part of Penguin's schema that a task writes: the
// sessions with their indexes, the events with the trigger that advances
// their session, the leases. The same tables and indexes make the same
// pages to write. It is a copy of what the store's migrations
// (services/engine/store/migrations.go) leave, as one script: the floor
// is a program apart from Penguin, and the benchmark compares the bytes
// both write a task, which tells when they part.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS sessions (
		id               TEXT    PRIMARY KEY,
		provider         TEXT    NOT NULL DEFAULT '',
		model_id         TEXT    NOT NULL DEFAULT '',
		workspace        TEXT    NOT NULL DEFAULT '',
		agent_state      TEXT    NOT NULL DEFAULT '',
		approval_mode    INTEGER NOT NULL DEFAULT 0,
		thinking_level   INTEGER NOT NULL DEFAULT 0,
		title            TEXT    NOT NULL DEFAULT '',
		parent_id        TEXT    NOT NULL DEFAULT '',
		source           TEXT    NOT NULL DEFAULT '',
		environment_id   TEXT    NOT NULL DEFAULT '',
		environment_addr TEXT    NOT NULL DEFAULT '',
		config           BLOB,
		usage_cache_read  INTEGER NOT NULL DEFAULT 0,
		usage_cache_write INTEGER NOT NULL DEFAULT 0,
		usage_output      INTEGER NOT NULL DEFAULT 0,
		usage_total       INTEGER NOT NULL DEFAULT 0,
		created_at       INTEGER NOT NULL,
		updated_at       INTEGER NOT NULL,
		last_sequence    INTEGER NOT NULL DEFAULT 0,
		usage_reasoning INTEGER NOT NULL DEFAULT 0,
		usage_cost_usd REAL,
		usage_unreported INTEGER NOT NULL DEFAULT 0,
		project_id TEXT NOT NULL DEFAULT 'default')`,
	`CREATE INDEX IF NOT EXISTS sessions_newest ON sessions (created_at DESC, id DESC)`,
	`CREATE INDEX IF NOT EXISTS sessions_parent ON sessions (parent_id) WHERE parent_id <> ''`,
	`CREATE TABLE IF NOT EXISTS events (
		session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
		seq         INTEGER NOT NULL,
		kind        TEXT    NOT NULL,
		payload     BLOB    NOT NULL,
		appended_at INTEGER NOT NULL,
		PRIMARY KEY (session_id, seq))`,
	`CREATE TRIGGER IF NOT EXISTS events_advance_session AFTER INSERT ON events
	BEGIN
		UPDATE sessions SET last_sequence = NEW.seq, updated_at = NEW.appended_at
		WHERE id = NEW.session_id AND last_sequence < NEW.seq;
	END`,
	`CREATE TABLE IF NOT EXISTS leases (
		session_id TEXT    PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
		owner      TEXT    NOT NULL,
		owner_addr TEXT    NOT NULL DEFAULT '',
		expires_at INTEGER NOT NULL)`,
}

// The statements of a task.
const (
	sqlBegin    = `BEGIN IMMEDIATE`
	sqlCommit   = `COMMIT`
	sqlRollback = `ROLLBACK`
	sqlCreate   = `INSERT INTO sessions (id, provider, model_id, workspace, approval_mode, config, created_at, updated_at, project_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'default')`
	sqlEvent   = `INSERT INTO events (session_id, seq, kind, payload, appended_at) VALUES (?, ?, ?, ?, ?)`
	sqlLease   = `INSERT INTO leases (session_id, owner, owner_addr, expires_at) VALUES (?, 'floor', '', ?) ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at`
	sqlTitle   = `UPDATE sessions SET title = ? WHERE id = ? AND title = ''`
	sqlBind    = `UPDATE sessions SET environment_id = ?, environment_addr = ? WHERE id = ?`
	sqlUsage   = `UPDATE sessions SET usage_output = ?, usage_total = ? WHERE id = ?`
	sqlRelease = `DELETE FROM leases WHERE session_id = ?`
	// leaseFor is how long a lease lasts: the task renews nothing, it is
	// over in milliseconds.
	leaseFor = time.Minute
)

// Event is one event of the log, encoded.
type Event struct {
	Seq     int64
	Kind    string
	Payload []byte
}

// Write is one more statement of a commit.
type Write struct {
	Query string
	Args  []any
}

// Store records the floor server's log in SQLite: one connection, every
// write a transaction on it in turn, and a checkpoint of the WAL
// checkpointEvery after the first write since the last, as Penguin's
// store does. It has no readers: the floor never reads its log back.
type Store struct {
	db      *sql.DB
	conn    *sql.Conn
	mu      sync.Mutex // one write at a time on conn
	stmts   map[string]*sql.Stmt
	commits atomic.Int64
	dirty   atomic.Bool
	wake    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
	log     *slog.Logger
}

// OpenStore opens or creates the database at path.
func OpenStore(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	db, err := sql.Open("sqlite", path+"?"+params)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, stmts: map[string]*sql.Stmt{}, wake: make(chan struct{}, 1), done: make(chan struct{}), log: log}
	s.db.SetMaxOpenConns(1)
	fail := func(err error) (*Store, error) {
		_ = s.db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if s.conn, err = s.db.Conn(ctx); err != nil {
		return fail(err)
	}
	for _, q := range schema {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return fail(err)
		}
	}
	for _, q := range []string{sqlBegin, sqlCommit, sqlRollback, sqlCreate, sqlEvent, sqlLease, sqlTitle, sqlBind, sqlUsage, sqlRelease} {
		st, err := s.conn.PrepareContext(ctx, q)
		if err != nil {
			return fail(err)
		}
		s.stmts[q] = st
	}
	cctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.checkpoints(cctx)
	return s, nil
}

// Commits is the number of a task's write transactions committed since
// the store opened (the schema's are not counted).
func (s *Store) Commits() int64 { return s.commits.Load() }

// Close stops the checkpoints and closes the database.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	return errors.Join(s.conn.Close(), s.db.Close())
}

// Create records a session's row and its first event.
func (s *Store) Create(ctx context.Context, sess *session, config []byte, ev Event) error {
	now := sess.created.UnixMicro()
	return s.write(ctx, func(ctx context.Context) error {
		if _, err := s.stmts[sqlCreate].ExecContext(ctx, sess.id, sess.model.GetProvider(), sess.model.GetModelId(),
			sess.workspace, int64(sess.mode), config, now, now); err != nil {
			return err
		}
		return s.events(ctx, sess.id, []Event{ev})
	})
}

// Commit records events and writes in one transaction.
func (s *Store) Commit(ctx context.Context, id string, events []Event, writes ...Write) error {
	return s.write(ctx, func(ctx context.Context) error {
		if err := s.events(ctx, id, events); err != nil {
			return err
		}
		for _, w := range writes {
			st, ok := s.stmts[w.Query]
			if !ok {
				return fmt.Errorf("no statement %q", w.Query)
			}
			if _, err := st.ExecContext(ctx, w.Args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) events(ctx context.Context, id string, events []Event) error {
	st := s.stmts[sqlEvent]
	now := time.Now().UnixMicro()
	for _, e := range events {
		if _, err := st.ExecContext(ctx, id, e.Seq, e.Kind, e.Payload, now); err != nil {
			return err
		}
	}
	return nil
}

// write runs f in a transaction of its own, in turn: BEGIN IMMEDIATE,
// f's statements and COMMIT, each prepared once on the one connection,
// run with ctx without its cancellation, for which the driver would
// start a goroutine a statement (Penguin's store runs its writes so, see
// services/engine/store/sqlitewriter.go).
func (s *Store) write(ctx context.Context, f func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.stmts[sqlBegin].ExecContext(ctx); err != nil {
		return err
	}
	if err := f(ctx); err != nil {
		_, rerr := s.stmts[sqlRollback].ExecContext(ctx)
		return errors.Join(err, rerr)
	}
	if _, err := s.stmts[sqlCommit].ExecContext(ctx); err != nil {
		_, rerr := s.stmts[sqlRollback].ExecContext(ctx)
		return errors.Join(err, rerr)
	}
	s.commits.Add(1)
	if !s.dirty.Swap(true) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// checkpoints copies the WAL into the database checkpointEvery after the
// first write since the last checkpoint, and starts the WAL over, as
// Penguin's store does.
func (s *Store) checkpoints(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(checkpointEvery):
		}
		if !s.dirty.Swap(false) {
			continue
		}
		s.mu.Lock()
		_, err := s.conn.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`)
		s.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("checkpoint failed", "error", err)
		}
	}
}

// Log is what a floor server's database holds, for the benchmark's
// checks that the floor recorded what it was measured for.
type Log struct {
	// Sessions, Events and Leases are the rows of each table; Titled
	// and Bound the sessions whose task set the title and the
	// environment.
	Sessions, Events, Leases, Titled, Bound int64
	// PayloadBytes is the events' payloads' bytes.
	PayloadBytes int64
}

// ReadLog reads what the database at path holds; the server that wrote
// it has stopped.
func ReadLog(ctx context.Context, path string) (Log, error) {
	db, err := sql.Open("sqlite", path+"?mode=ro")
	if err != nil {
		return Log{}, err
	}
	defer db.Close()
	var l Log
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM sessions), (SELECT count(*) FROM events), (SELECT count(*) FROM leases),
		(SELECT count(*) FROM sessions WHERE title <> ''), (SELECT count(*) FROM sessions WHERE environment_id <> ''),
		(SELECT coalesce(sum(length(payload)), 0) FROM events)`).Scan(&l.Sessions, &l.Events, &l.Leases, &l.Titled, &l.Bound, &l.PayloadBytes)
	return l, err
}
