// Package envwatch follows a session's environment for the reports of
// background commands that finish there.
//
// A session watches its environment while a task runs, and afterwards for
// as long as background commands still run there. A report that arrives
// is handed to the session (which gives it to the model at the next turn,
// or starts a task for it when idle). Reports that come while nobody
// watches are kept by the environment for the next watcher, so a watch
// may end whenever nothing is left to wait for.
package envwatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc"
)

// Grace is how long a watch goes on after the environment stops running
// background commands: a report of a command that exited just before is
// still on its way, and the environment hands it to the watchers of the
// moment only.
const Grace = time.Second

// Client is the part of the environment service a watch uses.
type Client interface {
	WatchEnvironment(ctx context.Context, in *penguinv1.WatchEnvironmentRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[penguinv1.WatchEnvironmentResponse], error)
	ListProcesses(ctx context.Context, in *penguinv1.ListProcessesRequest, opts ...grpc.CallOption) (*penguinv1.ListProcessesResponse, error)
}

// Session is the session a Watcher watches for.
type Session interface {
	// Deliver hands a completion report to the session.
	Deliver(notice *penguinv1.OmniMessage)
	// Busy reports whether a task holds the session.
	Busy() bool
	// Hold keeps the session loaded until release is called.
	Hold() (release func())
}

// Watcher runs the watch of one session; at most one environment is
// watched at a time.
type Watcher struct {
	s       Session
	id      string
	timeout time.Duration
	log     *slog.Logger

	mu  sync.Mutex
	cur *watch
}

// watch is a running watch of one environment.
type watch struct {
	envID  string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns an idle Watcher for the session s, named id in logs. timeout
// bounds the question whether background commands still run.
func New(s Session, id string, timeout time.Duration, log *slog.Logger) *Watcher {
	return &Watcher{s: s, id: id, timeout: timeout, log: log}
}

// Watch makes sure the environment envID is watched, ending the watch of
// another one.
func (w *Watcher) Watch(client Client, envID string) {
	w.mu.Lock()
	if c := w.cur; c != nil && c.envID == envID && c.ctx.Err() == nil {
		w.mu.Unlock()
		return
	}
	old := w.cur
	ctx, cancel := context.WithCancel(context.Background())
	c := &watch{envID: envID, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	w.cur = c
	w.mu.Unlock()
	if old != nil {
		old.cancel()
	}
	release := w.s.Hold()
	go func() {
		defer func() {
			w.mu.Lock()
			if w.cur == c {
				w.cur = nil
			}
			w.mu.Unlock()
			close(c.done)
			release()
		}()
		stream, err := client.WatchEnvironment(ctx, &penguinv1.WatchEnvironmentRequest{EnvironmentId: envID})
		if err != nil {
			return
		}
		for {
			resp, err := stream.Recv()
			if err != nil {
				if ctx.Err() == nil {
					w.log.Debug("the environment watch ended", "session", w.id, "error", err)
				}
				return
			}
			if bd := resp.GetBackgroundDone(); bd != nil {
				w.s.Deliver(CommandNotice(bd))
				w.Settle(client)
			}
		}
	}()
}

// Settle ends the watch after Grace, unless a task runs or background
// commands still run in the environment by then.
func (w *Watcher) Settle(client Client) {
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c == nil {
		return
	}
	go func() {
		t := time.NewTimer(Grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, w.timeout)
		defer cancel()
		if !w.keepWatching(ctx, client, c.envID) {
			c.cancel()
		}
	}()
}

// keepWatching reports whether the watch should go on: a task runs, or
// background commands still run in the environment.
func (w *Watcher) keepWatching(ctx context.Context, client Client, envID string) bool {
	if w.s.Busy() {
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

// Active reports whether a watch runs: a task runs, or background
// commands ran in the environment when it was last asked. An environment
// that is watched is in use, however long ago its last tool call was.
func (w *Watcher) Active() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur != nil && w.cur.ctx.Err() == nil
}

// Stop ends the watch, if any, and waits for it to let go.
func (w *Watcher) Stop() {
	w.mu.Lock()
	c := w.cur
	w.mu.Unlock()
	if c != nil {
		c.cancel()
		<-c.done
	}
}

// CommandNotice is the completion report of a background command.
func CommandNotice(bd *penguinv1.BackgroundDone) *penguinv1.OmniMessage {
	status := enumword.Word(bd.GetStopReason())
	if bd.GetStopReason() == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		status = "completed"
	}
	out := loop.ReportTail(bd.GetOutput())
	if out == "" {
		out = "[no output]"
	}
	return loop.BackgroundDone("command", bd.GetProcessId(), status, fmt.Sprintf("exit code %d", bd.GetExitCode()),
		"Command: "+bd.GetCommand()+"\nOutput not yet delivered:\n"+out)
}
