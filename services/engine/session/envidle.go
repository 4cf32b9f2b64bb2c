package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// DefaultEnvironmentIdleTimeout is how long a session's environment
// outlives the session's last use of it when Options set no
// EnvironmentIdleTimeout: long enough that a person who reads an answer
// and types the next prompt finds their terminals and background
// commands still there, short enough that sessions left behind give
// their processes and memory back within the hour.
const DefaultEnvironmentIdleTimeout = 15 * time.Minute

// idleEnvs disposes of the environments sessions stopped using.
//
// It counts, per session that owns an environment, the tasks that use it
// on this replica: the session's own, and those of its subagents, which
// share it. When the count falls to zero a timer starts; when it fires
// with the count still zero and no background command running there, the
// session's row forgets the environment and the environment is disposed.
// The workspace stays on disk; the session's next tool call gets a fresh
// environment (see toolset.ensure).
//
// A task that starts while its session's environment is being disposed
// waits for the disposal to end and then reads the row afresh, so it
// never uses an environment that is going away; another replica's task
// holds the session's run lease, which the disposal checks first.
type idleEnvs struct {
	m       *Manager
	timeout time.Duration

	mu        sync.Mutex
	users     map[string]int // owning session id: tasks using its environment
	timers    map[string]*idleTimer
	disposing map[string]chan struct{} // closed when the disposal ends
	// begun counts the disposals begun (quiet).
	begun   uint64
	stopped bool
}

func newIdleEnvs(m *Manager, timeout time.Duration) *idleEnvs {
	if timeout <= 0 {
		timeout = DefaultEnvironmentIdleTimeout
	}
	return &idleEnvs{m: m, timeout: timeout, users: map[string]int{}, timers: map[string]*idleTimer{}, disposing: map[string]chan struct{}{}}
}

// use counts one more task using the environment session id owns, first
// waiting for a disposal of it in progress. It reports whether it waited:
// the caller must then read the session's row again.
func (k *idleEnvs) use(ctx context.Context, id string) (waited bool, err error) {
	for {
		k.mu.Lock()
		done := k.disposing[id]
		if done == nil {
			k.users[id]++
			if it := k.timers[id]; it != nil {
				it.t.Stop()
				delete(k.timers, id)
			}
			k.mu.Unlock()
			return waited, nil
		}
		k.mu.Unlock()
		waited = true
		select {
		case <-done:
		case <-ctx.Done():
			return waited, ctx.Err()
		}
	}
}

// quiet returns a mark of the disposals so far, when none of session
// id's environment is in progress: the row read after it still names the
// environment as it is, as long as quiet(id) returns the same mark again
// (no disposal has begun since). It returns false while one is in
// progress.
func (k *idleEnvs) quiet(id string) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.begun, k.disposing[id] == nil
}

// release counts one task fewer using the environment session id owns;
// with the last one gone, the idle timer starts when the session has an
// environment to dispose of.
func (k *idleEnvs) release(id string, hasEnv bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.users[id]--; k.users[id] > 0 {
		return
	}
	delete(k.users, id)
	if hasEnv {
		k.arm(id)
	}
}

// idle starts the idle timer of a session that owns an environment no
// task uses: one made when the session was created.
func (k *idleEnvs) idle(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.users[id] == 0 {
		k.arm(id)
	}
}

// arm (re)starts the session's idle timer; k.mu is held.
func (k *idleEnvs) arm(id string) {
	if k.stopped {
		return
	}
	if old := k.timers[id]; old != nil {
		old.t.Stop()
	}
	it := &idleTimer{}
	it.t = time.AfterFunc(k.timeout, func() { k.fire(id, it) })
	k.timers[id] = it
}

// idleTimer is one idle timer; its identity tells a timer that fires from
// the one that replaced it.
type idleTimer struct{ t *time.Timer }

// fire disposes of the session's environment, unless a task began using
// it since timer t was set.
func (k *idleEnvs) fire(id string, t *idleTimer) {
	k.mu.Lock()
	if k.timers[id] != t || k.users[id] > 0 || k.stopped {
		k.mu.Unlock()
		return
	}
	delete(k.timers, id)
	done := make(chan struct{})
	k.disposing[id] = done
	k.begun++
	k.mu.Unlock()

	again := k.m.disposeIdle(id)

	k.mu.Lock()
	delete(k.disposing, id)
	close(done)
	if again && k.users[id] == 0 {
		k.arm(id)
	}
	k.mu.Unlock()
}

// forget stops the idle timer of a session being deleted, which disposes
// of its environment itself.
func (k *idleEnvs) forget(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if it := k.timers[id]; it != nil {
		it.t.Stop()
		delete(k.timers, id)
	}
}

// stop stops every idle timer: the engine is shutting down. An
// environment whose timer did not fire is disposed of when its replica
// stops (in `penguin serve`, with the engine), or after the session's
// next task on a replica that runs again.
func (k *idleEnvs) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	for id, it := range k.timers {
		it.t.Stop()
		delete(k.timers, id)
	}
}

// disposeIdle disposes of the environment of session id, which no task of
// this replica uses, and reports whether to look again after another idle
// timeout: background commands still run there, or the store could not
// be asked. Nothing is disposed while a replica holds the session's run
// lease (its task uses the environment; that replica starts the timer
// again when the task ends).
func (m *Manager) disposeIdle(id string) (again bool) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if rt := m.loaded(id); rt != nil {
		busy, watching := rt.busy(), rt.watcher.Active()
		m.release(rt)
		if busy {
			return false
		}
		if watching {
			return true
		}
	}
	if _, _, held, err := m.leases.Holder(ctx, id); err != nil || held {
		if err != nil {
			m.log.Warn("could not check the run lease of a session with an idle environment; trying again later", "session", id, "error", err)
		}
		return err != nil
	}
	row, err := m.store.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		m.log.Warn("could not read a session with an idle environment; trying again later", "session", id, "error", err)
		return true
	}
	cfg, _ := parseConfig(row.Config)
	if row.EnvironmentID == "" || cfg.SharedEnvironment {
		return false
	}
	envID, addr := row.EnvironmentID, row.EnvironmentAddr
	// The row forgets the environment first: whoever reads it from now on
	// makes a fresh one rather than use one that is going away.
	if err := m.updateRow(ctx, id, func(r *store.Session, _ *config) {
		if r.EnvironmentID == envID {
			r.EnvironmentID, r.EnvironmentAddr = "", ""
		}
	}); err != nil {
		m.log.Warn("could not record the disposal of an idle environment; trying again later", "session", id, "error", err)
		return !errors.Is(err, store.ErrNotFound)
	}
	m.disposeEnvironment(ctx, id, addr, envID)
	m.metrics.idleDisposals.Inc()
	m.log.Debug("disposed of an idle environment", "session", id, "environment", envID)
	return false
}
