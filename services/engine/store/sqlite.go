package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/sqlitefile"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite settings. WAL lets readers run alongside the one writer; the busy
// timeout covers another process holding the write lock; synchronous=NORMAL
// in WAL mode survives a process crash (the engine being SIGKILLed) with
// every committed transaction intact and costs no fsync per append, at the
// price of possibly losing the last transactions on a power failure.
//
// Checkpoints (copying the WAL into the database file, with an fsync of
// each) are run a few times a second by a goroutine of their own (see
// checkpoints), not by the commit that happens to fill the WAL past
// SQLite's threshold: that commit would otherwise stall a task's event for
// the whole checkpoint, every thousand pages or so. The writer's own
// automatic checkpoint stays as a backstop at ten times the usual size,
// for a WAL the goroutine cannot keep up with. A WAL that grew in a burst
// is cut back to journal_size_limit when it starts over.
//
// A database the store creates has pages of 1 KiB rather than SQLite's
// 4 KiB. The WAL holds whole pages, and a commit of the session log
// changes a few of them (the events' table and index, the session's row)
// by a few hundred bytes each: with 4 KiB pages a task wrote some 134 KiB
// to the WAL and the database file, with 1 KiB pages some 50, for the
// same database size and no measurable CPU (docs/performance.md). The
// page size of an existing database stays what it is.
const (
	sqliteReaders = 4
	// sqliteBusyTimeout is how long, in milliseconds, a connection waits
	// for a lock another connection (or process) holds: the _busy_timeout
	// of the parameters below.
	sqliteBusyTimeout  = 10000
	sqliteWriterParams = "_busy_timeout=10000&_foreign_keys=1&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate&_pragma=wal_autocheckpoint(10000)&_pragma=journal_size_limit(1048576)&_pragma=page_size(1024)"
	sqliteReaderParams = "_busy_timeout=10000&_foreign_keys=1&_query_only=1"
	sqliteMemoryParams = "_busy_timeout=10000&_foreign_keys=1&_txlock=immediate"
	// checkpointEvery is how long the checkpointer lets writes gather
	// after the first one since its last checkpoint.
	checkpointEvery = 250 * time.Millisecond
	// checkpointBusyTimeout is how long, in milliseconds, a checkpoint
	// waits for readers of the WAL's older pages (see checkpoints).
	checkpointBusyTimeout = 50
)

// sqliteStore is the SQLite implementation of Store.
//
// Writes go through exactly one connection, which a file store keeps for
// its life (sqlitewriter.go), so the engine's own writers queue in Go
// instead of contending for SQLite's write lock, and every write
// transaction begins IMMEDIATE so it never has to upgrade a read lock. Reads use a separate pool of read-only connections, which WAL lets
// proceed while a write is in progress. An in-memory database has a single
// connection for both, because every connection to ":memory:" would
// otherwise see its own empty database.
type sqliteStore struct {
	// teamSQL keeps the ownership model's records (teamsql.go).
	*teamSQL
	w *sql.DB
	r *sql.DB
	// wc is a file store's writer connection, taken from w for the
	// store's life, and turn the one write that runs on it at a time
	// (sqlitewriter.go); an in-memory store has neither.
	wc     *sql.Conn
	turn   chan struct{}
	ws, rs *stmtCache // the statements prepared on the writer and on r
	log    *slog.Logger
	// path is the database file's absolute path; empty in memory.
	path   string
	closed atomic.Bool
	// commits counts the write transactions committed (Commits), reads
	// the statements run on the readers (Reads).
	commits, reads atomic.Int64

	// The checkpointer of a database file: whether there were writes
	// since its last checkpoint, its wake at the first of them, how many
	// checkpoints it has run (a test sets the WAL's restarts against
	// them), and how to stop it.
	dirty     atomic.Bool
	ckpts     atomic.Int64
	wake      chan struct{}
	stopCkpt  context.CancelFunc
	ckptEnded chan struct{}
}

// stmtCache keeps the statements run on one pool prepared. Without it
// modernc's driver compiles a statement's SQL anew each time it runs with
// arguments, which was a tenth of the all-in-one server's CPU in the
// end-to-end task benchmark; a *sql.Stmt keeps the compiled statement on
// each connection it ran on, and these pools' connections live as long as
// the store (a file store's writer is one connection). The store's own
// constant queries go through it, and the session patches' statements
// (patch.go), whose text depends only on which columns and config
// members a patch names: the engine's patches name fixed sets of them, so
// the cache holds a few dozen statements at most.
type stmtCache struct {
	db preparer
	// used is called whenever a statement is taken: the writer's cache
	// tells the checkpointer there were writes, the readers' counts the
	// reads.
	used func()
	mu   sync.Mutex
	m    map[string]*sql.Stmt
}

// preparer is where a stmtCache prepares: a pool (*sql.DB) or one
// connection (*sql.Conn).
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func newStmtCache(db preparer, used func()) *stmtCache {
	return &stmtCache{db: db, used: used, m: map[string]*sql.Stmt{}}
}

// stmt returns query prepared, preparing it on first use.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.used()
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (c *stmtCache) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// queryRow runs a query for one row; when it cannot be prepared, the
// unprepared query reports the same error through Scan.
func (c *stmtCache) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return c.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// lookup runs a query that finds at most one row through a key, which
// takes SQLite a few microseconds, without the context's cancellation: a
// context that can end costs the driver a goroutine that watches it for
// every statement, far more than the lookup. A context already ended
// still fails it.
func (c *stmtCache) lookup(ctx context.Context, query string, args ...any) *sql.Row {
	return c.queryRow(uncancelled(ctx), query, args...)
}

// ownedBlob scans a BLOB column into a []byte without database/sql's
// copy. modernc's driver copies each BLOB of each row out of SQLite's
// memory into a slice of its own (conn.columnBlob), which it never
// touches again: database/sql's copy of it into a *[]byte was a second
// one of every record a Run read, some 5.5 KiB a task (a new session's
// log is its session_meta and tool list). TestOwnedBlobsOutliveTheirRows
// checks that the driver still hands over slices of its own.
type ownedBlob []byte

// Scan implements sql.Scanner, keeping the driver's slice.
func (b *ownedBlob) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		*b = v
	case string:
		*b = []byte(v)
	case nil:
		*b = nil
	default:
		return fmt.Errorf("a BLOB column holds %T", src)
	}
	return nil
}

// keepBlob scans a byte column of SQLite's into b as an ownedBlob.
func keepBlob(b *[]byte) any { return (*ownedBlob)(b) }

// uncancelled is ctx without its cancellation for a statement that finds
// its few rows through keys (lookup), unless ctx has ended already.
func uncancelled(ctx context.Context) context.Context {
	if ctx.Err() == nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// ReadForNewSession implements Store, as a lookup: its parts find their
// rows through keys.
func (s *sqliteStore) ReadForNewSession(ctx context.Context, q NewSessionQuery) (*NewSessionRead, error) {
	return s.teamSQL.ReadForNewSession(uncancelled(ctx), q)
}

// close closes the prepared statements.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, st := range c.m {
		errs = append(errs, st.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// openSQLite opens the database file at path, or a private in-memory
// database when path is empty.
func openSQLite(ctx context.Context, path string, o options) (*sqliteStore, error) {
	s := &sqliteStore{log: o.logger, wake: make(chan struct{}, 1)}
	if path == "" {
		db, err := openCountedSQLite(":memory:?"+sqliteMemoryParams, &s.commits)
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		s.w, s.r = db, db
	} else {
		if strings.ContainsAny(path, "?#") {
			return nil, fmt.Errorf("%w: sqlite path %q contains '?' or '#'", ErrInvalid, path)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("%w: sqlite path %q: %v", ErrInvalid, path, err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w: %w", abs, ErrUnavailable, err)
		}
		sqlitefile.Ensure(abs) // a new file whole, without the rollback journal
		w, err := openCountedSQLite(abs+"?"+sqliteWriterParams, &s.commits)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
		}
		w.SetMaxOpenConns(1)
		w.SetMaxIdleConns(1)
		w.SetConnMaxLifetime(0)
		w.SetConnMaxIdleTime(0)
		r, err := sql.Open("sqlite", abs+"?"+sqliteReaderParams)
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", abs, err)
		}
		r.SetMaxOpenConns(sqliteReaders)
		r.SetMaxIdleConns(sqliteReaders)
		s.w, s.r, s.path = w, r, abs
	}
	s.ws, s.rs = newStmtCache(s.w, s.wrote), newStmtCache(s.r, s.read)
	s.teamSQL = sqliteTeams(s)
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if path != "" {
		// The writer's one connection, pinned once the schema is in
		// place (sqlitewriter.go).
		wc, err := s.w.Conn(ctx)
		if err != nil {
			_ = s.Close()
			return nil, s.openErr(ctx, "open sqlite writer", err)
		}
		s.wc, s.turn = wc, make(chan struct{}, 1)
		s.ws = newStmtCache(wc, s.wrote)
		cctx, cancel := context.WithCancel(context.Background())
		s.stopCkpt, s.ckptEnded = cancel, make(chan struct{})
		go s.checkpoints(cctx)
	}
	return s, nil
}

// checkpoints checkpoints the WAL in the background until ctx ends:
// checkpointEvery after the first write since its last checkpoint, so a
// few times a second while there are writes. It waits for that first
// write on the wake channel rather than looking at a ticker, so a server
// at rest is not woken four times a second for nothing.
func (s *sqliteStore) checkpoints(ctx context.Context) {
	defer close(s.ckptEnded)
	gather := time.NewTimer(checkpointEvery)
	gather.Stop()
	defer gather.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		gather.Reset(checkpointEvery)
		select {
		case <-ctx.Done():
			return
		case <-gather.C:
		}
		if !s.dirty.Swap(false) {
			continue // Settle checkpointed them meanwhile
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.checkpoint(cctx)
		cancel()
		s.ckpts.Add(1)
		if err != nil && ctx.Err() == nil {
			// The writer's automatic checkpoint is the backstop.
			s.log.Warn("background checkpoint of the SQLite WAL failed", "error", err)
		}
	}
}

// checkpoint copies the WAL into the database file and starts it over.
//
// It runs on the writer's connection, in a write's turn between two
// others, so no commit appends to the WAL while it copies (writes wait
// their turn meanwhile, as they wait for each other). A RESTART checkpoint then
// waits for the readers of the WAL's older pages to finish, so that the
// next commit writes the WAL from its beginning again. A PASSIVE
// checkpoint on a connection of its own, as before, almost never caught
// the WAL whole while tasks ran, and the WAL grew by every page written:
// 186 KiB a task in the end-to-end benchmark (docs/performance.md). The
// wait for readers is bounded by a short busy timeout: a checkpoint that
// cannot outwait a long reader copies what it can, and the next one tries
// again.
func (s *sqliteStore) checkpoint(ctx context.Context) (err error) {
	t, err := s.beginWrite(ctx, false)
	if err != nil {
		return err
	}
	defer t.release()
	if _, err := s.wc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", checkpointBusyTimeout)); err != nil {
		return err
	}
	_, err = s.wc.ExecContext(ctx, `PRAGMA wal_checkpoint(RESTART)`)
	if _, rerr := s.wc.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("PRAGMA busy_timeout = %d", sqliteBusyTimeout)); rerr != nil {
		return errors.Join(err, fmt.Errorf("restore the writer's busy timeout: %w", rerr))
	}
	return err
}

// read counts a statement run on the readers.
func (s *sqliteStore) read() { s.reads.Add(1) }

// Reads implements ReadCounter.
func (s *sqliteStore) Reads() int64 { return s.reads.Load() }

// wrote notes a write for the checkpointer, and wakes it at the first
// write since its last checkpoint.
func (s *sqliteStore) wrote() {
	if !s.dirty.Swap(true) {
		select {
		case s.wake <- struct{}{}:
		default: // a wake is already pending
		}
	}
}

// Settle implements Settler: it checkpoints now what the writes so far
// left in the WAL, which the background checkpointer would do within
// checkpointEvery. A failed checkpoint is left to the checkpointer.
func (s *sqliteStore) Settle(ctx context.Context) error {
	if s.stopCkpt == nil || !s.dirty.Swap(false) {
		return nil // in memory, or nothing written since the last checkpoint
	}
	err := s.checkpoint(ctx)
	if err != nil {
		s.wrote() // still to checkpoint
	}
	return err
}

// migrate brings the schema up to date inside one IMMEDIATE transaction,
// which also serializes two processes opening the same file. A new
// database (at version 0) gets its whole schema as one script
// (schemaScript), which SQLite runs statement after statement inside the
// driver: a new home's first start no longer pays a round trip through
// the driver for each of some fifty statements. A database at an earlier
// version is brought up one statement at a time, as before.
func (s *sqliteStore) migrate(ctx context.Context) (err error) {
	const op = "migrate sqlite schema"
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.openErr(ctx, op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return s.openErr(ctx, op, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, currentVersionQuery).Scan(&current); err != nil {
		return s.openErr(ctx, op, err)
	}
	if current == 0 {
		if _, err := tx.ExecContext(ctx, schemaScript(sqliteMigrations(), time.Now().UnixMicro())); err != nil {
			return s.openErr(ctx, op, err)
		}
	} else if err := applyMigrations(ctx, op, current, sqliteMigrations(),
		func(ctx context.Context, stmt string) error {
			_, err := tx.ExecContext(ctx, stmt)
			return err
		},
		func(ctx context.Context, version int) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				version, time.Now().UnixMicro())
			return err
		},
		s.wrap); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.openErr(ctx, op, err)
	}
	return nil
}

// openErr classifies a failure while opening: whatever the cause, the store
// could not be brought up, so it is ErrUnavailable.
func (s *sqliteStore) openErr(ctx context.Context, op string, err error) error {
	werr := s.wrap(ctx, op, err)
	if errors.Is(werr, ErrUnavailable) {
		return werr
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, werr)
}

// wrap turns a driver error into the store's error vocabulary.
func (s *sqliteStore) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return closedError(op)
	}
	if e := ctxError(ctx, op, err); e != nil {
		return e
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_NOLFS,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isForeignKeyError reports whether err is a foreign key violation.
func isForeignKeyError(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// scanSQLiteSession reads one row of sessionColumns; times are stored as
// INTEGER microseconds.
func scanSQLiteSession(sc scanner) (*Session, error) {
	return scanSession(sc, func(us int64) time.Time { return time.UnixMicro(us).UTC() })
}

// sqliteInsertSession inserts a new session's row unless its id is taken.
const sqliteInsertSession = `INSERT INTO sessions (` + sessionColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
	ON CONFLICT (id) DO NOTHING`

// CreateSession implements Store. With first events, the row and the
// events are one IMMEDIATE transaction.
func (s *sqliteStore) CreateSession(ctx context.Context, sess *Session, first ...Event) (err error) {
	const op = "create session"
	if sess == nil {
		return fmt.Errorf("%s: %w: nil session", op, ErrInvalid)
	}
	if err := checkID("session id", sess.ID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var enc []encodedEvent
	if len(first) > 0 {
		var buf *[]byte
		if enc, buf, err = encodeEvents(sess.ID, first); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		defer releaseBuffer(buf)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	created := sess.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	created = toMicros(created)
	u := sess.Usage
	if u == nil {
		u = &penguinv1.TokenCounts{}
	}
	args := []any{sess.ID, sess.Provider, sess.ModelID, sess.Workspace, sess.AgentState,
		int32(sess.ApprovalMode), int32(sess.ThinkingLevel),
		sess.Title, sess.ParentID, sess.Source, sess.EnvironmentID, sess.EnvironmentAddr, nilIfEmpty(sess.Config),
		u.GetCacheRead(), u.GetCacheWrite(), u.GetOutput(), u.GetTotal(),
		created.UnixMicro(), created.UnixMicro(),
		u.GetReasoning(), costOf(u), u.GetUnreported(), projectOf(sess)}
	// Prepared before the transaction takes an in-memory store's one
	// connection, which preparing needs too.
	ins, err := s.ws.stmt(ctx, sqliteInsertSession)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	var insEvents eventInserts
	if len(enc) > 0 {
		if insEvents, err = s.prepareEventInserts(ctx, len(enc)); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	updated, last := created, int64(0)
	err = s.write(ctx, op, len(enc) > 0, func(t *writeTx) error {
		res, err := t.stmt(ins).ExecContext(t.ctx, args...)
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return s.wrap(ctx, op, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w: session %s already exists", op, ErrConflict, sess.ID)
		}
		if len(enc) == 0 {
			return nil
		}
		now := time.Now().UnixMicro()
		if err := s.insertEvents(ctx, insEvents, t, sess.ID, projectOf(sess), enc, now); err != nil {
			return err
		}
		updated, last = time.UnixMicro(now).UTC(), enc[len(enc)-1].seq
		return nil
	})
	if err != nil {
		return err
	}
	sess.CreatedAt, sess.UpdatedAt, sess.LastSequence, sess.ProjectID = created, updated, last, projectOf(sess)
	return nil
}

// sqliteGetSession reads a session's row.
const sqliteGetSession = `SELECT ` + sessionColumns + ` FROM sessions WHERE id = ?`

// GetSession implements Store.
func (s *sqliteStore) GetSession(ctx context.Context, id string) (*Session, error) {
	const op = "get session"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	sess, err := scanSQLiteSession(s.rs.lookup(ctx, sqliteGetSession, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return sess, nil
}

// sqliteGetSessionAccess reads a session's row and the membership of a
// user (the first argument) in its project.
var sqliteGetSessionAccess = `SELECT ` + sessionColumns + `, m.member_role, m.member_since` +
	fmt.Sprintf(sessionAccessJoin, "?", "?")

// GetSessionAccess implements Store.
func (s *sqliteStore) GetSessionAccess(ctx context.Context, id, userID string) (*Session, *Member, error) {
	const op = "get session"
	if s.closed.Load() {
		return nil, nil, closedError(op)
	}
	sess, m, err := scanSessionAccess(s.rs.lookup(ctx, sqliteGetSessionAccess, userID, id), userID, scanSQLiteSession)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	if err != nil {
		return nil, nil, s.wrap(ctx, op, err)
	}
	return sess, m, nil
}

// ListSessions implements Store.
func (s *sqliteStore) ListSessions(ctx context.Context, pageSize int, pageToken string, projects ...string) ([]*Session, string, error) {
	const op = "list sessions"
	n := normalizePageSize(pageSize)
	if s.closed.Load() {
		return nil, "", closedError(op)
	}
	c := cursor{createdAt: time.UnixMicro(1 << 62).UTC()}
	if pageToken != "" {
		var cerr error
		if c, cerr = decodeCursor(pageToken); cerr != nil {
			return nil, "", fmt.Errorf("%s: %w", op, cerr)
		}
	}
	// Without projects every session is listed; with them, a JSON array
	// of their ids keeps the statement's text (and its prepared form)
	// the same for any number of them.
	var (
		rows *sql.Rows
		err  error
	)
	if projects == nil {
		rows, err = s.rs.query(ctx, `SELECT `+sessionColumns+` FROM sessions
			WHERE (created_at, id) < (?, ?)
			ORDER BY created_at DESC, id DESC LIMIT ?`, c.createdAt.UnixMicro(), c.id, n+1)
	} else {
		ids, jerr := json.Marshal(projects)
		if jerr != nil {
			return nil, "", fmt.Errorf("%s: %w: %v", op, ErrInvalid, jerr)
		}
		rows, err = s.rs.query(ctx, `SELECT `+sessionColumns+` FROM sessions
			WHERE (created_at, id) < (?, ?) AND project_id IN (SELECT value FROM json_each(?))
			ORDER BY created_at DESC, id DESC LIMIT ?`, c.createdAt.UnixMicro(), c.id, string(ids), n+1)
	}
	if err != nil {
		return nil, "", s.wrap(ctx, op, err)
	}
	defer rows.Close()
	out, err := collectSessions(rows, scanSQLiteSession)
	if err != nil {
		return nil, "", s.wrap(ctx, op, err)
	}
	return pageOf(out, n)
}

// sqliteUpdateSession writes every column of a session's metadata that
// UpdateSession may change; its arguments are sqliteUpdateArgs.
const sqliteUpdateSession = `UPDATE sessions SET
		provider = ?, model_id = ?, workspace = ?, agent_state = ?, approval_mode = ?, thinking_level = ?,
		title = ?, parent_id = ?, source = ?, environment_id = ?, environment_addr = ?, config = ?,
		usage_cache_read = ?, usage_cache_write = ?, usage_output = ?, usage_total = ?,
		usage_reasoning = ?, usage_cost_usd = ?, usage_unreported = ?
	WHERE id = ?`

func sqliteUpdateArgs(sess *Session) []any {
	u := sess.Usage
	return []any{
		sess.Provider, sess.ModelID, sess.Workspace, sess.AgentState, int32(sess.ApprovalMode), int32(sess.ThinkingLevel),
		sess.Title, sess.ParentID, sess.Source, sess.EnvironmentID, sess.EnvironmentAddr, nilIfEmpty(sess.Config),
		u.GetCacheRead(), u.GetCacheWrite(), u.GetOutput(), u.GetTotal(),
		u.GetReasoning(), costOf(u), u.GetUnreported(),
		sess.ID,
	}
}

// UpdateSession implements Store.
func (s *sqliteStore) UpdateSession(ctx context.Context, sess *Session) error {
	const op = "update session"
	if sess == nil {
		return fmt.Errorf("%s: %w: nil session", op, ErrInvalid)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	return s.write(ctx, op, false, func(t *writeTx) error {
		res, err := t.exec(sqliteUpdateSession, sqliteUpdateArgs(sess)...)
		return s.updated(ctx, op, sess.ID, res, err)
	})
}

// updated explains the outcome of a statement on one session's row
// (sqliteUpdateSession, a delete): ErrNotFound when there was none.
func (s *sqliteStore) updated(ctx context.Context, op, id string, res sql.Result, err error) error {
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.wrap(ctx, op, err)
	} else if n == 0 {
		return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	return nil
}

// ModifySession implements Store. The read and the write are one
// transaction on the writer's connection, which holds SQLite's write lock
// from its start (IMMEDIATE), so no other write comes between them.
func (s *sqliteStore) ModifySession(ctx context.Context, id string, f func(*Session) error) error {
	return s.WriteSession(ctx, id, SessionWrite{Modify: f})
}

// WriteSession implements Store: one IMMEDIATE transaction on the
// writer's connection.
func (s *sqliteStore) WriteSession(ctx context.Context, id string, w SessionWrite) (err error) {
	op := "write session"
	if len(w.Events) == 0 && w.ReleaseLease == "" && w.Claim == nil {
		op = "modify session"
	}
	if c := w.Claim; c != nil {
		if err := checkLease(id, c.Owner, c.TTL); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	var enc []encodedEvent
	if len(w.Events) > 0 {
		var buf *[]byte
		if enc, buf, err = encodeEvents(id, w.Events); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		defer releaseBuffer(buf)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	// Prepared before the transaction takes the one write connection,
	// which preparing needs too.
	var ins eventInserts
	var get, upd, rel *sql.Stmt
	if len(enc) > 0 {
		if ins, err = s.prepareEventInserts(ctx, len(enc)); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	if w.Modify != nil {
		if get, err = s.ws.stmt(ctx, sqliteGetSession); err != nil {
			return s.wrap(ctx, op, err)
		}
		if upd, err = s.ws.stmt(ctx, sqliteUpdateSession); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	var patch *sql.Stmt
	var patchArgs []any
	if w.Patch != nil {
		var q string
		if q, patchArgs, err = patchSession(id, w.Patch, sqliteParam, sqliteConfigPatch); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if patch, err = s.ws.stmt(ctx, q); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	if w.ReleaseLease != "" {
		if rel, err = s.ws.stmt(ctx, sqliteReleaseLease); err != nil {
			return s.wrap(ctx, op, err)
		}
	}
	// A patch on its own is one statement, atomic without a transaction.
	tx := len(enc) > 0 || w.Modify != nil || w.ReleaseLease != "" || w.Claim != nil
	return s.write(ctx, op, tx, func(t *writeTx) error {
		if c := w.Claim; c != nil {
			if err := s.claimLease(ctx, op, t, id, c); err != nil {
				return err
			}
		}
		if err := s.insertEvents(ctx, ins, t, id, "", enc, time.Now().UnixMicro()); err != nil {
			return err
		}
		if w.Modify != nil {
			sess, err := scanSQLiteSession(t.stmt(get).QueryRowContext(t.ctx, id))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
			}
			if err != nil {
				return s.wrap(ctx, op, err)
			}
			if err := w.Modify(sess); err != nil {
				return err
			}
			sess.ID = id
			res, err := t.stmt(upd).ExecContext(t.ctx, sqliteUpdateArgs(sess)...)
			if err := s.updated(ctx, op, id, res, err); err != nil {
				return err
			}
		}
		if patch != nil {
			res, err := t.stmt(patch).ExecContext(t.ctx, patchArgs...)
			if err := s.updated(ctx, op, id, res, err); err != nil {
				return err
			}
		}
		if w.ReleaseLease != "" {
			if _, err := t.stmt(rel).ExecContext(t.ctx, id, w.ReleaseLease); err != nil {
				return s.wrap(ctx, op, err)
			}
		}
		return nil
	})
}

// sqliteParam is SQLite's placeholder of a statement's nth argument.
func sqliteParam(n int) string { return "?" + strconv.Itoa(n) }

// DeleteSession implements Store. The events, quarantined records and lease
// go with the session through ON DELETE CASCADE, and in the same
// transaction the shared parts of its project that no record refers to
// any more (sqliteCollectShared).
func (s *sqliteStore) DeleteSession(ctx context.Context, id string) error {
	const op = "delete session"
	if s.closed.Load() {
		return closedError(op)
	}
	return s.write(ctx, op, true, func(t *writeTx) error {
		var project string
		err := t.queryRow(`DELETE FROM sessions WHERE id = ? RETURNING project_id`, id).Scan(&project)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
		}
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		_, err = t.exec(sqliteCollectShared, project)
		return s.wrap(ctx, op, err)
	})
}

// sqliteCollectShared deletes the shared parts of a project that no
// record refers to. It looks at all of the project's parts, not only
// those of the session deleted, so that parts left behind by a session
// deleted without it (by a replica older than the shared parts) go at
// the project's next deletion.
const sqliteCollectShared = `DELETE FROM shared_payloads WHERE project_id = ?
	AND NOT EXISTS (SELECT 1 FROM events WHERE shared = shared_payloads.digest)
	AND NOT EXISTS (SELECT 1 FROM torn_events WHERE shared = shared_payloads.digest)`

// sqliteInsertEventsMax bounds the events one INSERT carries: four
// variables each, far below SQLite's limit on a statement's variables, and
// few statements to prepare and keep.
const sqliteInsertEventsMax = 16

// sqliteInsertEvents holds, at index n, the statement that inserts n
// events (?1 is the session, ?2 the time, then each event's sequence,
// kind, body and shared part's key). Each event is inserted if, and only if, its sequence
// is above the session's last one; the events_advance_session trigger
// then moves the session's last_sequence and updated_at in the same
// statement. The guard and the insert are one statement, and SQLite runs
// one write at a time, so of two appends of the same sequence exactly one
// inserts a row. Sequences increase strictly within an append, so the
// events refused are those at or below the last sequence before it, the
// first of them among them: an append whose first event is above the
// last is inserted whole.
var sqliteInsertEvents = func() []string {
	out := make([]string, sqliteInsertEventsMax+1)
	out[1] = `INSERT INTO events (session_id, seq, kind, body, shared, appended_at)
	SELECT ?1, ?3, ?4, ?5, ?6, ?2
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1 AND last_sequence < ?3)`
	for n := 2; n <= sqliteInsertEventsMax; n++ {
		var b strings.Builder
		b.WriteString(`INSERT INTO events (session_id, seq, kind, body, shared, appended_at)
	SELECT ?1, e.column1, e.column2, e.column3, e.column4, ?2 FROM (VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(?%d, ?%d, ?%d, ?%d)", 3+4*i, 4+4*i, 5+4*i, 6+4*i)
		}
		b.WriteString(`) AS e
	WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1 AND last_sequence < e.column1)`)
		out[n] = b.String()
	}
	return out
}()

// eventInserts are the prepared statements that insert one append's
// events: full inserts sqliteInsertEventsMax of them, rest the remainder.
type eventInserts struct{ full, rest *sql.Stmt }

// prepareEventInserts prepares the statements that insert n events. It
// runs before a transaction takes the one write connection, which
// preparing needs too.
func (s *sqliteStore) prepareEventInserts(ctx context.Context, n int) (p eventInserts, err error) {
	if n >= sqliteInsertEventsMax {
		if p.full, err = s.ws.stmt(ctx, sqliteInsertEvents[sqliteInsertEventsMax]); err != nil {
			return p, err
		}
	}
	if r := n % sqliteInsertEventsMax; r > 0 {
		p.rest, err = s.ws.stmt(ctx, sqliteInsertEvents[r])
	}
	return p, err
}

// AppendEvents implements Store. An append that fits one statement and
// needs no transaction, a single event without a shared part, is one
// autocommit statement; a batch, or an event with a shared part to
// store beside it, runs its statements inside one IMMEDIATE transaction
// and rolls back if any of its events is refused.
func (s *sqliteStore) AppendEvents(ctx context.Context, sessionID string, events ...Event) (err error) {
	const op = "append events"
	if len(events) == 0 {
		return nil
	}
	enc, buf, err := encodeEvents(sessionID, events)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer releaseBuffer(buf)
	if s.closed.Load() {
		return closedError(op)
	}
	now := time.Now().UnixMicro()
	ins, err := s.prepareEventInserts(ctx, len(enc))
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	return s.write(ctx, op, len(enc) > 1 || hasShared(enc), func(t *writeTx) error {
		return s.insertEvents(ctx, ins, t, sessionID, "", enc, now)
	})
}

// insertEvents inserts enc with ins (prepareEventInserts(len(enc))) in
// the write t, a transaction unless enc is one event without a shared
// part, and explains a refusal. The shared parts go first, keyed for the
// session's project: project, or the session's own when it is empty.
func (s *sqliteStore) insertEvents(ctx context.Context, ins eventInserts, t *writeTx, sessionID, project string, enc []encodedEvent, now int64) error {
	const op = "append events"
	if hasShared(enc) {
		if err := storeShared(ctx, sessionID, project, enc, func(project *string) error {
			return t.queryRow(`SELECT project_id FROM sessions WHERE id = ?`, sessionID).Scan(project)
		}, sql.ErrNoRows, func(key []byte, project string, body []byte) error {
			_, err := t.exec(`INSERT INTO shared_payloads (digest, project_id, body) VALUES (?, ?, ?)
				ON CONFLICT (digest) DO NOTHING`, key, project, body)
			return err
		}, s.wrap); err != nil {
			return err
		}
	}
	args := make([]any, 0, 2+4*min(len(enc), sqliteInsertEventsMax))
	for len(enc) > 0 {
		chunk, st := enc, ins.rest
		if len(enc) >= sqliteInsertEventsMax {
			chunk, st = enc[:sqliteInsertEventsMax], ins.full
		}
		enc = enc[len(chunk):]
		args = append(args[:0], sessionID, now)
		for _, e := range chunk {
			args = append(args, e.seq, e.kind, e.payload, e.key)
		}
		res, err := t.stmt(st).ExecContext(t.ctx, args...)
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		if n == int64(len(chunk)) {
			continue
		}
		if n > 0 {
			// The chunk's first events were refused and the rest
			// inserted (and rolled back with tx): the session's last
			// sequence was the last refused one or above it, below the
			// first inserted one.
			return fmt.Errorf("%s: %w: session %s: sequences %d to %d are not above the last sequence", op, ErrConflict, sessionID, chunk[0].seq, chunk[len(chunk)-int(n)-1].seq)
		}
		var have int64
		err = t.queryRow(`SELECT last_sequence FROM sessions WHERE id = ?`, sessionID).Scan(&have)
		return refusedAppend(ctx, sessionID, chunk[0].seq, have, err, sql.ErrNoRows, s.wrap)
	}
	return nil
}

// sqliteReadEvents reads a page of a session's log, each event with the
// shared part it refers to, of the session's own project.
const sqliteReadEvents = `SELECT e.seq, e.kind, e.body, e.shared IS NOT NULL, p.body FROM events AS e
		LEFT JOIN shared_payloads AS p ON p.digest = e.shared
			AND p.project_id = (SELECT project_id FROM sessions WHERE id = ?1)
		WHERE e.session_id = ?1 AND e.seq > ?2 ORDER BY e.seq LIMIT ?3`

// ReadEvents implements Store.
func (s *sqliteStore) ReadEvents(ctx context.Context, sessionID string, afterSequence int64, limit int) ([]Event, error) {
	const op = "read events"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	lim := int64(limit)
	if limit <= 0 {
		lim = -1 // SQLite: no limit
	}
	rows, err := s.rs.query(ctx, sqliteReadEvents, sessionID, afterSequence, lim)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	raw, err := collectEvents(rows, keepBlob)
	_ = rows.Close()
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	if len(raw) == 0 {
		var one int
		err := s.rs.lookup(ctx, `SELECT 1 FROM sessions WHERE id = ?`, sessionID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		}
		if err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		return []Event{}, nil
	}
	return s.decodeLog(ctx, sessionID, raw)
}

// decodeLog decodes the records of a session's log read in order, a torn
// last one handled as tornRecord describes.
func (s *sqliteStore) decodeLog(ctx context.Context, sessionID string, raw []storedEvent) ([]Event, error) {
	out, err := decodeEvents(sessionID, raw, func(seq int64, cause error) error {
		return s.tornRecord(ctx, sessionID, seq, cause)
	})
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}

// tornRecord handles a record that does not decode as handleTornRecord
// describes.
func (s *sqliteStore) tornRecord(ctx context.Context, sessionID string, seq int64, cause error) error {
	return handleTornRecord(ctx, s.log, sessionID, seq, cause, func() (bool, error) {
		var later bool
		s.read()
		err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE session_id = ? AND seq > ?)`,
			sessionID, seq).Scan(&later)
		return later, s.wrap(ctx, "read events", err)
	}, func() error {
		return s.quarantine(ctx, sessionID, seq)
	})
}

// quarantine moves the session's last record seq into torn_events, only
// if it is still the last.
func (s *sqliteStore) quarantine(ctx context.Context, sessionID string, seq int64) error {
	t, err := s.beginWrite(ctx, true)
	if err != nil {
		return err
	}
	const isLast = `NOT EXISTS (SELECT 1 FROM events AS later WHERE later.session_id = ? AND later.seq > ?)`
	if _, err := t.exec(`INSERT OR REPLACE INTO torn_events (session_id, seq, kind, payload, shared, quarantined_at)
		SELECT session_id, seq, kind, body, shared, ? FROM events WHERE session_id = ? AND seq = ? AND `+isLast,
		time.Now().UnixMicro(), sessionID, seq, sessionID, seq); err != nil {
		_ = t.Rollback()
		return err
	}
	if _, err := t.exec(`DELETE FROM events WHERE session_id = ? AND seq = ? AND `+isLast,
		sessionID, seq, sessionID, seq); err != nil {
		_ = t.Rollback()
		return err
	}
	return t.Commit()
}

// AcquireLease implements Store. SQLite lives on one machine, so the
// process clock is the database's clock.
func (s *sqliteStore) AcquireLease(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, error) {
	taken, _, err := s.acquireLease(ctx, sessionID, owner, ownerAddr, ttl, false)
	return taken, err
}

// AcquireLeaseRead implements LeaseReader: the lease's statement, the
// row's and the log's are one IMMEDIATE transaction on the writer's
// connection, which takes no lock that the lease's write does not, and
// finds the pages it reads in its cache. The log's records are decoded
// once the transaction has ended, so a torn one is handled as ReadEvents
// handles it.
func (s *sqliteStore) AcquireLeaseRead(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, *LeaseRead, error) {
	return s.acquireLease(ctx, sessionID, owner, ownerAddr, ttl, true)
}

// acquireLease takes the lease, and with read also reads the session's
// row and its log, when short, once the lease is taken.
func (s *sqliteStore) acquireLease(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration, read bool) (bool, *LeaseRead, error) {
	const op = "acquire lease"
	if err := checkLease(sessionID, owner, ttl); err != nil {
		return false, nil, fmt.Errorf("%s: %w", op, err)
	}
	if s.closed.Load() {
		return false, nil, closedError(op)
	}
	var get, events *sql.Stmt
	if read {
		// Prepared before the transaction takes the one write
		// connection, which preparing needs too.
		var err error
		if get, err = s.ws.stmt(ctx, sqliteGetSession); err != nil {
			return false, nil, s.wrap(ctx, op, err)
		}
		if events, err = s.ws.stmt(ctx, sqliteReadEvents); err != nil {
			return false, nil, s.wrap(ctx, op, err)
		}
	}
	now := time.Now()
	var (
		lr  *LeaseRead
		raw []storedEvent
	)
	taken := false
	err := s.write(ctx, op, read, func(t *writeTx) error {
		var got string
		err := t.queryRow(sqliteTakeLease, sessionID, owner, ownerAddr, now.Add(ttl).UnixMicro(), now.UnixMicro()).Scan(&got)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case isForeignKeyError(err):
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		case err != nil:
			return s.wrap(ctx, op, err)
		}
		taken = true
		if !read {
			return nil
		}
		// The lease's foreign key says the row is there.
		row, err := scanSQLiteSession(t.stmt(get).QueryRowContext(t.ctx, sessionID))
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		lr = &LeaseRead{Row: row}
		raw, err = t.shortLog(events, sessionID)
		return s.wrap(ctx, op, err)
	})
	if err != nil || lr == nil || len(raw) > LeaseReadEvents {
		return taken, lr, err
	}
	if lr.Log, err = s.decodeLog(ctx, sessionID, raw); err != nil {
		// The log is left to ReadEvents, which meets the same record.
		return taken, lr, nil
	}
	lr.Whole = true
	return taken, lr, nil
}

// sqliteTakeLease takes a session's lease for an owner when it is free,
// expired or the owner's already, and returns the owner then; no row
// while another owner holds it.
const sqliteTakeLease = `INSERT INTO leases (session_id, owner, owner_addr, expires_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (session_id) DO UPDATE SET
		owner = excluded.owner, owner_addr = excluded.owner_addr, expires_at = excluded.expires_at
	WHERE leases.owner = excluded.owner OR leases.expires_at <= ?
	RETURNING owner`

// claimLease takes a write's claimed lease (SessionWrite.Claim) in its
// transaction t, before anything else is written: ErrLeaseTaken when
// another owner holds it, or when the log has moved since the claimer
// read it (the lease was taken, used and given up in between).
func (s *sqliteStore) claimLease(ctx context.Context, op string, t *writeTx, id string, c *LeaseClaim) error {
	now := time.Now()
	var got string
	err := t.queryRow(sqliteTakeLease, id, c.Owner, c.OwnerAddr, now.Add(c.TTL).UnixMicro(), now.UnixMicro()).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s: %w: session %s", op, ErrLeaseTaken, id)
	case isForeignKeyError(err):
		return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	case err != nil:
		return s.wrap(ctx, op, err)
	}
	var last int64
	if err := t.queryRow(`SELECT last_sequence FROM sessions WHERE id = ?`, id).Scan(&last); err != nil {
		return s.wrap(ctx, op, err)
	}
	if last != c.LastSequence {
		return fmt.Errorf("%s: %w: session %s is at sequence %d, read at %d", op, ErrLeaseTaken, id, last, c.LastSequence)
	}
	return nil
}

// shortLog reads the session's log in the transaction with events (the
// prepared sqliteReadEvents) up to one event more than a lease read holds
// whole: that one more says the log is longer.
func (t *writeTx) shortLog(events *sql.Stmt, sessionID string) ([]storedEvent, error) {
	rows, err := t.stmt(events).QueryContext(t.ctx, sessionID, 0, LeaseReadEvents+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return collectEvents(rows, keepBlob)
}

// PeekLease implements Store: the lease's row, the session's, the model
// settings', the agent's and the log's when short are read in one read
// transaction on the writer's connection (readOnWriter), whose page
// cache holds them, rather than on the readers afterwards. The log's
// records are decoded once the transaction has ended, as
// AcquireLeaseRead decodes them.
func (s *sqliteStore) PeekLease(ctx context.Context, sessionID string, agent AgentRef) (*LeaseRead, error) {
	const op = "peek lease"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	// Prepared before the transaction takes the one write connection,
	// which preparing needs too.
	get, err := s.ws.stmt(ctx, sqliteGetSession)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	events, err := s.ws.stmt(ctx, sqliteReadEvents)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	model, err := s.ws.stmt(ctx, getModelSetting)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	var version *sql.Stmt
	if agent != (AgentRef{}) {
		if version, err = s.ws.stmt(ctx, sqliteGetAgent); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
	}
	lr := &LeaseRead{Agent: agent}
	var raw []storedEvent
	err = s.readOnWriter(ctx, op, func(t *writeTx) error {
		row, err := scanSQLiteSession(t.stmt(get).QueryRowContext(t.ctx, sessionID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		}
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		lr.Row = row
		if err := t.queryRow(`SELECT EXISTS (SELECT 1 FROM leases WHERE session_id = ?)`, sessionID).Scan(&lr.Leased); err != nil {
			return s.wrap(ctx, op, err)
		}
		// The model's settings, read here rather than on the readers
		// afterwards: a failed read leaves them to GetModelSetting,
		// which reports it.
		project := cmp.Or(row.ProjectID, DefaultProject)
		switch ms, err := scanModelSetting(t.stmt(model).QueryRowContext(t.ctx, project, row.Provider, row.ModelID)); {
		case errors.Is(err, sql.ErrNoRows):
			lr.ModelRead = true
		case err == nil:
			lr.Model, lr.ModelRead = ms, true
		}
		// The agent's version, likewise: a failed read leaves it to
		// GetAgent.
		if version != nil {
			var v, updated int64
			switch err := t.stmt(version).QueryRowContext(t.ctx, agent.Project, agent.Name).Scan(&v, &updated); {
			case errors.Is(err, sql.ErrNoRows):
				lr.AgentRead = true
			case err == nil:
				lr.AgentVersion, lr.AgentRead = v, true
			}
		}
		raw, err = t.shortLog(events, sessionID)
		return s.wrap(ctx, op, err)
	})
	if err != nil {
		return nil, err
	}
	if len(raw) <= LeaseReadEvents {
		// A record that does not decode leaves the log to ReadEvents,
		// which meets the same record.
		if log, err := s.decodeLog(ctx, sessionID, raw); err == nil {
			lr.Log, lr.Whole = log, true
		}
	}
	return lr, nil
}

// ReleaseLease implements Store.
func (s *sqliteStore) ReleaseLease(ctx context.Context, sessionID, owner string) error {
	const op = "release lease"
	if s.closed.Load() {
		return closedError(op)
	}
	return s.write(ctx, op, false, func(t *writeTx) error {
		_, err := t.exec(sqliteReleaseLease, sessionID, owner)
		return s.wrap(ctx, op, err)
	})
}

// sqliteReleaseLease gives up an owner's lease on a session.
const sqliteReleaseLease = `DELETE FROM leases WHERE session_id = ? AND owner = ?`

// LeaseHolder implements Store.
func (s *sqliteStore) LeaseHolder(ctx context.Context, sessionID string) (string, string, time.Time, error) {
	const op = "lease holder"
	if s.closed.Load() {
		return "", "", time.Time{}, closedError(op)
	}
	var (
		owner, addr string
		expires     int64
	)
	err := s.rs.lookup(ctx, `SELECT owner, owner_addr, expires_at FROM leases
		WHERE session_id = ? AND expires_at > ?`, sessionID, time.Now().UnixMicro()).Scan(&owner, &addr, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", time.Time{}, fmt.Errorf("%s: %w: no live lease on session %s", op, ErrNotFound, sessionID)
	}
	if err != nil {
		return "", "", time.Time{}, s.wrap(ctx, op, err)
	}
	return owner, addr, time.UnixMicro(expires).UTC(), nil
}

// StaleLeases implements Store.
func (s *sqliteStore) StaleLeases(ctx context.Context, owner string) ([]string, error) {
	const op = "stale leases"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	rows, err := s.rs.query(ctx, `SELECT session_id FROM leases WHERE owner = ? OR expires_at <= ?
		ORDER BY expires_at, session_id`, owner, time.Now().UnixMicro())
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		ids = append(ids, id)
	}
	return ids, s.wrap(ctx, op, rows.Err())
}

// LeaseCutOff implements Store.
func (s *sqliteStore) LeaseCutOff(ctx context.Context, sessionID, owner string) (bool, error) {
	const op = "lease cut off"
	if s.closed.Load() {
		return false, closedError(op)
	}
	var cut bool
	err := s.rs.lookup(ctx, `SELECT EXISTS (SELECT 1 FROM leases
		WHERE session_id = ? AND (owner = ? OR expires_at <= ?))`, sessionID, owner, time.Now().UnixMicro()).Scan(&cut)
	return cut, s.wrap(ctx, op, err)
}

// Now implements Store.
func (s *sqliteStore) Now(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, closedError("now")
	}
	if err := ctx.Err(); err != nil {
		return time.Time{}, fmt.Errorf("now: %w", err)
	}
	return toMicros(time.Now()), nil
}

// Close implements Store.
func (s *sqliteStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopCkpt != nil {
		s.stopCkpt()
		<-s.ckptEnded
	}
	if s.wc != nil {
		// A write under way ends first; one still waiting for its turn
		// then finds the connection closed.
		s.turn <- struct{}{}
		defer func() { <-s.turn }()
	}
	err := errors.Join(s.ws.close(), s.rs.close())
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	// The readers are closed first and the writer checkpoints everything
	// into the database file and truncates the WAL, so a clean stop leaves
	// the database in one file (a read-only connection closing last cannot
	// do that, and left a WAL of several MiB behind).
	const truncate = `PRAGMA wal_checkpoint(TRUNCATE)`
	var cerr error
	if s.wc != nil {
		_, cerr = s.wc.ExecContext(context.Background(), truncate)
		err = errors.Join(err, s.wc.Close())
	} else {
		_, cerr = s.w.Exec(truncate)
	}
	if cerr != nil {
		err = errors.Join(err, fmt.Errorf("checkpoint the WAL at close: %w", cerr))
	}
	return errors.Join(err, s.w.Close())
}
