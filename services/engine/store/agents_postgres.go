package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ListAgents implements AgentStore.
func (s *pgStore) ListAgents(ctx context.Context, project string) ([]Agent, error) {
	const op = "list agents"
	if err := s.agentOp(op, project); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT name, version, updated_at FROM agents WHERE project = $1 ORDER BY name`, project)
	if err != nil {
		return nil, s.wrap(ctx, op, err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a := Agent{Project: project}
		if err := rows.Scan(&a.Name, &a.Version, &a.UpdatedAt); err != nil {
			return nil, s.wrap(ctx, op, err)
		}
		a.UpdatedAt = a.UpdatedAt.UTC()
		out = append(out, a)
	}
	return out, s.wrap(ctx, op, rows.Err())
}

// GetAgent implements AgentStore.
func (s *pgStore) GetAgent(ctx context.Context, project, name string) (Agent, error) {
	const op = "get agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	return s.getAgent(ctx, op, s.pool, project, name, "")
}

type pgQueryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *pgStore) getAgent(ctx context.Context, op string, q pgQueryer, project, name, suffix string) (Agent, error) {
	a := Agent{Project: project, Name: name}
	err := q.QueryRow(ctx, `SELECT version, updated_at FROM agents WHERE project = $1 AND name = $2`+suffix, project, name).Scan(&a.Version, &a.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Agent{}, errAgentNotFound(op, project, name)
	}
	if err != nil {
		return Agent{}, s.wrap(ctx, op, err)
	}
	a.UpdatedAt = a.UpdatedAt.UTC()
	return a, nil
}

// ReadAgent implements AgentStore, in one repeatable-read transaction so
// that the files are those of the version returned.
func (s *pgStore) ReadAgent(ctx context.Context, project, name string) (Agent, []AgentFile, error) {
	const op = "read agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, nil, err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Agent{}, nil, s.wrap(ctx, op, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	a, err := s.getAgent(ctx, op, tx, project, name, "")
	if err != nil {
		return Agent{}, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT path, data, version FROM agent_files WHERE project = $1 AND agent = $2 ORDER BY path`, project, name)
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
		f.Data = nonNil(f.Data)
		files = append(files, f)
	}
	if err := rows.Err(); err != nil {
		return Agent{}, nil, s.wrap(ctx, op, err)
	}
	return a, files, nil
}

// CreateAgent implements AgentStore.
func (s *pgStore) CreateAgent(ctx context.Context, project, name string, files []AgentFile) (Agent, error) {
	const op = "create agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	var a Agent
	err := s.agentTx(ctx, op, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO agents (project, name, version) VALUES ($1, $2, 1) RETURNING updated_at`, project, name).Scan(&a.UpdatedAt); err != nil {
			if isPGUnique(err) {
				return fmt.Errorf("%s: %w: agent %s of project %s exists", op, ErrConflict, name, project)
			}
			return err
		}
		for _, f := range files {
			if _, err := tx.Exec(ctx, `INSERT INTO agent_files (project, agent, path, data, version) VALUES ($1, $2, $3, $4, 1)`, project, name, f.Path, nonNil(f.Data)); err != nil {
				return err
			}
		}
		a.Project, a.Name, a.Version, a.UpdatedAt = project, name, 1, a.UpdatedAt.UTC()
		return nil
	})
	return a, err
}

// ChangeAgent implements AgentStore. The agent's row is locked (SELECT …
// FOR UPDATE) for the transaction, so changes of one agent from several
// replicas apply one after the other and each sees the versions the last
// one left.
func (s *pgStore) ChangeAgent(ctx context.Context, project, name string, changes []AgentChange) (Agent, error) {
	const op = "change agent"
	if err := s.agentOp(op, project, name); err != nil {
		return Agent{}, err
	}
	if err := checkChanges(op, changes); err != nil {
		return Agent{}, err
	}
	var a Agent
	err := s.agentTx(ctx, op, func(tx pgx.Tx) error {
		v, err := applyChanges(ctx, op, pgAgentTx{tx}, project, name, changes)
		if err != nil {
			return err
		}
		a, err = s.getAgent(ctx, op, tx, project, name, "")
		a.Version = v
		return err
	})
	return a, err
}

// RenameAgent implements AgentStore; the files follow through ON UPDATE
// CASCADE.
func (s *pgStore) RenameAgent(ctx context.Context, project, from, to string) error {
	const op = "rename agent"
	if err := s.agentOp(op, project, from, to); err != nil {
		return err
	}
	return s.agentTx(ctx, op, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE agents SET name = $1, version = version + 1, updated_at = now() WHERE project = $2 AND name = $3`, to, project, from)
		if isPGUnique(err) {
			return fmt.Errorf("%s: %w: agent %s of project %s exists", op, ErrConflict, to, project)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errAgentNotFound(op, project, from)
		}
		return nil
	})
}

// DeleteAgent implements AgentStore.
func (s *pgStore) DeleteAgent(ctx context.Context, project, name string) error {
	const op = "delete agent"
	if err := s.agentOp(op, project, name); err != nil {
		return err
	}
	return s.agentTx(ctx, op, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM agents WHERE project = $1 AND name = $2`, project, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errAgentNotFound(op, project, name)
		}
		return nil
	})
}

func (s *pgStore) agentOp(op, project string, names ...string) error {
	if s.closed.Load() {
		return closedError(op)
	}
	return checkAgentArgs(op, project, names...)
}

// agentTx runs f in a transaction, committed when f returns nil.
func (s *pgStore) agentTx(ctx context.Context, op string, f func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback(ctx)
		if isStoreError(err) {
			return err
		}
		return s.wrap(ctx, op, err)
	}
	return s.wrap(ctx, op, tx.Commit(ctx))
}

func isPGUnique(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) && pe.SQLState() == "23505"
}

// pgAgentTx implements agentTx on a PostgreSQL transaction.
type pgAgentTx struct{ tx pgx.Tx }

func (t pgAgentTx) lockAgent(ctx context.Context, project, name string) (int64, bool, error) {
	var v int64
	err := t.tx.QueryRow(ctx, `SELECT version FROM agents WHERE project = $1 AND name = $2 FOR UPDATE`, project, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

func (t pgAgentTx) fileVersion(ctx context.Context, project, name, path string) (int64, error) {
	var v int64
	err := t.tx.QueryRow(ctx, `SELECT version FROM agent_files WHERE project = $1 AND agent = $2 AND path = $3`, project, name, path).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func (t pgAgentTx) putFile(ctx context.Context, project, name, path string, data []byte, version int64) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO agent_files (project, agent, path, data, version) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (project, agent, path) DO UPDATE SET data = excluded.data, version = excluded.version`, project, name, path, nonNil(data), version)
	return err
}

func (t pgAgentTx) deleteFile(ctx context.Context, project, name, path string) error {
	_, err := t.tx.Exec(ctx, `DELETE FROM agent_files WHERE project = $1 AND agent = $2 AND path = $3`, project, name, path)
	return err
}

func (t pgAgentTx) setVersion(ctx context.Context, project, name string, version int64) error {
	_, err := t.tx.Exec(ctx, `UPDATE agents SET version = $1, updated_at = now() WHERE project = $2 AND name = $3`, version, project, name)
	return err
}
