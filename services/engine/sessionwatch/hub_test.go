package sessionwatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/sessionwatch"
	"github.com/penguin-agent/penguin/services/engine/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lister serves sessions from a map.
type lister struct {
	mu    sync.Mutex
	rows  map[string]*penguinv1.Session
	reads atomic.Int64
}

func (l *lister) List(context.Context, int, string, ...string) ([]*penguinv1.Session, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*penguinv1.Session
	for _, s := range l.rows {
		out = append(out, s)
	}
	return out, "", nil
}

func (l *lister) Get(_ context.Context, id string) (*penguinv1.Session, error) {
	l.reads.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.rows[id]; ok {
		return s, nil
	}
	return nil, store.ErrNotFound
}

func (l *lister) put(id string, st penguinv1.SessionState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows[id] = &penguinv1.Session{SessionId: id, State: st}
}

func TestChangesWithoutWatchersCostNothing(t *testing.T) {
	l := &lister{rows: map[string]*penguinv1.Session{}}
	h := sessionwatch.New(l, nil)
	for i := range 1000 {
		h.Changed(fmt.Sprint(i))
	}
	if n := l.reads.Load(); n != 0 {
		t.Fatalf("%d reads with nobody watching", n)
	}
}

// TestSlowWatcherIsCutOff: a watcher that stops reading is ended with
// ErrFellBehind once its queue is full, and the hub never blocks.
func TestSlowWatcherIsCutOff(t *testing.T) {
	l := &lister{rows: map[string]*penguinv1.Session{}}
	h := sessionwatch.New(l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stuck, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- h.Watch(ctx, 0, func(ev *penguinv1.WatchSessionsResponse) error {
			if ev.GetSession() != nil {
				once.Do(func() { close(stuck) })
				<-release
			}
			return nil
		})
	}()
	// Wait for the snapshot's end, then make the watcher stuck on its
	// first change.
	l.put("first", penguinv1.SessionState_SESSION_STATE_IDLE)
	for deadline := time.Now().Add(10 * time.Second); ; {
		h.Changed("first")
		select {
		case <-stuck:
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the watcher never got a change")
			}
			continue
		}
		break
	}
	for i := range 400 {
		h.Deleted(fmt.Sprint("gone-", i)) // broadcast at once, never blocking
	}
	close(release)
	select {
	case err := <-done:
		if !errors.Is(err, sessionwatch.ErrFellBehind) {
			t.Fatalf("Watch returned %v, want ErrFellBehind", err)
		}
	case <-ctx.Done():
		t.Fatal("the slow watcher was not cut off")
	}
}

// TestOutcomeShownUntilNextRun: how a task ended rides along with the
// idle session, and is forgotten when the next task starts.
func TestOutcomeShownUntilNextRun(t *testing.T) {
	l := &lister{rows: map[string]*penguinv1.Session{}}
	h := sessionwatch.New(l, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan *penguinv1.SessionChange, 64)
	done := make(chan error, 1)
	go func() {
		done <- h.Watch(ctx, 5, func(ev *penguinv1.WatchSessionsResponse) error {
			if c := ev.GetSession(); c != nil {
				got <- c
			}
			return nil
		})
	}()
	wait := func(match func(*penguinv1.SessionChange) bool, poke func()) *penguinv1.SessionChange {
		t.Helper()
		for {
			poke()
			select {
			case c := <-got:
				if match(c) {
					return c
				}
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal("timed out")
			}
		}
	}
	l.put("s", penguinv1.SessionState_SESSION_STATE_IDLE)
	failed := &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "the model is gone"}
	c := wait(func(c *penguinv1.SessionChange) bool {
		return c.GetLastStatus() == penguinv1.StopReason_STOP_REASON_FAILED
	},
		func() { h.StateChanged("s", failed) })
	if c.GetLastMessage() != "the model is gone" {
		t.Fatalf("change %v", c)
	}
	l.put("s", penguinv1.SessionState_SESSION_STATE_RUNNING)
	wait(func(c *penguinv1.SessionChange) bool {
		return c.GetSession().GetState() == penguinv1.SessionState_SESSION_STATE_RUNNING && c.GetLastStatus() == 0
	}, func() {
		h.StateChanged("s", &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_RUNNING})
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch returned %v", err)
	}
}
