// Package scheduler fires an agent's schedules (package schedule) on every
// engine replica, exactly once per due time between them, and serves
// ScheduleService.
//
// Each replica, every tick (a second):
//
//  1. copies the definitions it finds among the agents' files into the
//     store's schedules table when they changed, with their next due time
//     (every SyncEvery, 10 s, so a model's edit is picked up well within
//     the 30 s PenguinHarness promises; a write through ScheduleService is
//     copied at once);
//  2. claims the due ones: one transaction moves a schedule's next due
//     time from the value it read to the next one and records the run,
//     so of the replicas that read a due time exactly one claims it, and
//     a due time is recorded at most once (store.ScheduleStore);
//  3. starts the pending runs it owns, or whose owner's claim has lapsed
//     (a replica that died between claiming and starting): it creates the
//     run's session (its id was chosen at the claim, so a second try
//     creates the same one) and starts the task through the session
//     manager, which checks under the session's run lease that the
//     prompt is not in the log already. From then on the run is a durable
//     task like any other: a replica that dies while it runs hands it
//     over through the run lease.
//
// On a SQLite file, which every commit writes whatever process made it,
// a replica rests between ticks that find nothing to do: until the file's
// stamps move (store.ChangeChecker) or the next due time, or a pending
// run's owner's time, comes (store.ScheduleStore's NextWake), its ticks
// run no query. An idle server then asks SQLite nothing. On PostgreSQL,
// which other machines write, every tick looks.
//
// A due time that every replica missed (it is older than MissedAfter when
// claimed) follows the schedule's missed policy: run once (only the
// latest of several missed due times) or skip, recorded as skipped. A due
// time that comes while the schedule's previous run still runs follows
// its overlap policy: skip, recorded as skipped, or queue, which keeps the
// run pending until the previous one ends.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/schedule"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Defaults of [Options].
const (
	DefaultTick        = time.Second
	DefaultSyncEvery   = 10 * time.Second
	DefaultMissedAfter = time.Minute
	// maxStarting bounds the runs one replica starts at once.
	maxStarting = 8
	// batch is how many due schedules or pending runs one tick takes.
	batch = 100
	// overlapLook is how many earlier runs the overlap policy looks at:
	// the policies keep them from overlapping, so only the latest few can
	// still run (a run now, or one a killed replica left pending).
	overlapLook = 5
)

// Source is the source of the sessions a schedule creates.
const Source = "schedule"

// Options configure a Scheduler.
type Options struct {
	Store    store.Store
	Sessions *session.Manager
	Agents   *agentmirror.Mirror
	// Tick, SyncEvery and MissedAfter default to the constants above.
	Tick, SyncEvery, MissedAfter time.Duration
	Logger                       *slog.Logger
}

// Scheduler fires the schedules on one replica.
type Scheduler struct {
	opts  Options
	log   *slog.Logger
	owner string
	ttl   time.Duration

	stop     chan struct{}
	done     chan struct{}
	started  sync.Once
	mu       sync.Mutex
	starting map[string]bool // runs being started here
	wg       sync.WaitGroup
	lastSync time.Time

	// The tick's rest, on a store that tells when it may have changed
	// (store.ChangeChecker: a SQLite file). changed is its check; nil on
	// another store, whose ticks always look. A tick that found nothing
	// to do (no schedule due, no run to start) sets quiet and wakeAt: the
	// next schedule's due time, a pending run's owner's time, or the next
	// Sync of a change not synced yet (zero for none). Until then a tick
	// runs no query while the store has not changed, so an idle server
	// with no schedule due asks SQLite nothing.
	changed func() bool
	quiet   bool
	wakeAt  time.Time
	syncDue bool
}

// New returns a Scheduler; Start sets it going.
func New(opts Options) *Scheduler {
	if opts.Tick <= 0 {
		opts.Tick = DefaultTick
	}
	if opts.SyncEvery <= 0 {
		opts.SyncEvery = DefaultSyncEvery
	}
	if opts.MissedAfter <= 0 {
		opts.MissedAfter = DefaultMissedAfter
	}
	owner, ttl := opts.Sessions.Replica()
	s := &Scheduler{opts: opts, log: logger.OrDiscard(opts.Logger), owner: owner, ttl: ttl,
		stop: make(chan struct{}), done: make(chan struct{}), starting: map[string]bool{}}
	if cc, ok := opts.Store.(store.ChangeChecker); ok {
		s.changed = cc.ChangeCheck()
	}
	return s
}

// Start fires schedules every tick until Stop.
func (s *Scheduler) Start() {
	s.started.Do(s.loop)
}

func (s *Scheduler) loop() {
	go func() {
		defer close(s.done)
		for {
			s.tick()
			// Between half a tick and one and a half: the replicas'
			// ticks drift apart, so the due times of a moment spread
			// over them instead of all going to the one that ticks
			// first after it.
			t := time.NewTimer(s.opts.Tick/2 + rand.N(s.opts.Tick))
			select {
			case <-s.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// Stop stops firing and waits for the runs being started here; a run it
// had claimed but not started is taken over by another replica once its
// claim lapses.
func (s *Scheduler) Stop() {
	s.started.Do(func() { close(s.done) }) // never started: nothing to wait for
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.wg.Wait()
}

func (s *Scheduler) tick() {
	if s.changed != nil {
		if s.changed() {
			s.syncDue, s.quiet = true, false
		} else if s.quiet && (s.wakeAt.IsZero() || time.Now().Before(s.wakeAt)) {
			return // nothing written, nothing due
		}
	}
	s.quiet = false
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Tick*5)
	defer cancel()
	now, err := s.opts.Store.Now(ctx)
	if err != nil {
		s.log.Warn("schedules: could not read the store's clock", "error", err)
		return
	}
	synced := false
	if now.Sub(s.lastSync) >= s.opts.SyncEvery {
		if err := s.Sync(ctx); err != nil {
			s.log.Warn("schedules: could not read the definitions", "error", err)
		} else {
			s.lastSync, s.syncDue, synced = now, false, true
		}
	}
	due, err := s.claim(ctx, now)
	if err != nil {
		s.log.Warn("schedules: could not claim due runs", "error", err)
	}
	taken, perr := s.startPending(ctx, now)
	if perr != nil {
		s.log.Warn("schedules: could not take pending runs", "error", perr)
	}
	if s.changed != nil && err == nil && perr == nil && due == 0 && taken == 0 && !synced {
		s.rest(ctx)
	}
}

// rest lets the ticks that follow run no query until the store changes or
// the next thing comes due: a tick that claimed or took nothing, nor
// synced (Sync's own writes are looked at once more), and starts nothing.
func (s *Scheduler) rest(ctx context.Context) {
	s.mu.Lock()
	starting := len(s.starting)
	s.mu.Unlock()
	if starting > 0 {
		return
	}
	next, err := s.opts.Store.NextWake(ctx)
	if err != nil {
		s.log.Warn("schedules: could not read the next due time", "error", err)
		return
	}
	if s.syncDue {
		if at := s.lastSync.Add(s.opts.SyncEvery); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	s.quiet, s.wakeAt = true, next
}

// Sync copies every changed definition file into the schedules table and
// forgets the schedules whose files are gone. The schedules are listed
// before the files are read: a row another replica records after that
// read (for a file this one has not seen yet) is then not taken for one
// whose file is gone, and kept.
func (s *Scheduler) Sync(ctx context.Context) error {
	rows, err := s.opts.Store.ListSchedules(ctx, "", "")
	if err != nil {
		return err
	}
	files, err := s.opts.Store.ScheduleFiles(ctx)
	if err != nil {
		return err
	}
	now, err := s.opts.Store.Now(ctx)
	if err != nil {
		return err
	}
	seen := map[[3]string]bool{}
	for _, f := range files {
		name, ok := schedule.NameOf(f.Path)
		if !ok {
			continue
		}
		seen[[3]string{f.Project, f.Agent, name}] = true
		if err := s.put(ctx, f.Project, f.Agent, name, f.Data, f.Version, now); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if !seen[[3]string{r.Project, r.Agent, r.Name}] {
			if err := s.opts.Store.DeleteSchedule(ctx, r.Project, r.Agent, r.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// put records one definition at an agent file version: an invalid one is
// kept disabled, so that listings can say what is wrong with it.
func (s *Scheduler) put(ctx context.Context, project, agent, name string, data []byte, version int64, now time.Time) error {
	row := &store.Schedule{Project: project, Agent: agent, Name: name, Definition: data, Version: version}
	if d, err := schedule.Parse(name, data); err == nil && d.Enabled {
		row.Enabled, row.NextDue = true, s.firstDue(d, now)
	}
	changed, err := s.opts.Store.PutSchedule(ctx, row)
	if changed {
		s.log.Info("schedule definition read", "project", project, "agent", agent, "schedule", name, "next_due", row.NextDue)
	}
	return err
}

// firstDue is the due time a definition read at now starts from: the
// latest one that came within MissedAfter before now (a definition is
// read up to SyncEvery after it was written, and a one-shot written for
// "now" must still run), or else the next one. A due time run before the
// definition was edited is not run again: runs are unique per due time.
func (s *Scheduler) firstDue(d *schedule.Definition, now time.Time) time.Time {
	first := d.Next(now.Add(-s.opts.MissedAfter))
	for !first.IsZero() && !first.After(now) {
		next := d.Next(first)
		if next.IsZero() || next.After(now) {
			break
		}
		first = next
	}
	return first
}

// claim records a run for each due schedule it wins, and returns how many
// schedules were due.
func (s *Scheduler) claim(ctx context.Context, now time.Time) (int, error) {
	due, err := s.opts.Store.DueSchedules(ctx, now, batch)
	if err != nil {
		return 0, err
	}
	for _, sc := range due {
		d, err := schedule.Parse(sc.Name, sc.Definition)
		if err != nil {
			// Recorded before a parser change that refuses it now: stop it.
			_, _ = s.opts.Store.ClaimDue(ctx, sc, time.Time{}, nil)
			continue
		}
		run := s.newRun(sc, sc.NextDue, now)
		next := d.Next(sc.NextDue)
		if now.Sub(sc.NextDue) > s.opts.MissedAfter {
			next = d.Next(now)
			if d.MissedPolicy() == schedule.MissedSkip {
				run.State, run.Reason, run.Owner, run.OwnerUntil = store.RunSkipped, "missed: no engine replica was up at its due time", "", time.Time{}
			}
		}
		if run.State == store.RunPending {
			if err := s.target(ctx, sc, d, run); err != nil {
				run.State, run.Reason = store.RunFailed, err.Error()
			}
		}
		won, err := s.opts.Store.ClaimDue(ctx, sc, next, run)
		if err != nil {
			return len(due), err
		}
		if won {
			s.log.Info("schedule due", "project", sc.Project, "agent", sc.Agent, "schedule", sc.Name, "due", sc.NextDue, "run", run.ID, "state", run.State)
		}
	}
	return len(due), nil
}

// newRun is a pending run of sc due at due, owned by this replica.
func (s *Scheduler) newRun(sc *store.Schedule, due, now time.Time) *store.ScheduleRun {
	return &store.ScheduleRun{
		ID: store.NewRunID(), ScheduleID: sc.ID, Project: sc.Project, Agent: sc.Agent, Name: sc.Name,
		DueAt: due, State: store.RunPending, Owner: s.owner, OwnerUntil: now.Add(s.ttl),
	}
}

// target chooses the session of a run: a fresh id for a new session, or
// the existing session, which must be of the schedule's project, with the
// sequence its log has reached.
func (s *Scheduler) target(ctx context.Context, sc *store.Schedule, d *schedule.Definition, run *store.ScheduleRun) error {
	if d.SessionID == "" {
		run.SessionID = session.NewID()
		return nil
	}
	row, err := s.opts.Store.GetSession(ctx, d.SessionID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && row.ProjectID != sc.Project) {
		return fmt.Errorf("the project has no session %s", d.SessionID)
	}
	if err != nil {
		return err
	}
	run.SessionID, run.SinceSeq = row.ID, row.LastSequence
	return nil
}

// startPending starts the pending runs this replica may take, and returns
// how many it took.
func (s *Scheduler) startPending(ctx context.Context, now time.Time) (int, error) {
	if s.opts.Sessions.Closing() {
		return 0, nil
	}
	runs, err := s.opts.Store.TakeRuns(ctx, s.owner, now, now.Add(s.ttl), batch)
	if err != nil {
		return 0, err
	}
	for _, r := range runs {
		s.mu.Lock()
		busy := s.starting[r.ID] || len(s.starting) >= maxStarting
		if !busy {
			s.starting[r.ID] = true
		}
		s.mu.Unlock()
		if busy {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.starting, r.ID)
				s.mu.Unlock()
			}()
			s.start(r)
		}()
	}
	return len(runs), nil
}

// start starts one run and records what became of it; a run left pending
// (queued, or a failure that may pass) is tried again at a later tick.
func (s *Scheduler) start(r *store.ScheduleRun) {
	ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
	defer cancel()
	state, reason := s.launch(ctx, r)
	if state == store.RunPending {
		return
	}
	r.State, r.Reason = state, reason
	ok, err := s.opts.Store.UpdateRun(context.WithoutCancel(ctx), r, s.owner)
	switch {
	case err != nil:
		s.log.Warn("schedules: could not record a run's start; the next look finds its prompt in the log", "run", r.ID, "error", err)
	case !ok:
		s.log.Info("schedules: another replica took the run over", "run", r.ID)
	default:
		s.log.Info("schedule run "+state, "project", r.Project, "agent", r.Agent, "schedule", r.Name, "run", r.ID, "session", r.SessionID, "reason", reason)
	}
}

// launch creates the run's session if it is new and starts its task. It
// returns the run's new state and its reason.
func (s *Scheduler) launch(ctx context.Context, r *store.ScheduleRun) (string, string) {
	sc, err := s.opts.Store.GetSchedule(ctx, r.Project, r.Agent, r.Name)
	if errors.Is(err, store.ErrNotFound) {
		return store.RunFailed, "the schedule was deleted before its run started"
	}
	if err != nil {
		return store.RunPending, ""
	}
	d, err := schedule.Parse(sc.Name, sc.Definition)
	if err != nil {
		return store.RunFailed, err.Error()
	}
	if d.SessionID == "" {
		if state, reason, wait := s.overlaps(ctx, r, d); wait || state != "" {
			return state, reason
		}
		if err := s.create(ctx, r, d); err != nil {
			if errors.Is(err, session.ErrUnavailable) {
				return store.RunPending, ""
			}
			return store.RunFailed, err.Error()
		}
	}
	_, err = s.opts.Sessions.StartScheduled(ctx, r.SessionID, r.SinceSeq, session.RunSpec{Prompt: d.Prompt})
	switch {
	case err == nil:
		return store.RunStarted, ""
	case errors.Is(err, session.ErrBusy):
		if d.OverlapPolicy() == schedule.OverlapQueue {
			return store.RunPending, ""
		}
		return store.RunSkipped, "overlap: the session was still running a task"
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return store.RunPending, ""
	}
	return store.RunFailed, err.Error()
}

// overlaps applies the overlap policy of a new-session schedule whose
// previous run still runs: a state to record (skipped), or wait to leave
// the run queued. An earlier run still pending counts as running: it is
// being started, or queued itself, and a queued run starts only after
// every earlier one (two queued runs freed at once by the end of the run
// before them would otherwise start side by side).
func (s *Scheduler) overlaps(ctx context.Context, r *store.ScheduleRun, d *schedule.Definition) (state, reason string, wait bool) {
	earlier, err := s.opts.Store.EarlierRuns(ctx, r.ScheduleID, r.DueAt, overlapLook)
	if err != nil {
		return store.RunPending, "", true
	}
	for _, prev := range earlier {
		running := prev.State == store.RunPending
		if !running {
			if running, err = s.opts.Sessions.Running(ctx, prev.SessionID); err != nil {
				return store.RunPending, "", true
			}
		}
		if !running {
			continue
		}
		if d.OverlapPolicy() == schedule.OverlapQueue {
			return store.RunPending, "", true
		}
		what := "the previous run (session " + prev.SessionID + ") was still running"
		if prev.State == store.RunPending {
			what = "an earlier run (due " + prev.DueAt.Format(time.RFC3339) + ") was still to start"
		}
		return store.RunSkipped, "overlap: " + what, false
	}
	return "", "", false
}

// create creates a run's new session; one that a replica which died after
// creating it left is taken as it is.
func (s *Scheduler) create(ctx context.Context, r *store.ScheduleRun, d *schedule.Definition) error {
	if _, err := s.opts.Store.GetSession(ctx, r.SessionID); err == nil {
		return nil
	}
	dir := s.opts.Agents.Dir(r.Project, r.Agent)
	model := &penguinv1.ModelRef{Provider: d.Provider, ModelId: d.ModelID}
	if d.Provider == "" {
		copyDir, err := s.opts.Agents.Sync(ctx, r.Project, r.Agent)
		if err != nil {
			return fmt.Errorf("agent %s: %w", r.Agent, err)
		}
		st, err := agentstate.Load(copyDir)
		if err != nil {
			return err
		}
		model = st.Config.Model.Ref()
	}
	_, err := s.opts.Sessions.Create(ctx, session.CreateSpec{
		ID: r.SessionID, Model: model, Workspace: d.Workspace, AgentState: dir, ProjectID: r.Project,
		Source: Source, Title: r.Name,
	})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}
