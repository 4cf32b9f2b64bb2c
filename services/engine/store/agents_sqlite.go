package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ListAgents implements AgentStore.
func (s *sqliteStore) ListAgents(ctx context.Context, project string) ([]Agent, error) {
	const op = "list agents"
	if err := s.agentOp(op, project); err != nil {
		return nil, err
	}
	s.read()
	rows, err := s.r.QueryContext(ctx, `SELECT name, version, updated_at FROM agents WHERE project = ? ORDER BY name`, project)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a := Agent{Project: project}
		var us int64
		if err := rows.Scan(&a.Name, &a.Version, &us); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		a.UpdatedAt = time.UnixMicro(us).UTC()
		out = append(out, a)
	}
	return out, s.wrap(ctx, op, rows.Err())
}

// GetAgent implements AgentStore.
func (s *sqliteStore) GetAgent(ctx context.Context, project, name string) (Agent, error) {
	const op = "get agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	// Prepared once on the readers, as every session's creation asks
	// for its agent (and a run whose read with the row did not take it,
	// PeekLease): preparing the statement anew cost more than running
	// it.
	return s.scanAgent(ctx, op, s.rs.lookup(ctx, sqliteGetAgent, project, name), project, name)
}

// sqliteGetAgent reads an agent's version and time of change.
const sqliteGetAgent = `SELECT version, updated_at FROM agents WHERE project = ? AND name = ?`

// scanAgent reads the agent that row (sqliteGetAgent's) holds.
func (s *sqliteStore) scanAgent(ctx context.Context, op string, row *sql.Row, project, name string) (Agent, error) {
	a := Agent{Project: project, Name: name}
	var us int64
	err := row.Scan(&a.Version, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return Agent{}, errAgentNotFound(op, project, name)
	}
	if err != nil {
		return Agent{}, s.wrap(ctx, op, err)
	}
	a.UpdatedAt = time.UnixMicro(us).UTC()
	return a, nil
}

// ReadAgent implements AgentStore. The reads share one transaction, so
// the files are those of the version returned.
func (s *sqliteStore) ReadAgent(ctx context.Context, project, name string) (_ Agent, _ []AgentFile, err error) {
	const op = "read agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, nil, err
	}
	s.reads.Add(2) // the agent, then its files
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Agent{}, nil, s.wrap(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	a, err := s.scanAgent(ctx, op, tx.QueryRowContext(ctx, sqliteGetAgent, project, name), project, name)
	if err != nil {
		return Agent{}, nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT path, data, version FROM agent_files WHERE project = ? AND agent = ? ORDER BY path`, project, name)
	if err != nil {
		return Agent{}, nil, s.wrap(ctx, op, err)
	}
	defer rows.Close()
	var files []AgentFile
	for rows.Next() {
		var f AgentFile
		if err := rows.Scan(&f.Path, &f.Data, &f.Version); err != nil {
			return Agent{}, nil, s.wrap(ctx, op, err)
		}
		if f.Data == nil {
			f.Data = []byte{}
		}
		files = append(files, f)
	}
	if err := rows.Err(); err != nil {
		return Agent{}, nil, s.wrap(ctx, op, err)
	}
	return a, files, nil
}

// CreateAgent implements AgentStore.
func (s *sqliteStore) CreateAgent(ctx context.Context, project, name string, files []AgentFile) (Agent, error) {
	const op = "create agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	var a Agent
	err := s.agentTx(ctx, op, func(tx *writeTx) error {
		now := time.Now().UTC()
		if _, err := tx.exec(`INSERT INTO agents (project, name, version, updated_at) VALUES (?, ?, 1, ?)`, project, name, now.UnixMicro()); err != nil {
			if isUniqueError(err) {
				return fmt.Errorf("%s: %w: agent %s of project %s exists", op, ErrConflict, name, project)
			}
			return err
		}
		for _, f := range files {
			if _, err := tx.exec(`INSERT INTO agent_files (project, agent, path, data, version) VALUES (?, ?, ?, ?, 1)`, project, name, f.Path, nonNil(f.Data)); err != nil {
				return err
			}
		}
		a = Agent{Project: project, Name: name, Version: 1, UpdatedAt: time.UnixMicro(now.UnixMicro()).UTC()}
		return nil
	})
	return a, err
}

// ChangeAgent implements AgentStore.
func (s *sqliteStore) ChangeAgent(ctx context.Context, project, name string, changes []AgentChange) (Agent, error) {
	const op = "change agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	if err := checkChanges(op, changes); err != nil {
		return Agent{}, err
	}
	var a Agent
	err := s.agentTx(ctx, op, func(tx *writeTx) error {
		v, err := applyChanges(ctx, op, sqliteAgentTx{tx}, project, name, changes)
		if err != nil {
			return err
		}
		a, err = s.scanAgent(ctx, op, tx.queryRow(sqliteGetAgent, project, name), project, name)
		a.Version = v
		return err
	})
	return a, err
}

// RenameAgent implements AgentStore; the files follow through ON UPDATE
// CASCADE.
func (s *sqliteStore) RenameAgent(ctx context.Context, project, from, to string) error {
	const op = "rename agent"
	if err := s.agentOp(op, project, from, to); err != nil {
		return err
	}
	return s.agentTx(ctx, op, func(tx *writeTx) error {
		res, err := tx.exec(`UPDATE agents SET name = ?, version = version + 1, updated_at = ? WHERE project = ? AND name = ?`, to, time.Now().UnixMicro(), project, from)
		if isUniqueError(err) {
			return fmt.Errorf("%s: %w: agent %s of project %s exists", op, ErrConflict, to, project)
		}
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errAgentNotFound(op, project, from)
		}
		return nil
	})
}

// DeleteAgent implements AgentStore.
func (s *sqliteStore) DeleteAgent(ctx context.Context, project, name string) error {
	const op = "delete agent"
	if err := s.agentOp(op, project, name); err != nil {
		return err
	}
	return s.agentTx(ctx, op, func(tx *writeTx) error {
		res, err := tx.exec(`DELETE FROM agents WHERE project = ? AND name = ?`, project, name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errAgentNotFound(op, project, name)
		}
		return nil
	})
}

// agentOp checks the arguments of an agent operation and that the store
// is open.
func (s *sqliteStore) agentOp(op, project string, names ...string) error {
	if s.closed.Load() {
		return closedError(op)
	}
	return checkAgentArgs(op, project, names...)
}

// agentTx runs f in a write transaction, committed when f returns nil.
// Errors of the store's vocabulary pass as they are; driver errors are
// wrapped.
func (s *sqliteStore) agentTx(ctx context.Context, op string, f func(*writeTx) error) error {
	return s.write(ctx, op, true, func(tx *writeTx) error {
		if err := f(tx); err != nil {
			if isStoreError(err) {
				return err
			}
			return s.wrap(ctx, op, err)
		}
		return nil
	})
}

// sqliteAgentTx implements agentTx on a SQLite transaction; the write
// transaction (BEGIN IMMEDIATE) already holds the database's one write
// lock, so lockAgent only reads.
type sqliteAgentTx struct{ tx *writeTx }

func (t sqliteAgentTx) lockAgent(ctx context.Context, project, name string) (int64, bool, error) {
	var v int64
	err := t.tx.queryRow(`SELECT version FROM agents WHERE project = ? AND name = ?`, project, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

func (t sqliteAgentTx) fileVersion(ctx context.Context, project, name, path string) (int64, error) {
	var v int64
	err := t.tx.queryRow(`SELECT version FROM agent_files WHERE project = ? AND agent = ? AND path = ?`, project, name, path).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func (t sqliteAgentTx) putFile(ctx context.Context, project, name, path string, data []byte, version int64) error {
	_, err := t.tx.exec(`INSERT INTO agent_files (project, agent, path, data, version) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (project, agent, path) DO UPDATE SET data = excluded.data, version = excluded.version`, project, name, path, nonNil(data), version)
	return err
}

func (t sqliteAgentTx) deleteFile(ctx context.Context, project, name, path string) error {
	_, err := t.tx.exec(`DELETE FROM agent_files WHERE project = ? AND agent = ? AND path = ?`, project, name, path)
	return err
}

func (t sqliteAgentTx) setVersion(ctx context.Context, project, name string, version int64) error {
	_, err := t.tx.exec(`UPDATE agents SET version = ?, updated_at = ? WHERE project = ? AND name = ?`, version, time.Now().UnixMicro(), project, name)
	return err
}

// isUniqueError reports whether err is a primary key or unique violation.
func isUniqueError(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
}
