package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteTeams binds teamSQL to a SQLite store: writes on the writer,
// reads on the readers.
func sqliteTeams(s *sqliteStore) *teamSQL {
	return &teamSQL{
		exec: func(ctx context.Context, q string, args ...any) (int64, error) {
			t, err := s.beginWrite(ctx, false)
			if err != nil {
				return 0, err
			}
			defer t.release()
			res, err := t.exec(q, args...)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		},
		queryRow: func(ctx context.Context, q string, args ...any) scanner { return s.rs.queryRow(ctx, q, args...) },
		query: func(ctx context.Context, q string, args ...any) (rowIterator, func(), error) {
			rows, err := s.rs.query(ctx, q, args...)
			if err != nil {
				return nil, nil, err
			}
			return rows, func() { _ = rows.Close() }, nil
		},
		tx: func(ctx context.Context, f func(exec func(q string, args ...any) (int64, error)) error) error {
			tx, err := s.beginWrite(ctx, true)
			if err != nil {
				return err
			}
			err = f(func(q string, args ...any) (int64, error) {
				res, err := tx.exec(q, args...)
				if err != nil {
					return 0, err
				}
				return res.RowsAffected()
			})
			if err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		},
		noRows: sql.ErrNoRows,
		classify: func(ctx context.Context, op string, err error) error {
			var se *sqlite.Error
			if errors.As(err, &se) {
				switch se.Code() {
				case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
					return fmt.Errorf("%s: %w: %w", op, ErrConflict, err)
				case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
					return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
				}
			}
			return s.wrap(ctx, op, err)
		},
		closed: s.closed.Load,
	}
}

// pgTeams binds teamSQL to a PostgreSQL store, whose wrap already maps
// unique and foreign key violations.
func pgTeams(s *pgStore) *teamSQL {
	return &teamSQL{
		exec: func(ctx context.Context, q string, args ...any) (int64, error) {
			tag, err := s.pool.Exec(ctx, rebind(q), args...)
			return tag.RowsAffected(), err
		},
		queryRow: func(ctx context.Context, q string, args ...any) scanner {
			return s.pool.QueryRow(ctx, rebind(q), args...)
		},
		query: func(ctx context.Context, q string, args ...any) (rowIterator, func(), error) {
			rows, err := s.pool.Query(ctx, rebind(q), args...)
			if err != nil {
				return nil, nil, err
			}
			return rows, rows.Close, nil
		},
		tx: func(ctx context.Context, f func(exec func(q string, args ...any) (int64, error)) error) error {
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				return f(func(q string, args ...any) (int64, error) {
					tag, err := tx.Exec(ctx, rebind(q), args...)
					return tag.RowsAffected(), err
				})
			})
		},
		noRows:   pgx.ErrNoRows,
		classify: s.wrap,
		closed:   s.closed.Load,
	}
}
