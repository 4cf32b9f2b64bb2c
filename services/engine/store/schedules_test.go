package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// TestScheduleClaims: of many replicas claiming one due time at once,
// exactly one records its run; a due time is never recorded twice; a
// pending run moves to another owner only once its owner's time passed;
// and a run's update needs its owner. On both backends.
func TestScheduleClaims(t *testing.T) {
	onBothBackends(t, scheduleClaims)
}

// onBothBackends runs test on a fresh SQLite store and on a fresh
// PostgreSQL schema, each in a subtest of its backend's name.
func onBothBackends(t *testing.T, test func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		test(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		env := newPGEnv(t)
		_, url := env.freshSchema(t)
		st, err := store.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		test(t, st)
	})
}

func scheduleClaims(t *testing.T, st store.Store) {
	ctx := context.Background()
	due := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	// wake checks NextWake: the earliest of the enabled schedules' due
	// times and the pending runs' owners' times.
	wake := func(want time.Time) {
		t.Helper()
		if got, err := st.NextWake(ctx); err != nil || !got.Equal(want) {
			t.Fatalf("next wake %v, %v; want %v", got, err, want)
		}
	}
	wake(time.Time{})
	s := &store.Schedule{Project: "default", Agent: "a", Name: "n", Definition: []byte("prompt: p\n"), Version: 1, Enabled: true, NextDue: due}
	if changed, err := st.PutSchedule(ctx, s); err != nil || !changed || s.ID == "" {
		t.Fatalf("put: %v %v %q", changed, err, s.ID)
	}
	if changed, err := st.PutSchedule(ctx, &store.Schedule{Project: "default", Agent: "a", Name: "n", Version: 1, NextDue: due.Add(time.Hour)}); err != nil || changed {
		t.Fatalf("a put at the same version changed the row: %v %v", changed, err)
	}
	wake(due)
	got, err := st.DueSchedules(ctx, due, 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("due: %v %v", got, err)
	}
	if early, _ := st.DueSchedules(ctx, due.Add(-time.Second), 10); len(early) != 0 {
		t.Fatalf("due a second early: %v", early)
	}
	const claimers = 8
	var wg sync.WaitGroup
	wins := make(chan string, claimers)
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := string(rune('A' + i))
			run := &store.ScheduleRun{ID: store.NewRunID(), ScheduleID: got[0].ID, Project: "default", Agent: "a", Name: "n",
				DueAt: due, State: store.RunPending, Owner: owner, OwnerUntil: due.Add(time.Minute)}
			won, err := st.ClaimDue(ctx, got[0], due.Add(time.Hour), run)
			if err != nil {
				t.Error(err)
			}
			if won {
				wins <- owner
			}
		}()
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d claimers won one due time: %v", len(winners), winners)
	}
	runs, err := st.ListRuns(ctx, "default", "a", "n", 10)
	if err != nil || len(runs) != 1 || runs[0].Owner != winners[0] {
		t.Fatalf("runs: %v %v", runs, err)
	}
	wake(due.Add(time.Minute)) // the pending run's owner's time, before the next due time
	// The same due time claimed again (a definition edited back to it)
	// moves the due time but records nothing.
	again := *got[0]
	again.NextDue = due.Add(time.Hour)
	if won, err := st.ClaimDue(ctx, &again, due.Add(2*time.Hour), &store.ScheduleRun{ID: store.NewRunID(), ScheduleID: got[0].ID, Project: "default", Agent: "a", Name: "n", DueAt: due, State: store.RunPending}); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	if runs, _ := st.ListRuns(ctx, "default", "a", "n", 10); len(runs) != 1 {
		t.Fatalf("a due time recorded twice: %v", runs)
	}
	// Another owner takes the run only once the owner's time has passed.
	if taken, err := st.TakeRuns(ctx, "Z", due, due.Add(time.Minute), 10); err != nil || len(taken) != 0 {
		t.Fatalf("taken early: %v %v", taken, err)
	}
	taken, err := st.TakeRuns(ctx, "Z", due.Add(2*time.Minute), due.Add(3*time.Minute), 10)
	if err != nil || len(taken) != 1 || taken[0].Owner != "Z" {
		t.Fatalf("take: %v %v", taken, err)
	}
	r := runs[0]
	r.State = store.RunStarted
	if ok, err := st.UpdateRun(ctx, r, winners[0]); err != nil || ok {
		t.Fatalf("the former owner updated the run: %v %v", ok, err)
	}
	wake(due.Add(3 * time.Minute))
	if ok, err := st.UpdateRun(ctx, r, "Z"); err != nil || !ok {
		t.Fatalf("the owner could not update the run: %v %v", ok, err)
	}
	wake(due.Add(2 * time.Hour)) // no run pending: the next due time
	if pending, _ := st.TakeRuns(ctx, "Y", due.Add(time.Hour), due.Add(2*time.Hour), 10); len(pending) != 0 {
		t.Fatalf("a started run was taken: %v", pending)
	}
	if err := st.AddRun(ctx, &store.ScheduleRun{ID: store.NewRunID(), ScheduleID: got[0].ID, Project: "default", Agent: "a", Name: "n", DueAt: due, State: store.RunPending}); err == nil {
		t.Fatal("a second run of one due time was added")
	}
	// The runs an overlap policy looks at: pending or started, due before
	// the run, newest first; skipped and failed ones are not.
	for i, state := range []string{store.RunSkipped, store.RunPending, store.RunFailed} {
		if err := st.AddRun(ctx, &store.ScheduleRun{ID: store.NewRunID(), ScheduleID: got[0].ID, Project: "default", Agent: "a", Name: "n",
			DueAt: due.Add(time.Duration(i+1) * time.Minute), State: state}); err != nil {
			t.Fatal(err)
		}
	}
	earlier, err := st.EarlierRuns(ctx, got[0].ID, due.Add(10*time.Minute), 10)
	if err != nil || len(earlier) != 2 || earlier[0].State != store.RunPending || !earlier[0].DueAt.Equal(due.Add(2*time.Minute)) ||
		earlier[1].State != store.RunStarted || !earlier[1].DueAt.Equal(due) {
		t.Fatalf("earlier runs: %v %v", earlier, err)
	}
	if earlier, err := st.EarlierRuns(ctx, got[0].ID, due, 10); err != nil || len(earlier) != 0 {
		t.Fatalf("runs earlier than the first: %v %v", earlier, err)
	}
}
