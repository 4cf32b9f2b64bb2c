package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"
)

// ScheduleStore keeps what engine replicas need to fire an agent's
// schedules exactly once between them: one row per schedule with its
// definition as last read from the agent's file and its next due time,
// and one row per run. The definitions themselves are agent files
// (schedule/<name>.yaml, see AgentStore); a replica copies them here
// (PutSchedule) when they change.
//
// Exactly once rests on two conditions the database checks. A due time
// is claimed by moving the schedule's next_due from the value a replica
// read to the next one in the transaction that records the run
// (ClaimDue), so of two replicas that read the same due time one moves
// it and the other touches no row; and a run is unique per (schedule,
// due time), so a due time recorded once is never recorded again, even
// by a definition edited back to it. A run then belongs to the replica
// that owns it until owner_until (TakeRuns), which starts it; a replica
// that dies leaves the run to the next one once that time has passed.
type ScheduleStore interface {
	// ScheduleFiles returns every agent file under schedule/, of every
	// project, with the agent file's version.
	ScheduleFiles(ctx context.Context) ([]AgentFileRef, error)
	// PutSchedule records s (found by project, agent and name) when its
	// version differs from the recorded one, and reports whether it did.
	// A new schedule gets an id; s.ID is set to the recorded one.
	PutSchedule(ctx context.Context, s *Schedule) (bool, error)
	// DeleteSchedule forgets a schedule whose file is gone; its runs stay
	// as history. ErrNotFound for an unknown one.
	DeleteSchedule(ctx context.Context, project, agent, name string) error
	// ListSchedules returns the schedules of a project (of one agent when
	// agent is not empty; of every project when project is empty too),
	// sorted by project, agent and name.
	ListSchedules(ctx context.Context, project, agent string) ([]*Schedule, error)
	// GetSchedule returns one schedule, or ErrNotFound.
	GetSchedule(ctx context.Context, project, agent, name string) (*Schedule, error)
	// DueSchedules returns up to limit enabled schedules due at now,
	// oldest due time first.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]*Schedule, error)
	// NextWake returns the earliest time at which something comes due
	// without a write to the store: an enabled schedule's next due time,
	// or a pending run's owner's time (after which another replica may
	// take it over); zero when there is neither. A replica that learns of
	// writes otherwise (ChangeChecker) need not look before then.
	NextWake(ctx context.Context) (time.Time, error)
	// ClaimDue moves s's next due time from s.NextDue to next and records
	// run in one transaction, and reports whether it did: false when
	// another replica moved it first. A run of the same due time recorded
	// before is kept and run is dropped (the due time still moves).
	ClaimDue(ctx context.Context, s *Schedule, next time.Time, run *ScheduleRun) (bool, error)
	// AddRun records a run out of cadence (run now). ErrConflict when the
	// schedule has a run of that due time.
	AddRun(ctx context.Context, run *ScheduleRun) error
	// TakeRuns makes owner the owner, until until, of up to limit pending
	// runs that it owns or whose owner's time has passed at now, and
	// returns them, oldest due time first.
	TakeRuns(ctx context.Context, owner string, now, until time.Time, limit int) ([]*ScheduleRun, error)
	// UpdateRun stores run's state, reason, session and owner time, on
	// condition that owner still owns it and it is pending; it reports
	// whether it did.
	UpdateRun(ctx context.Context, run *ScheduleRun, owner string) (bool, error)
	// ListRuns returns a schedule's latest runs, newest due time first, at
	// most limit of them.
	ListRuns(ctx context.Context, project, agent, name string, limit int) ([]*ScheduleRun, error)
	// EarlierRuns returns the runs of schedule id due before due that are
	// pending or started, newest due time first, at most limit of them:
	// what a run's overlap policy looks at.
	EarlierRuns(ctx context.Context, id string, due time.Time, limit int) ([]*ScheduleRun, error)
}

// AgentFileRef is one agent file with the agent it belongs to.
type AgentFileRef struct {
	Project, Agent string
	AgentFile
}

// Schedule is a schedule as the store keeps it.
type Schedule struct {
	ID, Project, Agent, Name string
	// Definition is the file's text; Version the agent file's version it
	// was read at.
	Definition []byte
	Version    int64
	Enabled    bool
	// NextDue is the next due time; zero when the schedule has none left.
	NextDue   time.Time
	UpdatedAt time.Time
}

// States of a run.
const (
	// RunPending is a run claimed but not started: being started, or
	// queued behind the schedule's previous run.
	RunPending = "pending"
	// RunStarted is a run whose prompt is in its session's log.
	RunStarted = "started"
	// RunSkipped is a due time that did not run, by policy (missed,
	// overlapping); Reason says which.
	RunSkipped = "skipped"
	// RunFailed is a run that could not start; Reason says why.
	RunFailed = "failed"
)

// ScheduleRun is one due time of a schedule and what became of it.
type ScheduleRun struct {
	ID, ScheduleID, Project, Agent, Name string
	DueAt                                time.Time
	State, Reason                        string
	// SessionID is the session the run sends its prompt to: chosen when
	// it is claimed, for a new session as for an existing one.
	SessionID string
	// SinceSeq is the session's last sequence when the run was claimed:
	// a prompt of the run in the log after it means the run started.
	SinceSeq   int64
	Owner      string
	OwnerUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// NewRunID returns a fresh id for a run.
func NewRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "run-" + hex.EncodeToString(b)
}

const scheduleColumns = `id, project, agent, name, definition, version, enabled, next_due, updated_at`

func scanSchedule(sc scanner) (*Schedule, error) {
	var (
		s             Schedule
		enabled       int
		next, updated int64
	)
	if err := sc.Scan(&s.ID, &s.Project, &s.Agent, &s.Name, &s.Definition, &s.Version, &enabled, &next, &updated); err != nil {
		return nil, err
	}
	s.Enabled, s.NextDue, s.UpdatedAt = enabled != 0, fromMicros(next), fromMicros(updated)
	return &s, nil
}

const runColumns = `id, schedule_id, project, agent, name, due_at, state, reason, session_id, since_seq, owner, owner_until, created_at, updated_at`

func scanRun(sc scanner) (*ScheduleRun, error) {
	var (
		r                        ScheduleRun
		due, until, created, upd int64
	)
	if err := sc.Scan(&r.ID, &r.ScheduleID, &r.Project, &r.Agent, &r.Name, &due, &r.State, &r.Reason, &r.SessionID,
		&r.SinceSeq, &r.Owner, &until, &created, &upd); err != nil {
		return nil, err
	}
	r.DueAt, r.OwnerUntil, r.CreatedAt, r.UpdatedAt = fromMicros(due), fromMicros(until), fromMicros(created), fromMicros(upd)
	return &r, nil
}

// ScheduleFiles implements ScheduleStore.
func (t *teamSQL) ScheduleFiles(ctx context.Context) ([]AgentFileRef, error) {
	return list(ctx, t, "schedule files", func(sc scanner) (AgentFileRef, error) {
		var f AgentFileRef
		err := sc.Scan(&f.Project, &f.Agent, &f.Path, &f.Data, &f.Version)
		return f, err
	}, `SELECT project, agent, path, data, version FROM agent_files WHERE path LIKE 'schedule/%' ORDER BY project, agent, path`)
}

// PutSchedule implements ScheduleStore.
func (t *teamSQL) PutSchedule(ctx context.Context, s *Schedule) (bool, error) {
	const op = "put schedule"
	if s.Project == "" || s.Agent == "" || s.Name == "" {
		return false, fmt.Errorf("%s: %w: a schedule needs a project, an agent and a name", op, ErrInvalid)
	}
	if err := t.begin(op); err != nil {
		return false, err
	}
	id := "schedule-" + NewRunID()[len("run-"):]
	n, err := t.exec(ctx, `INSERT INTO schedules (`+scheduleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project, agent, name) DO UPDATE SET definition = excluded.definition, version = excluded.version,
			enabled = excluded.enabled, next_due = excluded.next_due, updated_at = excluded.updated_at
		WHERE schedules.version <> excluded.version`,
		id, s.Project, s.Agent, s.Name, nonNil(s.Definition), s.Version, boolInt(s.Enabled), micros(s.NextDue), time.Now().UnixMicro())
	if err != nil {
		return false, t.classify(ctx, op, err)
	}
	err = t.get(ctx, op, "schedule "+s.Name, func(sc scanner) error { return sc.Scan(&s.ID) },
		`SELECT id FROM schedules WHERE project = ? AND agent = ? AND name = ?`, s.Project, s.Agent, s.Name)
	return n > 0, err
}

// DeleteSchedule implements ScheduleStore.
func (t *teamSQL) DeleteSchedule(ctx context.Context, project, agent, name string) error {
	return t.one(ctx, "delete schedule", "schedule "+name,
		`DELETE FROM schedules WHERE project = ? AND agent = ? AND name = ?`, project, agent, name)
}

// ListSchedules implements ScheduleStore.
func (t *teamSQL) ListSchedules(ctx context.Context, project, agent string) ([]*Schedule, error) {
	q := `SELECT ` + scheduleColumns + ` FROM schedules WHERE 1 = 1`
	var args []any
	for _, c := range []struct{ col, v string }{{"project", project}, {"agent", agent}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	return list(ctx, t, "list schedules", scanSchedule, q+` ORDER BY project, agent, name`, args...)
}

// GetSchedule implements ScheduleStore.
func (t *teamSQL) GetSchedule(ctx context.Context, project, agent, name string) (s *Schedule, err error) {
	err = t.get(ctx, "get schedule", "schedule "+name+" of agent "+agent, func(sc scanner) (err error) { s, err = scanSchedule(sc); return err },
		`SELECT `+scheduleColumns+` FROM schedules WHERE project = ? AND agent = ? AND name = ?`, project, agent, name)
	return s, err
}

// DueSchedules implements ScheduleStore.
func (t *teamSQL) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*Schedule, error) {
	return list(ctx, t, "due schedules", scanSchedule, `SELECT `+scheduleColumns+` FROM schedules
		WHERE enabled = 1 AND next_due > 0 AND next_due <= ? ORDER BY next_due LIMIT ?`, now.UnixMicro(), limit)
}

// NextWake implements ScheduleStore.
func (t *teamSQL) NextWake(ctx context.Context) (time.Time, error) {
	const op = "next schedule wake"
	if err := t.begin(op); err != nil {
		return time.Time{}, err
	}
	var at sql.NullInt64
	if err := t.queryRow(ctx, `SELECT MIN(t) FROM (
		SELECT MIN(next_due) AS t FROM schedules WHERE enabled = 1 AND next_due > 0
		UNION ALL SELECT MIN(owner_until) FROM schedule_runs WHERE state = 'pending') AS wakes`).Scan(&at); err != nil {
		return time.Time{}, t.classify(ctx, op, err)
	}
	return fromMicros(at.Int64), nil
}

// ClaimDue implements ScheduleStore.
func (t *teamSQL) ClaimDue(ctx context.Context, s *Schedule, next time.Time, run *ScheduleRun) (bool, error) {
	const op = "claim a due schedule"
	if err := t.begin(op); err != nil {
		return false, err
	}
	claimed := false
	err := t.tx(ctx, func(exec func(q string, args ...any) (int64, error)) error {
		n, err := exec(`UPDATE schedules SET next_due = ? WHERE id = ? AND enabled = 1 AND next_due = ?`,
			micros(next), s.ID, micros(s.NextDue))
		if err != nil || n == 0 {
			return err
		}
		claimed = true
		if run == nil {
			return nil
		}
		_, err = exec(`INSERT INTO schedule_runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (schedule_id, due_at) DO NOTHING`, runArgs(run)...)
		return err
	})
	if err != nil {
		return false, t.classify(ctx, op, err)
	}
	return claimed, nil
}

func runArgs(r *ScheduleRun) []any {
	now := time.Now().UnixMicro()
	return []any{r.ID, r.ScheduleID, r.Project, r.Agent, r.Name, micros(r.DueAt), r.State, r.Reason, r.SessionID,
		r.SinceSeq, r.Owner, micros(r.OwnerUntil), now, now}
}

// AddRun implements ScheduleStore.
func (t *teamSQL) AddRun(ctx context.Context, run *ScheduleRun) error {
	const op = "add a schedule run"
	if err := t.begin(op); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `INSERT INTO schedule_runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, runArgs(run)...); err != nil {
		return t.classify(ctx, op, err)
	}
	return nil
}

// TakeRuns implements ScheduleStore.
func (t *teamSQL) TakeRuns(ctx context.Context, owner string, now, until time.Time, limit int) ([]*ScheduleRun, error) {
	const op = "take schedule runs"
	if err := checkID("run owner", owner); err != nil {
		return nil, err
	}
	runs, err := list(ctx, t, op, scanRun, `SELECT `+runColumns+` FROM schedule_runs
		WHERE state = 'pending' AND (owner = ? OR owner_until < ?) ORDER BY due_at LIMIT ?`, owner, now.UnixMicro(), limit)
	if err != nil {
		return nil, err
	}
	taken := runs[:0]
	for _, r := range runs {
		n, err := t.exec(ctx, `UPDATE schedule_runs SET owner = ?, owner_until = ?, updated_at = ?
			WHERE id = ? AND state = 'pending' AND owner = ? AND owner_until = ?`,
			owner, until.UnixMicro(), time.Now().UnixMicro(), r.ID, r.Owner, micros(r.OwnerUntil))
		if err != nil {
			return nil, t.classify(ctx, op, err)
		}
		if n == 1 {
			r.Owner, r.OwnerUntil = owner, toMicros(until)
			taken = append(taken, r)
		}
	}
	return taken, nil
}

// UpdateRun implements ScheduleStore.
func (t *teamSQL) UpdateRun(ctx context.Context, run *ScheduleRun, owner string) (bool, error) {
	const op = "update a schedule run"
	if err := t.begin(op); err != nil {
		return false, err
	}
	n, err := t.exec(ctx, `UPDATE schedule_runs SET state = ?, reason = ?, session_id = ?, since_seq = ?, owner_until = ?, updated_at = ?
		WHERE id = ? AND owner = ? AND state = 'pending'`,
		run.State, run.Reason, run.SessionID, run.SinceSeq, micros(run.OwnerUntil), time.Now().UnixMicro(), run.ID, owner)
	if err != nil {
		return false, t.classify(ctx, op, err)
	}
	return n == 1, nil
}

// ListRuns implements ScheduleStore.
func (t *teamSQL) ListRuns(ctx context.Context, project, agent, name string, limit int) ([]*ScheduleRun, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	q := `SELECT ` + runColumns + ` FROM schedule_runs WHERE project = ?`
	args := []any{project}
	for _, c := range []struct{ col, v string }{{"agent", agent}, {"name", name}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	return list(ctx, t, "list schedule runs", scanRun, q+` ORDER BY due_at DESC, id DESC LIMIT ?`, append(args, min(limit, MaxPageSize))...)
}

// EarlierRuns implements ScheduleStore.
func (t *teamSQL) EarlierRuns(ctx context.Context, id string, due time.Time, limit int) ([]*ScheduleRun, error) {
	return list(ctx, t, "earlier schedule runs", scanRun, `SELECT `+runColumns+` FROM schedule_runs
		WHERE schedule_id = ? AND due_at < ? AND state IN ('pending', 'started') ORDER BY due_at DESC LIMIT ?`,
		id, micros(due), min(max(limit, 1), MaxPageSize))
}
