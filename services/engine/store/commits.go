package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"

	"modernc.org/sqlite"
)

// Settler is a store that does in the background, moments after writes,
// work that can also be done at once: the SQLite store checkpoints its
// WAL. A server calls Settle before it reports ready, so that what its
// start-up wrote is settled within the start-up, whose memory it then
// gives back (internal/resident), instead of by a background checkpoint
// moments later that would map SQLite's checkpoint code again at rest.
type Settler interface {
	Settle(ctx context.Context) error
}

// CommitCounter is a store that counts the write transactions it commits:
// the figure that says what the session log's group commit saves (see
// docs/performance.md). The SQLite store is one; the engine exports the
// count as the metric penguin_engine_store_commits_total.
type CommitCounter interface {
	// Commits returns the number of write transactions committed since
	// the store was opened.
	Commits() int64
}

// countingConnector opens SQLite connections with a commit hook that
// counts their write transactions. SQLite calls the hook for every
// transaction that wrote, autocommit statements included, and for no
// read, so the count is exact whatever code path wrote.
type countingConnector struct {
	driver.Connector
	commits *atomic.Int64
}

// Connect implements driver.Connector.
func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if h, ok := conn.(sqlite.HookRegisterer); ok {
		h.RegisterCommitHook(func() int32 {
			c.commits.Add(1)
			return 0 // zero lets the commit go ahead
		})
	}
	return conn, nil
}

// openCountedSQLite opens dsn like sql.Open("sqlite", dsn), with each
// connection's commits counted in commits.
func openCountedSQLite(dsn string, commits *atomic.Int64) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(countingConnector{Connector: c, commits: commits}), nil
}

// Commits implements CommitCounter. Only the writer's connection writes;
// an in-memory store's one connection is both.
func (s *sqliteStore) Commits() int64 { return s.commits.Load() }
