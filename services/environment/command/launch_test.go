package command

import (
	"errors"
	"os/exec"
	"testing"
)

// fakeTracker records what start did with it.
type fakeTracker struct{ launched, released bool }

func (f *fakeTracker) Kill() error    { return nil }
func (f *fakeTracker) Alive() bool    { return false }
func (f *fakeTracker) Release() error { f.released = true; return nil }

// fakeStarter is a Starter that must not be used for a spawned command.
type fakeStarter struct {
	tracker *fakeTracker
	started bool
}

func (f *fakeStarter) Launch(*exec.Cmd) (Tracker, error) {
	f.tracker.launched = true
	return f.tracker, nil
}

func (f *fakeStarter) Start(*exec.Cmd) (Process, Tracker, error) {
	f.started = true
	return nil, nil, errors.New("the starter was used")
}

type fakeProcess struct{}

func (fakeProcess) Pid() int           { return 42 }
func (fakeProcess) Wait() (int, error) { return 0, nil }

// TestStartSpawns checks how a command with a spawn of its own (a pseudo
// console on Windows) starts, on any system: prepared by the launcher
// (its tracker), started by spawn, never by the environment's starter or
// cmd.Start; a spawn that fails releases the tracker.
func TestStartSpawns(t *testing.T) {
	l := &fakeStarter{tracker: &fakeTracker{}}
	cmd := exec.Command("never-run")
	var spawned *exec.Cmd
	proc, tracker, err := start(l, cmd, func(c *exec.Cmd) (Process, error) { spawned = c; return fakeProcess{}, nil })
	if err != nil || spawned != cmd || proc.Pid() != 42 || tracker != l.tracker || !l.tracker.launched || l.started || cmd.Process != nil {
		t.Fatalf("start with spawn: %v, spawned %v, proc %v, tracker %v, launched %v, starter used %v, cmd.Start used %v",
			err, spawned != nil, proc, tracker, l.tracker.launched, l.started, cmd.Process != nil)
	}
	if l.tracker.released {
		t.Fatal("the tracker of a started command was released")
	}
	l = &fakeStarter{tracker: &fakeTracker{}}
	_, _, err = start(l, exec.Command("never-run"), func(*exec.Cmd) (Process, error) { return nil, errors.New("no console") })
	if err == nil || !l.tracker.released {
		t.Fatalf("a spawn that failed: %v, tracker released %v", err, l.tracker.released)
	}
	// Without spawn, the starter starts it.
	l = &fakeStarter{tracker: &fakeTracker{}}
	if _, _, err := start(l, exec.Command("never-run"), nil); err == nil || !l.started {
		t.Fatalf("without spawn the starter was not used: %v", err)
	}
}
