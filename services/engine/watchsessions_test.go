package engine_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
)

// TestWatchSessionsFollowsStatesOverGRPC watches the session list while a
// session is created, runs a task that waits for an approval, is aborted,
// and is deleted: the watcher sees each state as it happens, how the task
// ended, and the deletion.
func TestWatchSessionsFollowsStatesOverGRPC(t *testing.T) {
	e := newEnv(t)
	before := e.create(allowAll) // in the snapshot
	// The model answers only once the watcher has seen the session
	// running: the hub reads a changed session once per burst of changes,
	// so a run that reached its approval before the refresher read the
	// session would show only "awaiting approval".
	seenRunning := make(chan struct{})
	script := fake.Script(fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"make"}`).Done())
	e.llm.Generate = func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		select {
		case <-seenRunning:
		case <-s.Context().Done():
			return s.Context().Err()
		}
		return script(req, s)
	}

	watch, err := e.client.WatchSessions(e.ctx(), &penguinv1.WatchSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *penguinv1.WatchSessionsResponse, 256)
	go func() {
		defer close(events)
		for {
			ev, err := watch.Recv()
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	deadline := time.After(20 * time.Second)
	// next waits for the first event that match accepts.
	next := func(what string, match func(*penguinv1.WatchSessionsResponse) bool) *penguinv1.WatchSessionsResponse {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the watch ended while waiting for %s", what)
				}
				if match(ev) {
					return ev
				}
			case <-deadline:
				t.Fatalf("no %s", what)
			}
		}
	}
	state := func(id string, s penguinv1.SessionState) func(*penguinv1.WatchSessionsResponse) bool {
		return func(ev *penguinv1.WatchSessionsResponse) bool {
			c := ev.GetSession()
			return c.GetSession().GetSessionId() == id && c.GetSession().GetState() == s
		}
	}

	snap := next("the snapshot", func(ev *penguinv1.WatchSessionsResponse) bool { return ev.GetSession() != nil })
	if snap.GetSession().GetSession().GetSessionId() != before {
		t.Fatalf("snapshot: %v", snap)
	}
	next("the snapshot's end", func(ev *penguinv1.WatchSessionsResponse) bool { return ev.GetSnapshotEnd() != nil })

	id := e.create(penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK)
	next("the new session", state(id, penguinv1.SessionState_SESSION_STATE_IDLE))

	run, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = enginetest.Collect(run) }()
	next("running", state(id, penguinv1.SessionState_SESSION_STATE_RUNNING))
	close(seenRunning)
	next("awaiting approval", state(id, penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL))

	if _, err := e.client.Abort(e.ctx(), &penguinv1.AbortRequest{SessionId: id, Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	idle := next("idle after the abort", state(id, penguinv1.SessionState_SESSION_STATE_IDLE))
	if idle.GetSession().GetLastStatus() != penguinv1.StopReason_STOP_REASON_ABORTED || idle.GetSession().GetSession().GetTitle() == "" {
		t.Fatalf("idle after abort: %v", idle)
	}

	if _, err := e.client.DeleteSession(e.ctx(), &penguinv1.DeleteSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	next("the deletion", func(ev *penguinv1.WatchSessionsResponse) bool { return ev.GetDeletedSessionId() == id })

	// A second watcher starts from a snapshot without the deleted session.
	again, err := e.client.WatchSessions(e.ctx(), &penguinv1.WatchSessionsRequest{SnapshotSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := again.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetSnapshotEnd() != nil {
			break
		}
		if ev.GetSession().GetSession().GetSessionId() == id {
			t.Fatalf("the deleted session is in a new snapshot")
		}
	}
	if _, err := e.client.WatchSessions(e.ctx(), &penguinv1.WatchSessionsRequest{SnapshotSize: -1}); err != nil {
		t.Fatal(err)
	}
}
