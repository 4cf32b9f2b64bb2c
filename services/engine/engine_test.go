package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

const (
	allowAll   = penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL
	denyAll    = penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL
	readOnly   = penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY
	alwaysAsk  = penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK
	completedS = penguinv1.StopReason_STOP_REASON_COMPLETED
)

func TestRunWithToolsPersistsAndStreams(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("Looking.").ToolCall("c1", "exec_command", `{"cmd":"ls"}`).Done(),
		fake.NewReply().Text("There is one file.").Done(),
	)
	id := e.create(allowAll)
	evs := e.run(id, "what is here?")
	checkStream(t, evs)
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	msgs := enginetest.Messages(evs)
	if !enginetest.HasText(msgs, "what is here?") || !enginetest.HasText(msgs, "There is one file.") {
		t.Fatalf("stream lacks the prompt or the answer: %v", enginetest.Kinds(msgs))
	}
	// Everything persisted streamed out with the same number, and the log
	// holds no partials.
	streamed := map[int64]string{}
	for _, ev := range evs {
		if m := ev.GetMessage(); m != nil {
			streamed[ev.GetSequence()] = m.String()
		}
	}
	hist := history(t, e, id)
	if hist[0].GetMessage().GetSessionMeta() == nil {
		t.Fatal("the log does not open with session_meta")
	}
	for _, ev := range hist[1:] {
		if s, ok := streamed[ev.GetSequence()]; !ok || s != ev.GetMessage().String() {
			t.Fatalf("persisted event %d was not streamed as such", ev.GetSequence())
		}
		if k := enginetest.Kinds([]*penguinv1.OmniMessage{ev.GetMessage()})[0]; strings.HasPrefix(k, "partial_") {
			t.Fatalf("a partial was persisted: %v", ev)
		}
	}
	kinds := enginetest.Kinds(enginetest.Messages(hist))
	if kinds[1] != "text" || kinds[2] != "tool_list_ready" || kinds[3] != "request_begin" {
		t.Fatalf("log head = %v", kinds[:4])
	}
	// The model saw the tool list of the environment and history.
	reqs := e.llm.Requests()
	if len(reqs) != 2 || len(reqs[0].GetTools()) < 2 {
		t.Fatalf("requests = %d, tools %v", len(reqs), reqs[0].GetTools())
	}
	got, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSession().GetUsage().GetTotal() != 200 || got.GetSession().GetTitle() != "what is here?" || got.GetSession().GetState() != penguinv1.SessionState_SESSION_STATE_IDLE {
		t.Fatalf("session = %v", got.GetSession())
	}
	eventually.True(t, "the runtime to unload", func() bool { return e.mgr.Loaded() == 0 })
}

func TestApprovalModes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  penguinv1.ApprovalMode
		tool  string
		asks  bool
		allow bool // the answer given when asked
		ran   bool
		out   string
	}{
		{"allow-all", allowAll, "exec_command", false, false, true, ""},
		{"deny-all", denyAll, "exec_command", false, false, false, "Tool call denied by user."},
		{"read-only passes r", readOnly, "read_file", false, false, true, ""},
		{"read-only asks rw, allowed", readOnly, "exec_command", true, true, true, ""},
		{"always-ask, denied", alwaysAsk, "read_file", true, false, false, "Tool call denied by user."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.llm.Generate = fake.Script(
				fake.NewReply().ToolCall("c1", tc.tool, `{}`).Done(),
				fake.NewReply().Text("ok").Done(),
			)
			d := penguinv1.Decision_DECISION_DENY
			if tc.allow {
				d = penguinv1.Decision_DECISION_ALLOW
			}
			evs := e.runAnswering(e.create(tc.mode), d)
			asked := slices.ContainsFunc(evs, func(ev *penguinv1.RunEvent) bool { return ev.GetApprovalRequest() != nil })
			checkStream(t, evs)
			end(t, evs)
			if asked != tc.asks {
				t.Fatalf("asked = %v, want %v", asked, tc.asks)
			}
			// Every state change is streamed: a question puts the session
			// in awaiting_approval (before the question itself) and the
			// answer back to running.
			var states []penguinv1.SessionState
			for i, ev := range evs {
				if st := ev.GetState(); st != nil {
					states = append(states, st.GetState())
					if st.GetState() == penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL && (i+1 >= len(evs) || evs[i+1].GetApprovalRequest() == nil) {
						t.Fatalf("awaiting_approval is not followed by its question: %v", evs[i+1:])
					}
				}
			}
			want := []penguinv1.SessionState{penguinv1.SessionState_SESSION_STATE_RUNNING, penguinv1.SessionState_SESSION_STATE_IDLE}
			if tc.asks {
				want = []penguinv1.SessionState{penguinv1.SessionState_SESSION_STATE_RUNNING, penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL,
					penguinv1.SessionState_SESSION_STATE_RUNNING, penguinv1.SessionState_SESSION_STATE_IDLE}
			}
			if !slices.Equal(states, want) {
				t.Fatalf("states streamed %v, want %v", states, want)
			}
			var out *penguinv1.ToolCallOutput
			for _, m := range enginetest.Messages(evs) {
				if o := m.GetToolCallOutput(); o != nil {
					out = o
				}
			}
			if tc.ran != (out.GetOutput() == tc.tool+": {}") {
				t.Fatalf("output = %v, want the tool to run: %v", out, tc.ran)
			}
			if !tc.ran && (out.GetOutput() != tc.out || out.GetStopReason() != penguinv1.StopReason_STOP_REASON_ABORTED) {
				t.Fatalf("denied output = %v", out)
			}
		})
	}
}

// TestAwaitingApprovalIsFollowedByItsQuestion asks for approval while the
// model request that made the call still streams: a request's tools start
// before it ends, so its text and end are published while the tool asks.
// On every run the session's move into awaiting approval must come right
// before the question, with none of the request's events between them.
func TestAwaitingApprovalIsFollowedByItsQuestion(t *testing.T) {
	e := newEnv(t)
	for run := range 30 {
		e.llm.Generate = fake.Script(
			fake.NewReply().ToolCall("c1", "exec_command", `{}`).Text(strings.Repeat("more words ", 200)).Done(),
			fake.NewReply().Text("ok").Done(),
		)
		evs := e.runAnswering(e.create(readOnly), penguinv1.Decision_DECISION_ALLOW)
		checkStream(t, evs)
		end(t, evs)
		asked := 0
		for i, ev := range evs {
			if ev.GetState().GetState() != penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL {
				continue
			}
			asked++
			if i+1 >= len(evs) || evs[i+1].GetApprovalRequest() == nil {
				t.Fatalf("run %d: awaiting_approval (sequence %d) is followed by %v, not its question", run, ev.GetSequence(), evs[i+1:min(i+3, len(evs))])
			}
		}
		if asked != 1 {
			t.Fatalf("run %d: the session moved into awaiting approval %d times, want once", run, asked)
		}
	}
}

func TestForbiddenCommandUnderAllowAll(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"rm -rf /"}`).Done(),
		fake.NewReply().Text("ok").Done(),
	)
	id := e.create(allowAll)
	evs := e.run(id, "clean up")
	var dec *penguinv1.ApprovalDecision
	var out *penguinv1.ToolCallOutput
	for _, m := range enginetest.Messages(evs) {
		if d := m.GetApprovalDecision(); d != nil {
			dec = d
		}
		if o := m.GetToolCallOutput(); o != nil {
			out = o
		}
	}
	if dec.GetDecision() != penguinv1.Decision_DECISION_FORBIDDEN || out.GetOutput() != "Tool call denied by policy." {
		t.Fatalf("decision %v, output %v", dec, out)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script()
	id := e.create(allowAll)
	ctx := e.ctx()
	check := func(name string, err error, want codes.Code) {
		t.Helper()
		if code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	_, err := e.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: "nope"})
	check("GetSession unknown", err, codes.NotFound)
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: "nope", Prompt: "x"})
	if err == nil {
		_, err = stream.Recv()
	}
	check("Run unknown", err, codes.NotFound)
	stream, err = e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "  "})
	if err == nil {
		_, err = stream.Recv()
	}
	check("Run empty prompt", err, codes.InvalidArgument)
	_, err = e.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: "zz", Decision: penguinv1.Decision_DECISION_ALLOW})
	check("Approve unknown call", err, codes.NotFound)
	_, err = e.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: "zz", Decision: penguinv1.Decision_DECISION_FORBIDDEN})
	check("Approve forbidden", err, codes.InvalidArgument)
	_, err = e.client.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "x"})
	check("Steer idle", err, codes.FailedPrecondition)
	_, err = e.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: &penguinv1.ModelRef{ModelId: "m"}, Workspace: "w"})
	check("CreateSession no provider", err, codes.InvalidArgument)
	_, err = e.client.GetSession(ctx, &penguinv1.GetSessionRequest{})
	check("GetSession empty id", err, codes.InvalidArgument)
	ab, err := e.client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id})
	if err != nil || ab.GetAborted() {
		t.Errorf("Abort idle: %v, %v", ab, err)
	}
	att, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: "nope"})
	if err == nil {
		_, err = att.Recv()
	}
	check("Attach unknown", err, codes.NotFound)
}

func TestSecondRunOnBusySession(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	reply := fake.NewReply().Text("slow").Done()
	reply.Before = g.wait
	e.llm.Generate = fake.Script(reply)
	id := e.create(allowAll)
	ctx := e.ctx()
	first, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil {
		t.Fatal(err)
	}
	second, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "two"})
	if err == nil {
		_, err = second.Recv()
	}
	if code(err) != codes.FailedPrecondition {
		t.Fatalf("second Run: %v", err)
	}
	g.open()
	evs, err := enginetest.Collect(first)
	if err != nil {
		t.Fatal(err)
	}
	end(t, evs)
}

func TestUnreachableStore(t *testing.T) {
	e := newEnv(t)
	id := e.create(allowAll)
	_ = e.store.Close()
	_, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	if code(err) != codes.Unavailable {
		t.Fatalf("GetSession with the store down: %v", err)
	}
	stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "x"})
	if err == nil {
		_, err = stream.Recv()
	}
	if code(err) != codes.Unavailable {
		t.Fatalf("Run with the store down: %v", err)
	}
}

func TestEnvironmentRecreatedWhenGone(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("one").Done(),
		fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
		fake.NewReply().Text("two").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "first"))
	e.envSvc.Forget("env-1")
	evs := e.run(id, "second")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("second run: %v %s", st.GetStatus(), st.GetMessage())
	}
	if n := len(e.envSvc.Created()); n != 2 {
		t.Fatalf("%d environments created, want 2", n)
	}
	sess, _ := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	_ = sess
}

func TestParallelCallsInCallOrderOverGRPC(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("a", "exec_command", `{"n":1}`).ToolCall("b", "exec_command", `{"n":2}`).Done(),
		fake.NewReply().Text("ok").Done(),
	)
	release := newGate()
	e.envSvc.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		if req.GetToolCall().GetToolCallId() == "a" {
			if err := release.wait(s.Context()); err != nil {
				return err
			}
		} else {
			defer release.open()
		}
		return fake.Echo(req, s)
	}
	id := e.create(allowAll)
	end(t, e.run(id, "go"))
	var ids []string
	for _, m := range e.llm.Requests()[1].GetNewMessages() {
		ids = append(ids, m.GetToolCallOutput().GetToolCallId())
	}
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("outputs sent in order %v", ids)
	}
}

var _ = context.Background
