package engine_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
)

// The tests of this file are the hand-over protocol of durable tasks
// (docs/architecture.md, "Durable tasks"): who takes a cut-off run over,
// and what a client that follows it sees.

const awaitingOwner = penguinv1.SessionState_SESSION_STATE_AWAITING_OWNER

// attachAll reads an Attach stream to its end.
func attachAll(ctx context.Context, t *testing.T, c penguinv1.EngineServiceClient, req *penguinv1.AttachRequest) ([]*penguinv1.RunEvent, error) {
	t.Helper()
	s, err := c.Attach(ctx, req)
	if err != nil {
		return nil, err
	}
	var evs []*penguinv1.RunEvent
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, r.GetEvent())
	}
}

// states lists the session states a stream carried, in order.
func states(evs []*penguinv1.RunEvent) []penguinv1.SessionState {
	var out []penguinv1.SessionState
	for _, ev := range evs {
		if st := ev.GetState(); st != nil {
			out = append(out, st.GetState())
		}
	}
	return out
}

// An Attach with until_idle always ends with how the session's last task
// ended, also when that task ended before the stream began, on an engine
// that has since restarted (the idle state event is never in the log), and
// when the client asks only for what comes after the end.
func TestAttachUntilIdleEndsWithHowTheLastTaskEnded(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(fake.NewReply().Text("all done").Done())
	id := e.create(allowAll)
	end(t, e.run(id, "go"))
	e.stop()
	e.start()
	ctx := e.ctx()
	for _, after := range []int64{0, 1_000_000} {
		evs, err := attachAll(ctx, t, e.client, &penguinv1.AttachRequest{SessionId: id, AfterSequence: after, UntilIdle: true})
		if err != nil {
			t.Fatalf("Attach after %d: %v", after, err)
		}
		if len(evs) == 0 {
			t.Fatalf("Attach after %d sent nothing", after)
		}
		last := evs[len(evs)-1]
		if st := last.GetState(); st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || st.GetStatus() != completedS {
			t.Fatalf("Attach after %d ended with %v, want the idle state of the completed task", after, last)
		}
		if last.GetSequence() == 0 {
			t.Fatalf("the repeated end has no sequence number: %v", last)
		}
		if after == 0 && !enginetest.HasText(enginetest.Messages(evs), "all done") {
			t.Fatalf("Attach from the start did not replay the answer: %v", evs)
		}
	}
	// The same on the engine that ran the task, before it restarts: the
	// end is sent once, not repeated after the live one.
	e.llm.Generate = fake.Script(fake.NewReply().Text("again").Done())
	e.run(id, "again")
	evs, err := attachAll(ctx, t, e.client, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	idle := 0
	for _, s := range states(evs) {
		if s == penguinv1.SessionState_SESSION_STATE_IDLE {
			idle++
		}
	}
	if idle != 1 || end(t, evs).GetStatus() != completedS {
		t.Fatalf("states replayed after two tasks = %v, want the one idle end last", states(evs))
	}
}

// An engine that stops while it takes a cut-off run over (a rollout stops
// the replicas one after the other, so the one that took the run may be
// the next to go) hands the run over again instead of aborting it: the run
// stays on record, and the next engine finishes it. A client that attaches
// to the session then follows the resumed run to its end, at once, rather
// than finding the session idle.
func TestAStopDuringATakeOverHandsTheRunOverAgain(t *testing.T) {
	e := newEnv(t)
	id := e.create(allowAll)
	blockedRun(t, e, id, fake.NewReply().Text("finished on the third engine").Done())
	e.stop() // the first engine hands the run over

	// The second engine's look at the run is held while it prepares.
	looking, release := newGate(), make(chan struct{})
	var once sync.Once
	e.envSvc.BeforeListTools = func(ctx context.Context) {
		held := false
		once.Do(func() { held = true })
		if !held {
			return
		}
		looking.open()
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	e.start()
	ctx := e.ctx()
	e.mgr.StartResuming()
	if err := looking.wait(ctx); err != nil {
		t.Fatal(err)
	}
	mgr, st := e.mgr, e.store
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Shutdown(ctx) }()
	// Once the engine refuses new work, it is stopping: let the look go on.
	eventually.Within(t, 10*time.Second, "the second engine to be stopping", func() bool {
		s, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "x"})
		if err == nil {
			_, err = s.Recv()
		}
		return code(err) == codes.Unavailable
	})
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	if n := len(e.llm.Requests()); n != 1 {
		t.Fatalf("%d model requests, want only the first engine's", n)
	}

	e.start()
	for _, ev := range history(t, e, id) {
		if ev.GetMessage().GetAbort() != nil {
			t.Fatalf("the stop during the take-over recorded an abort: %v", ev)
		}
	}
	if ids, err := e.store.StaleLeases(ctx, "nobody"); err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("cut-off runs after the second stop = %v, %v; want the session's", ids, err)
	}
	// No StartResuming on the third engine: the Attach takes the run over.
	evs, err := attachAll(ctx, t, e.client, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := end(t, evs); st.GetStatus() != completedS || !enginetest.HasText(enginetest.Messages(evs), "finished on the third engine") {
		t.Fatalf("the Attach ended %v with %v", st, enginetest.Kinds(enginetest.Messages(evs)))
	}
	if n := enginetest.CountKind(enginetest.Messages(history(t, e, id)), "text"); n != 2 {
		t.Fatalf("%d texts in the log, want the prompt once and the answer", n)
	}
}

// A client that follows a run through a replica that does not own it keeps
// following it when the owner stops: the stream says the run awaits a new
// owner, and then carries the resumed run to its end, taken over by the
// replica the client is connected to. A client of the stopping owner is
// told the same, and that it must attach again.
func TestAWatcherFollowsTheRunToItsNextReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b, id, run := runOnTwoReplicas(ctx, t, "finished on engine-b")
	watched := make(chan []*penguinv1.RunEvent, 1)
	watchErr := make(chan error, 1)
	att, err := b.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() {
		var evs []*penguinv1.RunEvent
		for {
			r, err := att.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				watched <- evs
				watchErr <- err
				return
			}
			if evs = append(evs, r.GetEvent()); len(evs) == 1 {
				close(first)
			}
		}
	}()
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("the Attach through engine-b sent nothing")
	}
	if err := a.mgr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	runEvs, runErr := enginetest.Collect(run)
	if code(runErr) != codes.Unavailable || !strings.Contains(runErr.Error(), "Attach again") {
		t.Fatalf("the owner's own stream ended with %v, want Unavailable telling the client to attach again", runErr)
	}
	if got := states(runEvs); len(got) == 0 || got[len(got)-1] != awaitingOwner {
		t.Fatalf("the owner's own stream carried states %v, want awaiting_owner last", got)
	}
	var evs []*penguinv1.RunEvent
	select {
	case evs = <-watched:
	case <-ctx.Done():
		t.Fatal("the watcher through engine-b did not end")
	}
	if err := <-watchErr; err != nil {
		t.Fatalf("the watcher through engine-b ended with %v", err)
	}
	got := states(evs)
	if len(got) < 2 || got[len(got)-1] != penguinv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("states through engine-b = %v", got)
	}
	sawAwaiting := false
	for _, s := range got {
		sawAwaiting = sawAwaiting || s == awaitingOwner
	}
	if !sawAwaiting || end(t, evs).GetStatus() != completedS || !enginetest.HasText(enginetest.Messages(evs), "finished on engine-b") {
		t.Fatalf("the watcher through engine-b saw states %v and %v", got, enginetest.Kinds(enginetest.Messages(evs)))
	}
	// Sequence numbers only grow on the one stream, across the move.
	var last int64
	for _, ev := range evs {
		if ev.GetSequence() != 0 && ev.GetSequence() <= last {
			t.Fatalf("sequence %d after %d on the followed stream", ev.GetSequence(), last)
		}
		last = max(last, ev.GetSequence())
	}
}

// A watcher whose run's replica cannot be reached any more (killed, or cut
// off from the network, so it neither hands over nor renews its lease) is
// told the run awaits a new owner, and follows it once the lease has run
// out and the replica it is connected to took the run over.
func TestAWatcherWaitsOutAnUnreachableOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, b, id, _ := runOnTwoReplicas(ctx, t, "finished after the lease ran out")
	// engine-a drops off the network and loses its database: it serves
	// nothing and renews nothing, as a killed pod.
	a.srv.Stop()
	_ = a.store.Close()
	start := time.Now()
	evs, err := attachAll(ctx, t, b.client, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatalf("the Attach through engine-b ended with %v after %v", err, evs)
	}
	got := states(evs)
	if len(got) == 0 || got[0] != awaitingOwner {
		t.Fatalf("states through engine-b = %v, want awaiting_owner first", got)
	}
	if end(t, evs).GetStatus() != completedS || !enginetest.HasText(enginetest.Messages(evs), "finished after the lease ran out") {
		t.Fatalf("the watcher saw %v", enginetest.Kinds(enginetest.Messages(evs)))
	}
	t.Logf("followed the run to engine-b %v after engine-a went", time.Since(start).Round(time.Millisecond))
}

// replicaFixture is the fake model and environment and the agent and store
// paths that the replicas of a test share.
func replicaFixture(t *testing.T) (*fake.LLM, *grpc.ClientConn, *grpc.ClientConn, string, string) {
	t.Helper()
	llm := &fake.LLM{}
	envSvc := &fake.Env{Tools: []*penguinv1.ToolInfo{fake.Tool("exec_command", penguinv1.Permission_PERMISSION_RW)}}
	llmConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, llm) })
	envConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, envSvc) })
	dir := t.TempDir()
	agentDir := filepath.Join(dir, "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, agentDir, testConfig)
	return llm, envConn, llmConn, agentDir, filepath.Join(dir, "engine.db")
}

// runOnTwoReplicas starts two replicas on one store and a task on the
// first, whose model request hangs until the task lets go of it; the next
// request, wherever the run goes on, answers then. It returns once the
// request hangs.
func runOnTwoReplicas(ctx context.Context, t *testing.T, then string) (a, b *replica, id string, run penguinv1.EngineService_RunClient) {
	t.Helper()
	llm, envConn, llmConn, agentDir, storeURL := replicaFixture(t)
	a = startReplica(t, "engine-a", storeURL, agentDir, llmConn, envConn)
	b = startReplica(t, "engine-b", storeURL, agentDir, llmConn, envConn)
	thinking := newGate()
	llm.Generate = fake.Script(
		fake.NewReply().PartialOnly("thinking").Hook(func(ctx context.Context) error {
			thinking.open()
			<-ctx.Done()
			return ctx.Err()
		}),
		fake.NewReply().Text(then).Done(),
	)
	id = createOn(ctx, t, a)
	run, err := a.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if err := thinking.wait(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b, id, run
}

// createOn creates a session through replica r.
func createOn(ctx context.Context, t *testing.T, r *replica) string {
	t.Helper()
	resp, err := r.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, Workspace: "/work/ws", ApprovalMode: allowAll,
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSession().GetSessionId()
}
