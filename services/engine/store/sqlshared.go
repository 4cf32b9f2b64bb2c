package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// This file holds what the SQLite and PostgreSQL stores share. The two
// talk to their databases through different drivers (database/sql and
// pgx), so each keeps its own statements and transactions; the decisions
// they must make alike, and the row shapes they read alike, live here once
// so the two cannot drift apart.

// sessionColumns lists the sessions table's columns in the order that
// scanSession reads them; both schemas name them the same.
const sessionColumns = `id, provider, model_id, workspace, agent_state, approval_mode, thinking_level,
	title, parent_id, source, environment_id, environment_addr, config,
	usage_cache_read, usage_cache_write, usage_output, usage_total,
	created_at, updated_at, last_sequence,
	usage_reasoning, usage_cost_usd, usage_unreported, project_id`

// scanner is the common part of *sql.Row, *sql.Rows, pgx.Row and pgx.Rows.
type scanner interface{ Scan(dest ...any) error }

// rowIterator is the common part of *sql.Rows and pgx.Rows that reading a
// result needs; closing differs between the two and stays with the caller.
type rowIterator interface {
	scanner
	Next() bool
	Err() error
}

// scanSession reads one row of sessionColumns. T is how the dialect
// stores a time (int64 microseconds in SQLite, timestamptz in PostgreSQL),
// and toTime turns it into a UTC time.Time.
func scanSession[T any](sc scanner, toTime func(T) time.Time) (*Session, error) {
	var (
		s                  Session
		u                  penguinv1.TokenCounts
		created, updated   T
		approval, thinking int32
		cost               sql.NullFloat64
	)
	if err := sc.Scan(&s.ID, &s.Provider, &s.ModelID, &s.Workspace, &s.AgentState, &approval, &thinking,
		&s.Title, &s.ParentID, &s.Source, &s.EnvironmentID, &s.EnvironmentAddr, &s.Config,
		&u.CacheRead, &u.CacheWrite, &u.Output, &u.Total,
		&created, &updated, &s.LastSequence,
		&u.Reasoning, &cost, &u.Unreported, &s.ProjectID); err != nil {
		return nil, err
	}
	s.ApprovalMode = penguinv1.ApprovalMode(approval)
	s.ThinkingLevel = penguinv1.ThinkingLevel(thinking)
	if cost.Valid {
		u.CostUsd = &cost.Float64
	}
	s.Usage = &u
	s.CreatedAt = toTime(created)
	s.UpdatedAt = toTime(updated)
	if len(s.Config) == 0 {
		s.Config = nil
	}
	return &s, nil
}

// sessionAccessJoin follows sessionColumns in a query of a session's row
// and the membership of a user (the query's first argument) in its
// project: role and created_at of the membership, NULL for none. The
// membership's columns are renamed in a subquery so that sessionColumns
// stay unambiguous.
const sessionAccessJoin = ` FROM sessions LEFT JOIN (
		SELECT project_id AS member_project, role AS member_role, created_at AS member_since
		FROM memberships WHERE user_id = %s) AS m ON m.member_project = sessions.project_id
	WHERE sessions.id = %s`

// scanSessionAccess reads a row of sessionColumns followed by
// sessionAccessJoin's membership of userID with scanRow (the dialect's
// scanSession): the session, and the membership or nil.
func scanSessionAccess(sc scanner, userID string, scanRow func(scanner) (*Session, error)) (*Session, *Member, error) {
	var (
		role  sql.NullString
		since sql.NullInt64
	)
	sess, err := scanRow(extraScan{sc, []any{&role, &since}})
	if err != nil {
		return nil, nil, err
	}
	if !role.Valid {
		return sess, nil, nil
	}
	return sess, &Member{ProjectID: sess.ProjectID, UserID: userID, Role: Role(role.String), CreatedAt: fromMicros(since.Int64)}, nil
}

// extraScan is a scanner that scans the columns its caller asks for and
// then extra ones.
type extraScan struct {
	sc    scanner
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

// collectSessions reads every row of a sessionColumns result with scan.
// The caller closes rows and wraps the error.
func collectSessions(rows rowIterator, scan func(scanner) (*Session, error)) ([]*Session, error) {
	var out []*Session
	for rows.Next() {
		sess, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// storedEvent is one row of a session's log as a read finds it: the
// event's body and, when the row refers to a shared part (hasShared), the
// part the join found (nil when it is missing).
type storedEvent struct {
	seq       int64
	kind      string
	body      []byte
	hasShared bool
	shared    []byte
}

// collectEvents reads every row of a `seq, kind, body, has shared,
// shared body` result, the byte columns scanned through blob (copied,
// or ownedBlob on SQLite). The caller closes rows and wraps the error.
func collectEvents(rows rowIterator, blob func(*[]byte) any) ([]storedEvent, error) {
	var raw []storedEvent
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.seq, &e.kind, blob(&e.body), &e.hasShared, blob(&e.shared)); err != nil {
			return nil, err
		}
		raw = append(raw, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return raw, nil
}

// copiedBlob scans a byte column as database/sql and pgx scan a *[]byte:
// into a copy of the driver's bytes, which may be the connection's
// buffer (pgx's are).
func copiedBlob(b *[]byte) any { return b }

// storeShared stores enc's shared parts, keyed for the session's project,
// before the events that refer to them: project is the project, or empty
// to have lookup read it from the session's row (noRows, the driver's
// error for a missing row, meaning an unknown session); insert stores
// one part unless it is there. The caller calls it for a batch with
// shared parts only, and so makes its functions only then.
func storeShared(ctx context.Context, sessionID, project string, enc []encodedEvent,
	lookup func(project *string) error, noRows error,
	insert func(key []byte, project string, body []byte) error,
	wrap func(ctx context.Context, op string, err error) error,
) error {
	const op = "append events"
	if project == "" {
		err := lookup(&project)
		if errors.Is(err, noRows) {
			return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
		}
		if err != nil {
			return wrap(ctx, op, err)
		}
	}
	keyShared(enc, project)
	for _, e := range enc {
		if e.shared == nil {
			continue
		}
		if err := insert(e.key, project, e.shared); err != nil {
			return wrap(ctx, op, err)
		}
	}
	return nil
}

// nilIfEmpty stores an empty byte slice as NULL.
func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// currentVersionQuery reads the schema version a database is at; 0 for a
// new database.
const currentVersionQuery = `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`

// applyMigrations brings a schema at version current up to the last of
// migrations, inside the caller's transaction: exec runs one statement and
// record notes a version as applied. It refuses a database whose schema is
// newer than this binary knows, rather than writing to it blindly.
func applyMigrations(ctx context.Context, op string, current int, migrations []migration,
	exec func(ctx context.Context, stmt string) error,
	record func(ctx context.Context, version int) error,
	wrap func(ctx context.Context, op string, err error) error,
) error {
	if latest := migrations[len(migrations)-1].version; current > latest {
		return fmt.Errorf("%s: database schema version %d is newer than this binary knows (%d); upgrade penguin", op, current, latest)
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		for _, stmt := range m.stmts {
			if err := exec(ctx, stmt); err != nil {
				return wrap(ctx, fmt.Sprintf("%s to version %d", op, m.version), err)
			}
		}
		if err := record(ctx, m.version); err != nil {
			return wrap(ctx, op, err)
		}
	}
	return nil
}

// refusedAppend explains why an append of first inserted nothing, given
// what looking up the session's last sequence returned: have, or err, where
// noRows is the driver's error for a missing row.
func refusedAppend(ctx context.Context, sessionID string, first, have int64, err, noRows error,
	wrap func(ctx context.Context, op string, err error) error,
) error {
	const op = "append events"
	if errors.Is(err, noRows) {
		return fmt.Errorf("%s: %w: session %s", op, ErrNotFound, sessionID)
	}
	if err != nil {
		return wrap(ctx, op, err)
	}
	return fmt.Errorf("%s: %w: session %s: sequence %d is not above the last sequence %d", op, ErrConflict, sessionID, first, have)
}

// handleTornRecord decides what to do with a record seq that does not
// decode: if a later record exists (hasLater) it is corruption in the
// middle of the log, an error; otherwise it is a torn tail, which is
// logged, moved aside by quarantine and skipped. The dialect's quarantine
// must move the record only while it is still the last, so that a
// concurrent append turns it back into the error case rather than losing
// history. A failed quarantine is logged and the record stays in the log.
func handleTornRecord(ctx context.Context, log *slog.Logger, sessionID string, seq int64, cause error,
	hasLater func() (bool, error), quarantine func() error,
) error {
	later, err := hasLater()
	if err != nil {
		return err
	}
	if later {
		return corruptError(sessionID, seq, cause)
	}
	log.WarnContext(ctx, "store: skipping torn last record of a session log",
		"session_id", sessionID, "sequence", seq, "error", cause)
	if err := quarantine(); err != nil {
		log.WarnContext(ctx, "store: could not quarantine torn record; it stays in the log",
			"session_id", sessionID, "sequence", seq, "error", err)
	}
	return nil
}

// costOf is the cost column's value of a session's usage: NULL while no
// request had a known price, which zero would not say.
func costOf(u *penguinv1.TokenCounts) *float64 {
	if u == nil {
		return nil
	}
	return u.CostUsd
}

// projectOf is the project a new session is stored in: its own, or
// DefaultProject when it names none.
func projectOf(s *Session) string {
	if s.ProjectID == "" {
		return DefaultProject
	}
	return s.ProjectID
}
