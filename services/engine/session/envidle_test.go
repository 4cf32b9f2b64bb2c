package session_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"google.golang.org/grpc"
)

// runTask runs one task to its end and returns the outputs of its tool
// calls and how it ended.
func (r *rig) runTask(t *testing.T, id, prompt string) ([]*penguinv1.ToolCallOutput, *penguinv1.RunStateChange) {
	t.Helper()
	var (
		outs []*penguinv1.ToolCallOutput
		last *penguinv1.RunStateChange
	)
	err := r.mgr.Run(t.Context(), id, session.RunSpec{Prompt: prompt, Mode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL}, func(ev *penguinv1.RunEvent) error {
		if o := ev.GetMessage().GetToolCallOutput(); o != nil {
			outs = append(outs, o)
		}
		if st := ev.GetState(); st != nil {
			last = st
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if last.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || last.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the task ended %v: %s", last.GetStatus(), last.GetMessage())
	}
	return outs, last
}

// rowEnvironment returns the environment a session's row records.
func (r *rig) rowEnvironment(t *testing.T, id string) string {
	t.Helper()
	row, err := r.store.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return row.EnvironmentID
}

// checkEchoed fails unless every output is the fake's echo of its call.
func checkEchoed(t *testing.T, outs []*penguinv1.ToolCallOutput, want int) {
	t.Helper()
	if len(outs) != want {
		t.Fatalf("%d tool outputs, want %d", len(outs), want)
	}
	for _, o := range outs {
		if sr := o.GetStopReason(); (sr != penguinv1.StopReason_STOP_REASON_UNSPECIFIED && sr != penguinv1.StopReason_STOP_REASON_COMPLETED) || !strings.HasPrefix(o.GetOutput(), "read_file: ") {
			t.Fatalf("tool output %q (%v), want the environment's echo", o.GetOutput(), sr)
		}
	}
}

// A session's environment is made at its first tool call, not when the
// session is created nor for a task that calls no tool; only the first
// session of a spec makes one at once, to learn its tools. Parallel first
// calls make one environment between them.
func TestEnvironmentMadeAtFirstToolCall(t *testing.T) {
	r := newRig(t)
	const parallel = 6
	var calls []*fake.Reply
	first := fake.NewReply()
	for i := range parallel {
		first.ToolCall(fmt.Sprintf("c%d", i), "read_file", fmt.Sprintf(`{"n":%d}`, i))
	}
	calls = append(calls, fake.NewReply().Text("no tools needed").Done(), first.Done(), fake.NewReply().Text("read them").Done())
	r.llm.Generate = fake.Script(calls...)

	r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	if n := len(r.env.Created()); n != 1 {
		t.Fatalf("the first session of its spec made %d environments, want 1", n)
	}
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	if n := len(r.env.Created()); n != 1 {
		t.Fatalf("a second session of the same spec made an environment at once (%d in all)", n)
	}
	if s.GetWorkspace() != "/fake/ws" {
		t.Fatalf("the second session's workspace is %q, want the resolved /fake/ws", s.GetWorkspace())
	}
	r.runTask(t, s.GetSessionId(), "just talk")
	if n := len(r.env.Created()); n != 1 || r.rowEnvironment(t, s.GetSessionId()) != "" {
		t.Fatalf("a task without tool calls made an environment (%d in all)", n)
	}
	outs, _ := r.runTask(t, s.GetSessionId(), "read six files at once")
	checkEchoed(t, outs, parallel)
	created := r.env.Created()
	if len(created) != 2 || created[1].GetLabel() != s.GetSessionId() {
		t.Fatalf("%d parallel first calls made %d environments, want one", parallel, len(created)-1)
	}
	if r.rowEnvironment(t, s.GetSessionId()) == "" {
		t.Fatal("the row does not record the environment the calls made")
	}
}

// After the idle timeout the environment is disposed of and the row
// forgets it; the next tool call gets a fresh one, transparently.
func TestIdleEnvironmentDisposedAndMadeAgain(t *testing.T) {
	r := newRig(t, func(o *session.Options) { o.EnvironmentIdleTimeout = 20 * time.Millisecond })
	r.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "read_file", `{"n":1}`).Done(), fake.NewReply().Text("one").Done(),
		fake.NewReply().ToolCall("c2", "read_file", `{"n":2}`).Done(), fake.NewReply().Text("two").Done(),
	)
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	id := s.GetSessionId()
	// The environment made at creation, never used, goes too.
	eventually.True(t, "the unused environment disposed of", func() bool { return slices.Contains(r.env.Disposed(), "env-1") })
	if env := r.rowEnvironment(t, id); env != "" {
		t.Fatalf("the row still records %q after its disposal", env)
	}
	for i, want := range []string{"env-2", "env-3"} {
		outs, _ := r.runTask(t, id, fmt.Sprintf("task %d", i))
		checkEchoed(t, outs, 1)
		if n := len(r.env.Created()); n != i+2 {
			t.Fatalf("task %d: %d environments made, want %d", i, n, i+2)
		}
		eventually.True(t, want+" disposed of after the task", func() bool { return slices.Contains(r.env.Disposed(), want) })
		eventually.True(t, "the row forgetting "+want, func() bool { return r.rowEnvironment(t, id) == "" })
	}
}

// With an idle timeout of a millisecond, each task starts just as the
// previous one's environment becomes idle (when the watch of its
// background commands settles), or while it is being disposed of, and
// races the disposal: no tool call may run in an environment being
// disposed of, and every call must succeed.
func TestToolCallsRacingIdleDisposal(t *testing.T) {
	r := newRig(t, func(o *session.Options) { o.EnvironmentIdleTimeout = time.Millisecond })
	const tasks = 12
	var replies []*fake.Reply
	for i := range tasks {
		replies = append(replies, fake.NewReply().ToolCall(fmt.Sprintf("c%d", i), "read_file", `{}`).Done(), fake.NewReply().Text("done").Done())
	}
	r.llm.Generate = fake.Script(replies...)
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		overlaps []string
	)
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		env := req.GetEnvironmentId()
		mu.Lock()
		inFlight[env]++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight[env]--
			mu.Unlock()
		}()
		return fake.Echo(req, stream)
	}
	disposing := make(chan struct{}, tasks+1)
	r.env.Dispose = func(_ context.Context, env string) {
		mu.Lock()
		if inFlight[env] > 0 {
			overlaps = append(overlaps, env)
		}
		mu.Unlock()
		disposing <- struct{}{}
	}
	// The watch asks for background commands when it settles: from then
	// on the environment is idle.
	settling := make(chan struct{}, tasks)
	r.env.Processes = func() []*penguinv1.ProcessInfo {
		settling <- struct{}{}
		return nil
	}
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	for i := range tasks {
		outs, _ := r.runTask(t, id, fmt.Sprintf("task %d", i))
		checkEchoed(t, outs, 1)
		// Every other task starts as the watch settles, racing the timer;
		// the others as the disposal itself is under way.
		wait := settling
		if i%2 == 1 {
			wait = disposing
		}
		select {
		case <-wait:
		case <-t.Context().Done():
			t.Fatal("the environment never became idle")
		}
	}
	// The Dispose hook runs before the fake records the disposal: the
	// last one may be a moment behind the wait above.
	eventually.True(t, fmt.Sprintf("at least %d disposals in %d tasks", tasks/2, tasks), func() bool { return len(r.env.Disposed()) >= tasks/2 })
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("environments disposed of while a tool call ran there: %v", overlaps)
	}
	t.Logf("%d tasks made %d environments and disposed of %d", tasks, len(r.env.Created()), len(r.env.Disposed()))
}

// A task that starts while its session's environment is being disposed of
// runs its calls in a fresh environment once the disposal has ended.
func TestTaskWaitsForADisposalInProgress(t *testing.T) {
	r := newRig(t, func(o *session.Options) { o.EnvironmentIdleTimeout = time.Millisecond })
	r.llm.Generate = fake.Script(fake.NewReply().ToolCall("c1", "read_file", `{}`).Done(), fake.NewReply().Text("done").Done())
	entered, release := make(chan string, 1), make(chan struct{})
	r.env.Dispose = func(ctx context.Context, env string) {
		entered <- env
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	var gone string
	select {
	case gone = <-entered:
	case <-t.Context().Done():
		t.Fatal("no disposal began")
	}
	type result struct {
		outs []*penguinv1.ToolCallOutput
	}
	done := make(chan result, 1)
	go func() {
		var outs []*penguinv1.ToolCallOutput
		err := r.mgr.Run(context.Background(), id, session.RunSpec{Prompt: "go", Mode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL}, func(ev *penguinv1.RunEvent) error {
			if o := ev.GetMessage().GetToolCallOutput(); o != nil {
				outs = append(outs, o)
			}
			return nil
		})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- result{outs}
	}()
	close(release)
	res := <-done
	checkEchoed(t, res.outs, 1)
	created := r.env.Created()
	if len(created) != 2 || gone != "env-1" {
		t.Fatalf("disposed %q, made %d environments; want env-1 disposed and one fresh", gone, len(created))
	}
}
