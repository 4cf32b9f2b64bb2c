package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultPostgresConnectTimeout bounds one connection attempt when the URL
// sets no connect_timeout, so that an unreachable server fails a call whose
// context has no deadline instead of hanging it.
const defaultPostgresConnectTimeout = 10 * time.Second

// pgStore is the PostgreSQL implementation of Store. Several engine
// replicas share one database: every decision that must be atomic across
// replicas (appending a sequence, taking a lease) is a single statement, and
// every time that replicas compare (lease expiry, UpdatedAt) comes from the
// server's clock.
type pgStore struct {
	// teamSQL keeps the ownership model's records (teamsql.go).
	*teamSQL
	pool   *pgxpool.Pool
	log    *slog.Logger
	closed atomic.Bool
}

// openPostgres connects, checks the server answers, and migrates the
// schema.
func openPostgres(ctx context.Context, url string, o options) (*pgStore, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres URL: %v", ErrInvalid, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = defaultPostgresConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w: %w", ErrUnavailable, err)
	}
	s := &pgStore{pool: pool, log: o.logger}
	s.teamSQL = pgTeams(s)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres %s:%d: %w: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, ErrUnavailable, err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		if errors.Is(err, ErrUnavailable) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return s, nil
}

// migrate brings the schema up to date. The transaction-scoped advisory
// lock, keyed by the target schema, makes replicas that start together
// apply each migration exactly once: the second waits for the first to
// commit and then finds nothing left to do.
func (s *pgStore) migrate(ctx context.Context) (err error) {
	const op = "migrate postgres schema"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	var schema *string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return s.wrap(ctx, op, err)
	}
	if schema == nil {
		return fmt.Errorf("%s: no schema of the search_path exists; create it first", op)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('penguin.store.migrate:' || $1::text))`, *schema); err != nil {
		return s.wrap(ctx, op, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return s.wrap(ctx, op, err)
	}
	var current int
	if err := tx.QueryRow(ctx, currentVersionQuery).Scan(&current); err != nil {
		return s.wrap(ctx, op, err)
	}
	if err := applyMigrations(ctx, op, current, postgresMigrations(),
		func(ctx context.Context, stmt string) error {
			_, err := tx.Exec(ctx, stmt)
			return err
		},
		func(ctx context.Context, version int) error {
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version)
			return err
		},
		s.wrap); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

// wrap turns a driver error into the store's error vocabulary. Server
// errors are classified by SQLSTATE; every other driver error (refused or
// lost connections, timeouts, a closed pool) means the server could not be
// reached.
func (s *pgStore) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if s.closed.Load() {
		return closedError(op)
	}
	if e := ctxError(ctx, op, err); e != nil {
		return e
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505": // unique_violation
			return fmt.Errorf("%s: %w: %w", op, ErrConflict, err)
		case pe.Code == "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutdown, cannot connect now
			pe.Code == "53000", pe.Code == "53100", pe.Code == "53300", // resources, disk full, too many connections
			pe.Code == "25006": // read-only transaction (a standby)
			return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrUnavailable, err)
}

// scanPGSession reads one row of sessionColumns; timestamptz columns
// arrive as time.Time.
func scanPGSession(row scanner) (*Session, error) {
	return scanSession(row, time.Time.UTC)
}

// pgConn is what the pool and a transaction both run: the session
// statements that CreateSession runs in a transaction and the others
// alone.
type pgConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateSession implements Store. With first events, the row and the
// events are one transaction.
func (s *pgStore) CreateSession(ctx context.Context, sess *Session, first ...Event) error {
	const op = "create session"
	if sess == nil {
		return fmt.Errorf("%s: %w: nil session", op, ErrInvalid)
	}
	if err := checkID("session id", sess.ID); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var enc []encodedEvent
	if len(first) > 0 {
		var (
			buf *[]byte
			err error
		)
		if enc, buf, err = encodeEvents(sess.ID, first); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		defer releaseBuffer(buf)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	if len(enc) == 0 {
		return s.insertSession(ctx, s.pool, sess)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.insertSession(ctx, tx, sess); err != nil {
			return err
		}
		if err := s.appendEvents(ctx, tx, sess.ID, projectOf(sess), enc); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT updated_at, last_sequence FROM sessions WHERE id = $1`, sess.ID).Scan(&sess.UpdatedAt, &sess.LastSequence)
	})
	if err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
			return err
		}
		return s.wrap(ctx, op, err)
	}
	sess.UpdatedAt = sess.UpdatedAt.UTC()
	return nil
}

// insertSession inserts sess's row on c, and writes what the database
// filled in back into sess.
func (s *pgStore) insertSession(ctx context.Context, c pgConn, sess *Session) error {
	const op = "create session"
	var created *time.Time
	if !sess.CreatedAt.IsZero() {
		t := toMicros(sess.CreatedAt)
		created = &t
	}
	u := sess.Usage
	var stored time.Time
	err := c.QueryRow(ctx, `INSERT INTO sessions (`+sessionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
			COALESCE($18::timestamptz, now()), COALESCE($18::timestamptz, now()), 0, $19, $20, $21, $22)
		ON CONFLICT (id) DO NOTHING
		RETURNING created_at`,
		sess.ID, sess.Provider, sess.ModelID, sess.Workspace, sess.AgentState,
		int32(sess.ApprovalMode), int32(sess.ThinkingLevel),
		sess.Title, sess.ParentID, sess.Source, sess.EnvironmentID, sess.EnvironmentAddr, nilIfEmpty(sess.Config),
		u.GetCacheRead(), u.GetCacheWrite(), u.GetOutput(), u.GetTotal(), created,
		u.GetReasoning(), costOf(u), u.GetUnreported(), projectOf(sess)).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w: session %s already exists", op, ErrConflict, sess.ID)
	}
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	stored = stored.UTC()
	sess.CreatedAt, sess.UpdatedAt, sess.LastSequence, sess.ProjectID = stored, stored, 0, projectOf(sess)
	return nil
}

// pgGetSession reads a session's row.
const pgGetSession = `SELECT ` + sessionColumns + ` FROM sessions WHERE id = $1`

// GetSession implements Store.
func (s *pgStore) GetSession(ctx context.Context, id string) (*Session, error) {
	const op = "get session"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	sess, err := scanPGSession(s.pool.QueryRow(ctx, pgGetSession, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	return sess, nil
}

// pgGetSessionAccess reads a session's row and the membership of a user
// ($1) in its project.
var pgGetSessionAccess = `SELECT ` + sessionColumns + `, m.member_role, m.member_since` +
	fmt.Sprintf(sessionAccessJoin, "$1", "$2")

// GetSessionAccess implements Store.
func (s *pgStore) GetSessionAccess(ctx context.Context, id, userID string) (*Session, *Member, error) {
	const op = "get session"
	if s.closed.Load() {
		return nil, nil, closedError(op)
	}
	sess, m, err := scanSessionAccess(s.pool.QueryRow(ctx, pgGetSessionAccess, userID, id), userID, scanPGSession)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	if err != nil {
		return nil, nil, s.wrap(ctx, op, err)
	}
	return sess, m, nil
}

// ListSessions implements Store.
func (s *pgStore) ListSessions(ctx context.Context, pageSize int, pageToken string, projects ...string) ([]*Session, string, error) {
	const op = "list sessions"
	n := normalizePageSize(pageSize)
	if s.closed.Load() {
		return nil, "", closedError(op)
	}
	var (
		rows pgx.Rows
		err  error
	)
	// A NULL array lists every project's sessions.
	var filter []string
	if projects != nil {
		filter = append([]string{}, projects...)
	}
	if pageToken == "" {
		rows, err = s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
			WHERE ($2::text[] IS NULL OR project_id = ANY($2))
			ORDER BY created_at DESC, id DESC LIMIT $1`, n+1, filter)
	} else {
		c, cerr := decodeCursor(pageToken)
		if cerr != nil {
			return nil, "", fmt.Errorf("%s: %w", op, cerr)
		}
		rows, err = s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
			WHERE (created_at, id) < ($1, $2) AND ($4::text[] IS NULL OR project_id = ANY($4))
			ORDER BY created_at DESC, id DESC LIMIT $3`, c.createdAt, c.id, n+1, filter)
	}
	if err != nil {
		return nil, "", s.wrap(ctx, op, err)
	}
	defer rows.Close()
	out, err := collectSessions(rows, scanPGSession)
	if err != nil {
		return nil, "", s.wrap(ctx, op, err)
	}
	return pageOf(out, n)
}

// pgUpdateSession writes every column of a session's metadata that
// UpdateSession may change; its arguments are pgUpdateArgs.
const pgUpdateSession = `UPDATE sessions SET
		provider = $2, model_id = $3, workspace = $4, agent_state = $5, approval_mode = $6, thinking_level = $7,
		title = $8, parent_id = $9, source = $10, environment_id = $11, environment_addr = $12, config = $13,
		usage_cache_read = $14, usage_cache_write = $15, usage_output = $16, usage_total = $17,
		usage_reasoning = $18, usage_cost_usd = $19, usage_unreported = $20
	WHERE id = $1`

func pgUpdateArgs(sess *Session) []any {
	u := sess.Usage
	return []any{
		sess.ID, sess.Provider, sess.ModelID, sess.Workspace, sess.AgentState, int32(sess.ApprovalMode), int32(sess.ThinkingLevel),
		sess.Title, sess.ParentID, sess.Source, sess.EnvironmentID, sess.EnvironmentAddr, nilIfEmpty(sess.Config),
		u.GetCacheRead(), u.GetCacheWrite(), u.GetOutput(), u.GetTotal(),
		u.GetReasoning(), costOf(u), u.GetUnreported(),
	}
}

// UpdateSession implements Store.
func (s *pgStore) UpdateSession(ctx context.Context, sess *Session) error {
	const op = "update session"
	if sess == nil {
		return fmt.Errorf("%s: %w: nil session", op, ErrInvalid)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	tag, err := s.pool.Exec(ctx, pgUpdateSession, pgUpdateArgs(sess)...)
	return s.updated(ctx, op, sess.ID, tag, err)
}

// updated explains the outcome of pgUpdateSession.
func (s *pgStore) updated(ctx context.Context, op, id string, tag pgconn.CommandTag, err error) error {
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
	}
	return nil
}

// ModifySession implements Store, optimistically: the row is read with
// its xmin (the transaction that last wrote it), and the update applies
// only while xmin is unchanged; when another update came between, the
// row is read again and f runs again. Two round trips, as a GetSession
// and an UpdateSession take, where a transaction holding the row would
// take three.
func (s *pgStore) ModifySession(ctx context.Context, id string, f func(*Session) error) error {
	const op = "modify session"
	if s.closed.Load() {
		return closedError(op)
	}
	for {
		var xmin uint32
		sess, err := scanPGSession(prefixScanner{s.pool.QueryRow(ctx, `SELECT xmin, `+sessionColumns+` FROM sessions WHERE id = $1`, id), []any{&xmin}})
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
		}
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		if err := f(sess); err != nil {
			return err
		}
		sess.ID = id
		tag, err := s.pool.Exec(ctx, pgUpdateSession+` AND xmin = $21`, append(pgUpdateArgs(sess), xmin)...)
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// Changed or deleted since the read: the next read tells which.
	}
}

// WriteSession implements Store: one transaction, in which the row is
// read FOR UPDATE, so that no other update comes between its read and
// its write.
func (s *pgStore) WriteSession(ctx context.Context, id string, w SessionWrite) error {
	const op = "write session"
	var patch string
	var patchArgs []any
	if w.Patch != nil {
		var err error
		if patch, patchArgs, err = patchSession(id, w.Patch, pgParam, pgConfigPatch); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if len(w.Events) == 0 && w.ReleaseLease == "" && w.Claim == nil {
		switch {
		case w.Modify != nil && w.Patch != nil:
		case w.Modify != nil:
			return s.ModifySession(ctx, id, w.Modify)
		case w.Patch != nil:
			// One statement, atomic without a transaction.
			if s.closed.Load() {
				return closedError(op)
			}
			tag, err := s.pool.Exec(ctx, patch, patchArgs...)
			return s.updated(ctx, op, id, tag, err)
		default:
			return nil
		}
	}
	if c := w.Claim; c != nil {
		if err := checkLease(id, c.Owner, c.TTL); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	var enc []encodedEvent
	if len(w.Events) > 0 {
		var (
			buf *[]byte
			err error
		)
		if enc, buf, err = encodeEvents(id, w.Events); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		defer releaseBuffer(buf)
	}
	if s.closed.Load() {
		return closedError(op)
	}
	var modifyErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if c := w.Claim; c != nil {
			if err := s.claimLease(ctx, op, tx, id, c); err != nil {
				return err
			}
		}
		if len(enc) > 0 {
			if err := s.appendEvents(ctx, tx, id, "", enc); err != nil {
				return err
			}
		}
		if w.Modify != nil {
			sess, err := scanPGSession(tx.QueryRow(ctx, pgGetSession+` FOR UPDATE`, id))
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
			}
			if err != nil {
				return s.wrap(ctx, op, err)
			}
			if err := w.Modify(sess); err != nil {
				modifyErr = err
				return err
			}
			sess.ID = id
			tag, err := tx.Exec(ctx, pgUpdateSession, pgUpdateArgs(sess)...)
			if err := s.updated(ctx, op, id, tag, err); err != nil {
				return err
			}
		}
		if w.Patch != nil {
			tag, err := tx.Exec(ctx, patch, patchArgs...)
			if err := s.updated(ctx, op, id, tag, err); err != nil {
				return err
			}
		}
		if w.ReleaseLease != "" {
			if _, err := tx.Exec(ctx, pgReleaseLease, id, w.ReleaseLease); err != nil {
				return s.wrap(ctx, op, err)
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case modifyErr != nil:
		return modifyErr
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict), errors.Is(err, ErrInvalid), errors.Is(err, ErrUnavailable), errors.Is(err, ErrLeaseTaken):
		return err
	}
	return s.wrap(ctx, op, err)
}

// pgParam is PostgreSQL's placeholder of a statement's nth argument.
func pgParam(n int) string { return "$" + strconv.Itoa(n) }

// prefixScanner scans a row whose first columns are first's, followed by
// what the wrapped scanner's caller reads.
type prefixScanner struct {
	row   scanner
	first []any
}

func (p prefixScanner) Scan(dest ...any) error {
	return p.row.Scan(append(p.first[:len(p.first):len(p.first)], dest...)...)
}

// DeleteSession implements Store. The events, quarantined records and lease
// go with the session through ON DELETE CASCADE, and in the same
// transaction the shared parts of its project that no record refers to
// any more (pgCollectShared).
func (s *pgStore) DeleteSession(ctx context.Context, id string) error {
	const op = "delete session"
	if s.closed.Load() {
		return closedError(op)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var project string
		err := tx.QueryRow(ctx, `DELETE FROM sessions WHERE id = $1 RETURNING project_id`, id).Scan(&project)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
		}
		if err != nil {
			return s.wrap(ctx, op, err)
		}
		return s.wrap(ctx, op, pgCollectShared(ctx, tx, project))
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnavailable) {
		return s.wrap(ctx, op, err)
	}
	return err
}

// pgCollectShared deletes the shared parts of a project that no record
// refers to, all of them, as sqliteCollectShared does. It locks them
// first, in a statement of its own: an append that refers to one holds
// its lock until it commits (appendEvents), so the delete, whose
// statement reads anew once the locks are had, sees every event that
// committed a reference meanwhile. An append that comes after the lock
// waits for this transaction and then stores its part anew.
func pgCollectShared(ctx context.Context, tx pgx.Tx, project string) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM shared_payloads WHERE project_id = $1 FOR UPDATE`, project); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM shared_payloads AS p WHERE project_id = $1
		AND NOT EXISTS (SELECT 1 FROM events WHERE shared = p.digest)
		AND NOT EXISTS (SELECT 1 FROM torn_events WHERE shared = p.digest)`, project)
	return err
}

// AppendEvents implements Store. One statement moves last_sequence and
// inserts the events: the UPDATE takes the session row's lock, and a
// concurrent append of the same sequence waits for it, re-checks
// last_sequence < first against the committed row, matches nothing and so
// inserts nothing. One round trip per append, atomic without an explicit
// transaction, unless an event has a shared part to store beside it:
// then the part and the events are one transaction.
func (s *pgStore) AppendEvents(ctx context.Context, sessionID string, events ...Event) error {
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
	if !hasShared(enc) {
		return s.appendEvents(ctx, s.pool, sessionID, "", enc)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.appendEvents(ctx, tx, sessionID, "", enc)
	})
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrUnavailable) {
		return s.wrap(ctx, op, err)
	}
	return err
}

// appendEvents appends encoded events on c (AppendEvents), which is a
// transaction when one of them has a shared part. The shared parts go
// first, keyed for the session's project: project, or the session's own
// when it is empty.
//
// A shared part that is there already is locked (ON CONFLICT DO UPDATE
// locks the row even where its condition updates nothing) until the
// events that refer to it commit: a DeleteSession that would collect it
// as unreferenced meanwhile waits for them and then sees them
// (pgCollectShared).
func (s *pgStore) appendEvents(ctx context.Context, c pgConn, sessionID, project string, enc []encodedEvent) error {
	const op = "append events"
	if hasShared(enc) {
		if err := storeShared(ctx, sessionID, project, enc, func(project *string) error {
			return c.QueryRow(ctx, `SELECT project_id FROM sessions WHERE id = $1`, sessionID).Scan(project)
		}, pgx.ErrNoRows, func(key []byte, project string, body []byte) error {
			_, err := c.Exec(ctx, `INSERT INTO shared_payloads (digest, project_id, body) VALUES ($1, $2, $3)
				ON CONFLICT (digest) DO UPDATE SET digest = EXCLUDED.digest WHERE false`, key, project, body)
			return err
		}, s.wrap); err != nil {
			return err
		}
	}
	seqs := make([]int64, len(enc))
	kinds := make([]string, len(enc))
	bodies := make([][]byte, len(enc))
	keys := make([][]byte, len(enc))
	for i, e := range enc {
		seqs[i], kinds[i], bodies[i], keys[i] = e.seq, e.kind, e.payload, e.key
	}
	first, last := seqs[0], seqs[len(seqs)-1]
	tag, err := c.Exec(ctx, `WITH s AS (
			UPDATE sessions SET last_sequence = $3, updated_at = now()
			WHERE id = $1 AND last_sequence < $2
			RETURNING id
		)
		INSERT INTO events (session_id, seq, kind, body, shared)
		SELECT s.id, e.seq, e.kind, e.body, e.shared
		FROM s, unnest($4::bigint[], $5::text[], $6::bytea[], $7::bytea[]) AS e (seq, kind, body, shared)`,
		sessionID, first, last, seqs, kinds, bodies, keys)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if tag.RowsAffected() == int64(len(enc)) {
		return nil
	}
	var have int64
	err = c.QueryRow(ctx, `SELECT last_sequence FROM sessions WHERE id = $1`, sessionID).Scan(&have)
	return refusedAppend(ctx, sessionID, first, have, err, pgx.ErrNoRows, s.wrap)
}

// ReadEvents implements Store.
func (s *pgStore) ReadEvents(ctx context.Context, sessionID string, afterSequence int64, limit int) ([]Event, error) {
	const op = "read events"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, `SELECT e.seq, e.kind, e.body, e.shared IS NOT NULL, p.body FROM events AS e
		LEFT JOIN shared_payloads AS p ON p.digest = e.shared
			AND p.project_id = (SELECT project_id FROM sessions WHERE id = $1)
		WHERE e.session_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3`, sessionID, afterSequence, lim)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	raw, err := collectEvents(rows, copiedBlob)
	rows.Close()
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	if len(raw) == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, sessionID).Scan(&exists); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		if !exists {
			return nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		}
		return []Event{}, nil
	}
	out, err := decodeEvents(sessionID, raw, func(seq int64, cause error) error {
		return s.tornRecord(ctx, sessionID, seq, cause)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// tornRecord handles a record that does not decode as handleTornRecord
// describes.
func (s *pgStore) tornRecord(ctx context.Context, sessionID string, seq int64, cause error) error {
	return handleTornRecord(ctx, s.log, sessionID, seq, cause, func() (bool, error) {
		var later bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE session_id = $1 AND seq > $2)`,
			sessionID, seq).Scan(&later)
		return later, s.wrap(ctx, "read events", err)
	}, func() error {
		return s.quarantine(ctx, sessionID, seq)
	})
}

// quarantine moves the session's last record seq into torn_events, in one
// statement: the moved row is deleted only if it is still the last.
func (s *pgStore) quarantine(ctx context.Context, sessionID string, seq int64) error {
	_, err := s.pool.Exec(ctx, `WITH moved AS (
			DELETE FROM events
			WHERE session_id = $1 AND seq = $2
			  AND NOT EXISTS (SELECT 1 FROM events AS later WHERE later.session_id = $1 AND later.seq > $2)
			RETURNING session_id, seq, kind, body, shared
		)
		INSERT INTO torn_events (session_id, seq, kind, payload, shared)
		SELECT session_id, seq, kind, body, shared FROM moved
		ON CONFLICT (session_id, seq) DO UPDATE SET kind = EXCLUDED.kind, payload = EXCLUDED.payload,
			shared = EXCLUDED.shared, quarantined_at = now()`,
		sessionID, seq)
	return err
}

// AcquireLease implements Store. Expiry is computed and compared with the
// server's now(), never a replica's clock.
func (s *pgStore) AcquireLease(ctx context.Context, sessionID, owner, ownerAddr string, ttl time.Duration) (bool, error) {
	const op = "acquire lease"
	if err := checkLease(sessionID, owner, ttl); err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if s.closed.Load() {
		return false, closedError(op)
	}
	var got string
	err := s.pool.QueryRow(ctx, pgTakeLease, sessionID, owner, ownerAddr, ttl.Microseconds()).Scan(&got)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		werr := s.wrap(ctx, op, err)
		if errors.Is(werr, ErrNotFound) {
			return false, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		}
		return false, werr
	}
	return true, nil
}

// pgTakeLease takes a session's lease for an owner when it is free,
// expired or the owner's already, and returns the owner then; no row
// while another owner holds it.
const pgTakeLease = `INSERT INTO leases (session_id, owner, owner_addr, expires_at)
	VALUES ($1, $2, $3, now() + $4::bigint * interval '1 microsecond')
	ON CONFLICT (session_id) DO UPDATE SET
		owner = EXCLUDED.owner, owner_addr = EXCLUDED.owner_addr, expires_at = EXCLUDED.expires_at
	WHERE leases.owner = EXCLUDED.owner OR leases.expires_at <= now()
	RETURNING owner`

// claimLease takes a write's claimed lease (SessionWrite.Claim) in its
// transaction tx, before anything else is written: ErrLeaseTaken when
// another owner holds it, or when the log has moved since the claimer
// read it. The lease's statement waits for a transaction that holds the
// lease's row to end, and every append to the log is made under the
// lease, so the last sequence read after it (a statement of its own, with
// a snapshot of its own) is the log's as its last holder left it.
func (s *pgStore) claimLease(ctx context.Context, op string, tx pgx.Tx, id string, c *LeaseClaim) error {
	var got string
	err := tx.QueryRow(ctx, pgTakeLease, id, c.Owner, c.OwnerAddr, c.TTL.Microseconds()).Scan(&got)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w: session %s", op, ErrLeaseTaken, id)
	case err != nil:
		werr := s.wrap(ctx, op, err)
		if errors.Is(werr, ErrNotFound) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, id)
		}
		return werr
	}
	var last int64
	if err := tx.QueryRow(ctx, `SELECT last_sequence FROM sessions WHERE id = $1`, id).Scan(&last); err != nil {
		return s.wrap(ctx, op, err)
	}
	if last != c.LastSequence {
		return fmt.Errorf("%s: %w: session %s is at sequence %d, read at %d", op, ErrLeaseTaken, id, last, c.LastSequence)
	}
	return nil
}

// PeekLease implements Store: the row, whether a lease is on it, the
// project's settings of its model and the agent's version, in one
// statement (one round trip, one snapshot). The log is left to
// ReadEvents.
func (s *pgStore) PeekLease(ctx context.Context, sessionID string, agent AgentRef) (*LeaseRead, error) {
	const op = "peek lease"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	lr := &LeaseRead{Agent: agent}
	var (
		window, settingUpdated, version *int64
		price                           *string
	)
	row, err := scanPGSession(prefixScanner{s.pool.QueryRow(ctx, pgPeekLease, sessionID, DefaultProject, agent.Project, agent.Name),
		[]any{&lr.Leased, &window, &price, &settingUpdated, &version}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
	}
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	lr.Row = row
	if window == nil {
		lr.ModelRead = true
	} else {
		// A price that does not decode leaves the settings to
		// GetModelSetting, which reports it.
		ms := ModelSetting{Project: cmp.Or(row.ProjectID, DefaultProject), Provider: row.Provider, ModelID: row.ModelID, ContextWindow: *window}
		if lr.Model, err = ms.stored(*price, *settingUpdated); err == nil {
			lr.ModelRead = true
		} else {
			lr.Model = nil
		}
	}
	if agent != (AgentRef{}) {
		lr.AgentRead = true
		if version != nil {
			lr.AgentVersion = *version
		}
	}
	return lr, nil
}

// pgPeekLease reads a session's row ($1) after whether a lease row is on
// it, its project's settings of its model (the columns null when there
// are none; the project $2 when the row has none) and the version of an
// agent ($3, $4; null when there is no such agent).
const pgPeekLease = `SELECT EXISTS (SELECT 1 FROM leases WHERE session_id = $1),
		setting.setting_window, setting.setting_price, setting.setting_updated,
		(SELECT agents.version FROM agents WHERE agents.project = $3 AND agents.name = $4),
		` + sessionColumns + `
	FROM sessions LEFT JOIN LATERAL (
		SELECT model_settings.context_window AS setting_window, model_settings.price AS setting_price,
			model_settings.updated_at AS setting_updated
		FROM model_settings
		WHERE model_settings.project_id = COALESCE(NULLIF(sessions.project_id, ''), $2)
			AND model_settings.provider = sessions.provider AND model_settings.model_id = sessions.model_id
	) AS setting ON true
	WHERE sessions.id = $1`

// ReleaseLease implements Store.
func (s *pgStore) ReleaseLease(ctx context.Context, sessionID, owner string) error {
	const op = "release lease"
	if s.closed.Load() {
		return closedError(op)
	}
	_, err := s.pool.Exec(ctx, pgReleaseLease, sessionID, owner)
	return s.wrap(ctx, op, err)
}

// pgReleaseLease gives up an owner's lease on a session.
const pgReleaseLease = `DELETE FROM leases WHERE session_id = $1 AND owner = $2`

// LeaseHolder implements Store.
func (s *pgStore) LeaseHolder(ctx context.Context, sessionID string) (string, string, time.Time, error) {
	const op = "lease holder"
	if s.closed.Load() {
		return "", "", time.Time{}, closedError(op)
	}
	var (
		owner, addr string
		expires     time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT owner, owner_addr, expires_at FROM leases
		WHERE session_id = $1 AND expires_at > now()`, sessionID).Scan(&owner, &addr, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", time.Time{}, fmt.Errorf("%s: %w: no live lease on session %s", op, ErrNotFound, sessionID)
	}
	if err != nil {
		return "", "", time.Time{}, s.wrap(ctx, op, err)
	}
	return owner, addr, expires.UTC(), nil
}

// StaleLeases implements Store.
func (s *pgStore) StaleLeases(ctx context.Context, owner string) ([]string, error) {
	const op = "stale leases"
	if s.closed.Load() {
		return nil, closedError(op)
	}
	rows, err := s.pool.Query(ctx, `SELECT session_id FROM leases WHERE owner = $1 OR expires_at <= now()
		ORDER BY expires_at, session_id`, owner)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, s.wrap(ctx, op, err)
}

// LeaseCutOff implements Store.
func (s *pgStore) LeaseCutOff(ctx context.Context, sessionID, owner string) (bool, error) {
	const op = "lease cut off"
	if s.closed.Load() {
		return false, closedError(op)
	}
	var cut bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM leases
		WHERE session_id = $1 AND (owner = $2 OR expires_at <= now()))`, sessionID, owner).Scan(&cut)
	return cut, s.wrap(ctx, op, err)
}

// Now implements Store.
func (s *pgStore) Now(ctx context.Context) (time.Time, error) {
	const op = "now"
	if s.closed.Load() {
		return time.Time{}, closedError(op)
	}
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Time{}, s.wrap(ctx, op, err)
	}
	return t.UTC(), nil
}

// Close implements Store.
func (s *pgStore) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.pool.Close()
	return nil
}
