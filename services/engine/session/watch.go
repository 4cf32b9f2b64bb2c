package session

import (
	"context"
	"fmt"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// A session watches its environment's notices (a background command
// finishing) while a task runs, and afterwards for as long as background
// commands are still running there. A report that arrives during a task
// reaches the model at the next turn; one that arrives while the session is
// idle starts a task of its own. Notices that come while nobody watches
// are kept by the environment for the next watcher.

// watcher is a running watch of one environment.
type watcher struct {
	envID  string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// watch makes sure the session watches the environment envID.
func (rt *Runtime) watch(client penguinv1.EnvironmentServiceClient, envID string) {
	rt.mu.Lock()
	if w := rt.watcher; w != nil && w.envID == envID && w.ctx.Err() == nil {
		rt.mu.Unlock()
		return
	}
	old := rt.watcher
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{envID: envID, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	rt.watcher = w
	rt.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	m := rt.m
	m.mu.Lock()
	rt.refs++ // the watch keeps the runtime loaded
	m.mu.Unlock()
	go func() {
		defer func() {
			rt.mu.Lock()
			if rt.watcher == w {
				rt.watcher = nil
			}
			rt.mu.Unlock()
			close(w.done)
			m.release(rt)
		}()
		stream, err := client.WatchEnvironment(ctx, &penguinv1.WatchEnvironmentRequest{EnvironmentId: envID})
		if err != nil {
			return
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				if ctx.Err() == nil {
					m.log.Debug("the environment watch ended", "session", rt.id, "error", err)
				}
				return
			}
			if bd := resp.GetBackgroundDone(); bd != nil {
				m.deliverNotice(rt.id, commandNotice(bd))
				rt.settleWatch(client)
			}
		}
	}()
}

// watchGrace is how long a watch goes on after the environment stops
// running background commands: a notice of a command that exited just
// before is still on its way, and the environment hands it to the
// watchers of the moment only.
const watchGrace = time.Second

// settleWatch ends the watch, after watchGrace, unless a task runs or
// background commands still run in the environment by then.
func (rt *Runtime) settleWatch(client penguinv1.EnvironmentServiceClient) {
	rt.mu.Lock()
	w := rt.watcher
	rt.mu.Unlock()
	if w == nil {
		return
	}
	go func() {
		t := time.NewTimer(watchGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-w.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(w.ctx, storeTimeout)
		defer cancel()
		if !rt.keepWatching(ctx, client, w.envID) {
			w.cancel()
		}
	}()
}

// keepWatching reports whether the session should go on watching: a task
// runs, or background commands still run in the environment.
func (rt *Runtime) keepWatching(ctx context.Context, client penguinv1.EnvironmentServiceClient, envID string) bool {
	if rt.busy() {
		return true
	}
	resp, err := client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: envID})
	if err != nil {
		return false
	}
	for _, p := range resp.GetProcesses() {
		if p.GetBackground() && p.GetState() == penguinv1.ProcessState_PROCESS_STATE_RUNNING {
			return true
		}
	}
	return false
}

// stopWatch ends the session's watch, if any.
func (rt *Runtime) stopWatch() {
	rt.mu.Lock()
	w := rt.watcher
	rt.mu.Unlock()
	if w != nil {
		w.cancel()
		<-w.done
	}
}

// commandNotice is the completion report of a background command, a user
// message from the harness.
func commandNotice(bd *penguinv1.BackgroundDone) *penguinv1.OmniMessage {
	status := enumword.Word(bd.GetStopReason())
	if bd.GetStopReason() == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		status = "completed"
	}
	out := bd.GetOutput()
	if len(out) > maxReport {
		out = fmt.Sprintf("[...%d chars of earlier output dropped...]\n", len(out)-maxReport) + out[len(out)-maxReport:]
	}
	if out == "" {
		out = "[no output]"
	}
	head := loop.Block("background_task_done", fmt.Sprintf("kind: command\nid: %s\nstatus: %s\ndetail: exit code %d", bd.GetProcessId(), status, bd.GetExitCode()))
	return loop.HarnessText(head + "\nCommand: " + bd.GetCommand() + "\nOutput not yet delivered:\n" + out)
}
