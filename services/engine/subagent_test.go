package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"google.golang.org/grpc"
)

// isChild reports whether a model request comes from a subagent: its
// context opens with a prompt from the parent agent.
func isChild(req *penguinv1.StreamGenerateRequest) bool {
	for _, m := range append(slices.Clone(req.GetHistory()), req.GetNewMessages()...) {
		if m.GetText().GetSender() == penguinv1.Sender_SENDER_PARENT_AGENT {
			return true
		}
	}
	return false
}

// split answers parent and child requests from separate scripts.
func split(parent, child []*fake.Reply) func(*penguinv1.StreamGenerateRequest, grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	p, c := fake.Script(parent...), fake.Script(child...)
	return func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if isChild(req) {
			return c(req, s)
		}
		return p(req, s)
	}
}

func TestSubagentForegroundWithOriginForwarding(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = split(
		[]*fake.Reply{
			fake.NewReply().ToolCall("p1", "run_subagent", `{"description":"count","prompt":"count the files"}`).Done(),
			fake.NewReply().Text("The subagent found 3 files.").Done(),
		},
		[]*fake.Reply{
			fake.NewReply().ToolCall("k1", "exec_command", `{"cmd":"ls | wc -l"}`).Done(),
			fake.NewReply().Text("3 files").Done(),
		},
	)
	id := e.create(allowAll)
	evs := e.run(id, "how many files?")
	checkStream(t, evs)
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	msgs := enginetest.Messages(evs)
	// The child's stream, forwarded with its id as origin, opens with its
	// session_meta.
	var childID string
	var forwarded []*penguinv1.OmniMessage
	for _, m := range msgs {
		if p := m.GetSubagent(); p != nil {
			childID = p.GetSessionId()
		}
		if len(m.GetOrigin()) > 0 {
			forwarded = append(forwarded, m)
		}
	}
	if childID == "" || len(forwarded) == 0 {
		t.Fatalf("no subagent pointer (%q) or no forwarded messages (%d)", childID, len(forwarded))
	}
	if forwarded[0].GetSessionMeta().GetSessionId() != childID || forwarded[0].GetOrigin()[0] != childID {
		t.Fatalf("first forwarded message = %v", forwarded[0])
	}
	if !enginetest.HasText(forwarded, "3 files") || enginetest.CountKind(forwarded, "tool_call_output") != 1 {
		t.Fatalf("forwarded = %v", enginetest.Kinds(forwarded))
	}
	// The tool's output is the child's answer.
	var out string
	for _, m := range msgs {
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 {
			out = o.GetOutput()
		}
	}
	if out != "3 files" {
		t.Fatalf("run_subagent output = %q", out)
	}
	// The parent's log keeps only the pointer; the child has its own log.
	parentLog := enginetest.Messages(history(t, e, id))
	if enginetest.CountKind(parentLog, "subagent") != 1 || enginetest.HasText(parentLog, "3 files") && !enginetest.HasText(parentLog, "The subagent found") {
		t.Fatalf("parent log = %v", enginetest.Kinds(parentLog))
	}
	for _, m := range parentLog {
		if len(m.GetOrigin()) > 0 {
			t.Fatal("a forwarded message reached the parent's log")
		}
	}
	childLog := enginetest.Messages(history(t, e, childID))
	if childLog[0].GetSessionMeta().GetSource() != "subagent" || !enginetest.HasText(childLog, "3 files") || !enginetest.HasText(childLog, "count the files") {
		t.Fatalf("child log = %v", enginetest.Kinds(childLog))
	}
	cs, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: childID})
	if err != nil || cs.GetSession().GetParentSessionId() != id || cs.GetSession().GetSource() != "subagent" {
		t.Fatalf("child session = %v, %v", cs, err)
	}
	// The child shared the parent's environment.
	if n := len(e.envSvc.Created()); n != 1 {
		t.Fatalf("%d environments created, want 1", n)
	}
	// Depth 1: the child was offered no subagent tools.
	for _, req := range e.llm.Requests() {
		if isChild(req) {
			for _, tool := range req.GetTools() {
				if strings.Contains(tool.GetName(), "subagent") {
					t.Fatalf("the child was offered %s", tool.GetName())
				}
			}
		}
	}
}

func TestSubagentInheritsApprovals(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = split(
		[]*fake.Reply{
			fake.NewReply().ToolCall("p1", "run_subagent", `{"description":"d","prompt":"delete tmp"}`).Done(),
			fake.NewReply().Text("done").Done(),
		},
		[]*fake.Reply{
			fake.NewReply().ToolCall("k1", "exec_command", `{"cmd":"rm tmp"}`).Done(),
			fake.NewReply().Text("deleted").Done(),
		},
	)
	id := e.create(readOnly)
	stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	var asked []*penguinv1.ApprovalRequest
	for {
		r, err := stream.Recv()
		if err != nil {
			break
		}
		evs = append(evs, r.GetEvent())
		if ar := r.GetEvent().GetApprovalRequest(); ar != nil {
			asked = append(asked, ar)
			if _, err := e.client.Approve(e.ctx(), &penguinv1.ApproveRequest{
				SessionId: id, ToolCallId: ar.GetToolCall().GetToolCallId(), Origin: ar.GetOrigin(), Decision: penguinv1.Decision_DECISION_ALLOW,
			}); err != nil {
				t.Fatalf("Approve: %v", err)
			}
		}
	}
	end(t, evs)
	// run_subagent (rw) asks on the parent; the child's exec_command asks on
	// the parent's stream with the child's id as origin.
	if len(asked) != 2 || len(asked[0].GetOrigin()) != 0 || len(asked[1].GetOrigin()) != 1 || asked[1].GetToolCall().GetToolCallId() != "k1" {
		t.Fatalf("approval requests = %v", asked)
	}
	ran := false
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o.GetToolCallId() == "k1" && strings.HasPrefix(o.GetOutput(), "exec_command") {
			ran = true
		}
	}
	if !ran {
		t.Fatal("the child's approved call did not run")
	}
}

func TestSubagentInBackgroundReportsCompletion(t *testing.T) {
	e := newEnv(t)
	childGo := newGate()
	childReply := fake.NewReply().Text("background result").Done()
	childReply.Before = childGo.wait
	e.llm.Generate = split(
		[]*fake.Reply{
			fake.NewReply().ToolCall("p1", "run_subagent", `{"description":"d","prompt":"work","run_in_background":true}`).Done(),
			fake.NewReply().Text("I started it.").Done(),
			fake.NewReply().Text("It reported back.").Done(),
		},
		[]*fake.Reply{childReply},
	)
	id := e.create(allowAll)
	evs := e.run(id, "start a helper")
	end(t, evs)
	var out string
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 {
			out = o.GetOutput()
		}
	}
	if !strings.Contains(out, "background") {
		t.Fatalf("run_subagent output = %q", out)
	}
	// The child finishes after the parent's task ended: its report starts a
	// new task on the parent.
	childGo.open()
	eventually.True(t, "the report's task", func() bool { return len(e.llm.Requests()) >= 4 })
	eventually.True(t, "the parent to go idle", func() bool {
		s, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
		return err == nil && s.GetSession().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE && e.mgr.Loaded() == 0
	})
	var report *penguinv1.StreamGenerateRequest
	for _, req := range e.llm.Requests() {
		for _, m := range req.GetNewMessages() {
			if strings.Contains(m.GetText().GetText(), "[background_task_done]") {
				report = req
				if m.GetText().GetSender() != penguinv1.Sender_SENDER_HARNESS || !strings.Contains(m.GetText().GetText(), "background result") {
					t.Fatalf("report = %v", m)
				}
			}
		}
	}
	if report == nil {
		t.Fatal("no request carried the completion report")
	}
}

func TestSubagentYieldPollAndKill(t *testing.T) {
	e := newEnv(t)
	release := newGate()
	slow := fake.NewReply().Text("slow result").Done()
	slow.Before = release.wait
	var childID string
	e.llm.Generate = split(
		[]*fake.Reply{
			// The first subagent outlives its 50 ms window.
			fake.NewReply().ToolCall("p1", "run_subagent", `{"description":"d","prompt":"slow work","yield_time_ms":50}`).Done(),
		},
		[]*fake.Reply{slow},
	)
	// Scripted turns after the first depend on the child's id, so the
	// parent's replies are built as the requests come.
	parentTurn := 0
	base := e.llm.Generate
	e.llm.Generate = func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if isChild(req) {
			return base(req, s)
		}
		parentTurn++
		switch parentTurn {
		case 1:
			return base(req, s)
		case 2:
			for _, m := range req.GetNewMessages() {
				if o := m.GetToolCallOutput(); o != nil {
					childID = between(o.GetOutput(), "subagent_id: ", ")")
				}
			}
			return fake.NewReply().ToolCall("p2", "input_subagent", `{"description":"d","subagent_id":"`+childID+`","yield_time_ms":20}`).Done().Send(s)
		case 3:
			// The child may end only once the poll of p3 waits for it:
			// released before, it would finish first and the poll would
			// find it idle, its result delivered as a message instead
			// (seen under load: 3 runs in 40). The poll starts as soon
			// as this reply ends; two seconds cover a loaded machine,
			// and the poll waits ten.
			time.AfterFunc(2*time.Second, release.open)
			return fake.NewReply().ToolCall("p3", "input_subagent", `{"description":"d","subagent_id":"`+childID+`","yield_time_ms":10000}`).Done().Send(s)
		case 4:
			return fake.NewReply().ToolCall("p4", "kill_subagent", `{"description":"d","subagent_id":"`+childID+`"}`).Done().Send(s)
		default:
			return fake.NewReply().Text("all done").Done().Send(s)
		}
	}
	id := e.create(allowAll)
	evs := e.run(id, "delegate")
	end(t, evs)
	outs := map[string]string{}
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 {
			outs[o.GetToolCallId()] = o.GetOutput()
		}
	}
	if childID == "" || !strings.Contains(outs["p1"], "moved to the background") {
		t.Fatalf("p1 = %q", outs["p1"])
	}
	if !strings.Contains(outs["p2"], "still working") {
		t.Fatalf("p2 = %q", outs["p2"])
	}
	if outs["p3"] != "slow result" {
		t.Fatalf("p3 = %q", outs["p3"])
	}
	if !strings.Contains(outs["p4"], "idle") {
		t.Fatalf("p4 = %q", outs["p4"])
	}
}

func TestSubagentCap(t *testing.T) {
	e := newEnv(t, func(o *session.Options) { o.MaxSubagents = 1 })
	release := newGate()
	childReply := fake.NewReply().Text("ok").Done()
	childReply.Before = release.wait
	e.llm.Generate = split(
		[]*fake.Reply{
			fake.NewReply().
				ToolCall("a", "run_subagent", `{"description":"d","prompt":"one","run_in_background":true}`).
				ToolCall("b", "run_subagent", `{"description":"d","prompt":"two","run_in_background":true}`).Done(),
			fake.NewReply().Text("started what I could").Done(),
			fake.NewReply().Text("noted").Done(),
		},
		[]*fake.Reply{childReply},
	)
	id := e.create(allowAll)
	evs := e.run(id, "two helpers")
	end(t, evs)
	outs := map[string]*penguinv1.ToolCallOutput{}
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 {
			outs[o.GetToolCallId()] = o
		}
	}
	// The two calls run concurrently: one gets the only slot, the other is
	// refused.
	started, refused := 0, 0
	for _, o := range outs {
		switch {
		case o.GetStopReason() == penguinv1.StopReason_STOP_REASON_FAILED && strings.Contains(o.GetOutput(), "running already"):
			refused++
		case strings.Contains(o.GetOutput(), "background"):
			started++
		}
	}
	if started != 1 || refused != 1 {
		t.Fatalf("outputs = %v", outs)
	}
	release.open()
	eventually.True(t, "the report and the session to settle", func() bool { return len(e.llm.Requests()) >= 4 && e.mgr.Loaded() == 0 })
}

// between returns the text of s between the first from and the next to.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// Nine run_subagent calls in one turn, the limit being eight: the ninth is
// refused before a child session exists, so the store holds eight children
// and the parent's log eight subagent pointers. The children hold their
// answers until the refusal is in the parent's log, so the eight are still
// running when the ninth asks.
func TestNineSubagentsAtOnceCreateEight(t *testing.T) {
	e := newEnv(t)
	var calls []*fake.Reply
	first := fake.NewReply()
	for i := 1; i <= 9; i++ {
		first.ToolCall(fmt.Sprintf("p%d", i), "run_subagent", fmt.Sprintf(`{"description":"d","prompt":"part %d"}`, i))
	}
	calls = append(calls, first.Done(), fake.NewReply().Text("eight answered").Done())
	var id string
	refused := func() bool {
		resp, err := e.client.GetHistory(context.Background(), &penguinv1.GetHistoryRequest{SessionId: id})
		if err != nil {
			return false
		}
		for _, m := range enginetest.Messages(resp.GetEvents()) {
			if strings.Contains(m.GetToolCallOutput().GetOutput(), "running already") {
				return true
			}
		}
		return false
	}
	var children []*fake.Reply
	for range 9 {
		r := fake.NewReply().Text("part done").Done()
		r.Before = func(ctx context.Context) error { return eventually.Wait(ctx, refused) }
		children = append(children, r)
	}
	e.llm.Generate = split(calls, children)
	id = e.create(allowAll)
	evs := e.run(id, "split the work")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	var kids int
	token := ""
	for {
		resp, err := e.client.ListSessions(e.ctx(), &penguinv1.ListSessionsRequest{PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.GetSessions() {
			if s.GetParentSessionId() == id {
				kids++
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	parentLog := enginetest.Messages(history(t, e, id))
	var answered, refusals int
	for _, m := range parentLog {
		switch o := m.GetToolCallOutput(); {
		case o == nil:
		case o.GetOutput() == "part done":
			answered++
		case strings.Contains(o.GetOutput(), "8 subagents are running already"):
			refusals++
		}
	}
	if kids != 8 || enginetest.CountKind(parentLog, "subagent") != 8 || answered != 8 || refusals != 1 {
		t.Fatalf("%d child sessions, %d pointers, %d answers, %d refusals; want 8, 8, 8, 1", kids, enginetest.CountKind(parentLog, "subagent"), answered, refusals)
	}
}
