package store

import (
	"context"
	"database/sql"
)

// The SQLite store's writes and their connection.
//
// A file store keeps its writer's one connection for its whole life (a
// *sql.Conn taken once the schema is migrated) and serializes the writes
// on it itself, with a turn that a write takes and gives back. Through
// database/sql's BeginTx each transaction cost a derived context and a
// goroutine watching it, BEGIN and COMMIT compiled anew by the driver each
// time, and, for every statement run with a context that can be
// cancelled, another goroutine of the driver (modernc's interruptOnDone)
// waiting for the context to end. On the pinned connection BEGIN
// IMMEDIATE, COMMIT and ROLLBACK are statements prepared once like the
// others, and the statements of a write run with the caller's context
// without its cancellation: the driver starts no goroutine for a context
// that cannot end. A write still honours its context up to the moment it
// has the turn, which is where it waits for the engine's other writes; once
// begun, it runs its sub-millisecond statements to the end, and a wait for
// another process's write lock is bounded by the busy timeout.
//
// An in-memory store cannot pin its connection: its readers share the one
// connection that holds the database. It writes through database/sql's
// transactions on the pool of that connection, as before.

// writeTx is one write on the writer's connection: an IMMEDIATE
// transaction, or, begun without one, autocommit statements with nothing
// of another write between them.
type writeTx struct {
	s *sqliteStore
	// ctx is the context the statements run with: on the pinned
	// connection the caller's without its cancellation.
	ctx context.Context
	// tx is an in-memory store's transaction; nil otherwise.
	tx *sql.Tx
	// open says that a transaction begun on the pinned connection has
	// neither committed nor rolled back yet; held, that the write holds
	// the turn.
	open, held bool
}

// beginWrite starts a write, a transaction when tx is set. The write must
// end with Commit or Rollback.
func (s *sqliteStore) beginWrite(ctx context.Context, tx bool) (*writeTx, error) {
	return s.begin(ctx, tx, `BEGIN IMMEDIATE`)
}

// begin starts a turn on the writer's connection, a transaction begun
// with the statement begin when tx is set: BEGIN IMMEDIATE for a write,
// BEGIN for a read on the writer (readOnWriter).
func (s *sqliteStore) begin(ctx context.Context, tx bool, begin string) (*writeTx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.wc == nil {
		t := &writeTx{s: s, ctx: ctx}
		if tx {
			var err error
			if t.tx, err = s.w.BeginTx(ctx, nil); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t := &writeTx{s: s, ctx: context.WithoutCancel(ctx), held: true}
	if tx {
		if _, err := t.exec(begin); err != nil {
			t.release()
			return nil, err
		}
		t.open = true
	}
	return t, nil
}

// write runs f as one write, in a transaction when tx is set, committed
// when f returns nil and rolled back otherwise. f's errors are returned as
// they are; the write's own are wrapped for op.
func (s *sqliteStore) write(ctx context.Context, op string, tx bool, f func(*writeTx) error) error {
	t, err := s.beginWrite(ctx, tx)
	return s.finish(ctx, op, t, err, f)
}

// readOnWriter runs f in a read transaction on the writer's connection,
// in the writer's turn: its page cache holds what the writes put there,
// where a reader connection reads again every page the writer changed
// since its last read. It takes no write lock and commits nothing.
func (s *sqliteStore) readOnWriter(ctx context.Context, op string, f func(*writeTx) error) error {
	t, err := s.begin(ctx, true, `BEGIN`)
	return s.finish(ctx, op, t, err, f)
}

// finish runs f in t, begun with the error begun, and then commits t, or
// rolls it back when f fails: write's and readOnWriter's common end.
func (s *sqliteStore) finish(ctx context.Context, op string, t *writeTx, begun error, f func(*writeTx) error) error {
	if begun != nil {
		return s.wrap(ctx, op, begun)
	}
	if err := f(t); err != nil {
		_ = t.Rollback()
		return err
	}
	if err := t.Commit(); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

// release gives the turn back, once.
func (t *writeTx) release() {
	if t.held {
		t.held = false
		<-t.s.turn
	}
}

// Commit commits the write's transaction, if it has one, and ends the
// write. A COMMIT that failed is rolled back, so that the connection is
// left outside any transaction, as the driver's own Commit leaves it.
func (t *writeTx) Commit() error { return t.end(true) }

// Rollback rolls the write's transaction back, if it has one still open,
// and ends the write.
func (t *writeTx) Rollback() error { return t.end(false) }

// end commits or rolls back, and gives the turn back.
func (t *writeTx) end(commit bool) error {
	defer t.release()
	switch {
	case t.tx != nil && commit:
		return t.tx.Commit()
	case t.tx != nil:
		return t.tx.Rollback()
	case !t.open:
		return nil
	}
	t.open = false
	if !commit {
		_, err := t.exec(`ROLLBACK`)
		return err
	}
	_, err := t.exec(`COMMIT`)
	if err != nil {
		_, _ = t.exec(`ROLLBACK`)
	}
	return err
}

// stmt returns st, prepared on the writer, to run in this write.
func (t *writeTx) stmt(st *sql.Stmt) *sql.Stmt {
	if t.tx != nil {
		return t.tx.StmtContext(t.ctx, st)
	}
	return st
}

// exec runs query in this write: prepared once on the pinned connection,
// or as database/sql runs it in an in-memory store.
func (t *writeTx) exec(query string, args ...any) (sql.Result, error) {
	if t.tx != nil {
		return t.tx.ExecContext(t.ctx, query, args...)
	}
	return t.s.ws.exec(t.ctx, query, args...)
}

// queryRow runs query for one row in this write, as exec does.
func (t *writeTx) queryRow(query string, args ...any) *sql.Row {
	if t.tx != nil {
		return t.tx.QueryRowContext(t.ctx, query, args...)
	}
	return t.s.ws.queryRow(t.ctx, query, args...)
}
