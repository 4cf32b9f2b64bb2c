package engine_test

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
)

// TestScheduleWakesARestingReplica checks the schedules' rest on a SQLite
// file: a replica whose ticks have gone quiet (nothing written, nothing
// due) still fires a schedule that another process's engine on the same
// file (here, another engine of this test's, which fires nothing) adds
// while it rests, at its due time.
func TestScheduleWakesARestingReplica(t *testing.T) {
	b := enginetest.NewBackends(t, emulator.Turn{Match: "WAKE-5521", Text: "ok"})
	url := filepath.Join(t.TempDir(), "penguin.db")
	firing := startAgentReplica(t, url, b)
	firing.e.StartResuming()
	editor := startAgentReplica(t, url, b)
	// The start-up's writes settle (the file's stamps are trusted once
	// they are a little older than the file system's clock tick), and the
	// replica's ticks find nothing to do.
	time.Sleep(4 * time.Second)

	ctx := t.Context()
	due := time.Now().Add(2 * time.Second)
	schedules := penguinv1.NewScheduleServiceClient(editor.conn)
	if _, err := schedules.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: "wake", Schedule: &penguinv1.Schedule{
		Prompt: "WAKE-5521", Enabled: true, StartAt: timestamppb.New(due), Period: "1h", Workspace: "ws", Model: enginetest.Model,
	}}); err != nil {
		t.Fatal(err)
	}
	deadline := due.Add(15 * time.Second)
	for {
		runs, err := schedules.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: "wake"})
		if err != nil {
			t.Fatal(err)
		}
		if r := runs.GetRuns(); len(r) > 0 && r[0].GetState() != "pending" {
			if r[0].GetState() != "started" {
				t.Fatalf("the run is %s: %s", r[0].GetState(), r[0].GetReason())
			}
			t.Logf("started %v after its due time", time.Since(due).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run started within %v of its due time: %v", time.Until(deadline)+15*time.Second, runs.GetRuns())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
