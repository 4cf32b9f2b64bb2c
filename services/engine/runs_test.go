package engine_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/transcript"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// An abort while the model streams its answer carries what it had said
// over to the next run, and writes the carry-over to no log.
func TestAbortWhileStreamingCarriesThePartialAnswerOver(t *testing.T) {
	e := newEnv(t)
	streaming := newGate()
	first := fake.NewReply().PartialOnly("I will start by").Hook(func(ctx context.Context) error {
		streaming.open()
		<-ctx.Done()
		return ctx.Err()
	})
	e.llm.Generate = fake.Script(first, fake.NewReply().Text("resumed").Done())
	id := e.create(allowAll)
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "do the thing"})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the last partial to reach the client, then abort.
	var evs []*penguinv1.RunEvent
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, r.GetEvent())
		if r.GetEvent().GetMessage().GetPartialText().GetText() == " by" {
			break
		}
	}
	if err := streaming.wait(ctx); err != nil {
		t.Fatal(err)
	}
	ab, err := e.client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id, Reason: "changed my mind"})
	if err != nil || !ab.GetAborted() {
		t.Fatalf("Abort: %v %v", ab, err)
	}
	rest, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, rest...)
	checkStream(t, evs)
	st := end(t, evs)
	if st.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED {
		t.Fatalf("status %v", st.GetStatus())
	}
	msgs := enginetest.Messages(evs)
	if last := msgs[len(msgs)-1]; last.GetAbort().GetReason() != "changed my mind" {
		t.Fatalf("last message %v, want the abort", last)
	}
	// The next run carries the interrupted turn over: the prompt, then the
	// [turn_aborted] block, then the new prompt.
	end(t, e.run(id, "continue please"))
	nm := e.llm.Requests()[1].GetNewMessages()
	if len(nm) != 3 || nm[0].GetText().GetText() != "do the thing" ||
		!strings.Contains(nm[1].GetText().GetText(), "[turn_aborted]") || !strings.Contains(nm[1].GetText().GetText(), "I will start by") ||
		nm[2].GetText().GetText() != "continue please" {
		t.Fatalf("second run input = %v", nm)
	}
	if len(e.llm.Requests()[1].GetHistory()) != 0 {
		t.Fatal("the aborted turn must not be in the history")
	}
	// The note is model-visible only.
	for _, ev := range history(t, e, id) {
		if strings.Contains(ev.GetMessage().GetText().GetText(), "[turn_aborted]") {
			t.Fatal("the carry-over was written to the log")
		}
	}
}

// An abort while a tool call runs carries the outputs of the turn's
// finished calls, and the interrupted one, over to the next run.
func TestAbortDuringAToolCallCarriesTheOutputsOver(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("done", "read_file", `{}`).ToolCall("hang", "exec_command", `{}`).Done(),
		fake.NewReply().Text("next").Done(),
	)
	hanging := newGate()
	e.envSvc.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		if req.GetToolCall().GetToolCallId() == "hang" {
			hanging.open()
			<-s.Context().Done()
			return s.Context().Err()
		}
		return fake.Echo(req, s)
	}
	id := e.create(allowAll)
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	sawDone := false
	for !sawDone {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, r.GetEvent())
		sawDone = r.GetEvent().GetMessage().GetToolCallOutput().GetToolCallId() == "done"
	}
	if err := hanging.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	rest, _ := enginetest.Collect(stream)
	checkStream(t, append(evs, rest...))
	end(t, e.run(id, "after"))
	nm := e.llm.Requests()[1].GetNewMessages()
	if len(nm) != 3 {
		t.Fatalf("second run input = %v", nm)
	}
	if o := nm[0].GetToolCallOutput(); o.GetToolCallId() != "done" || o.GetOutput() != "read_file: {}" {
		t.Fatalf("finished result = %v", o)
	}
	if o := nm[1].GetToolCallOutput(); o.GetToolCallId() != "hang" || o.GetOutput() != "[interrupted: tool aborted by user]" {
		t.Fatalf("unfinished result = %v", o)
	}
	if nm[2].GetText().GetText() != "after" {
		t.Fatalf("prompt = %v", nm[2])
	}
	if h := e.llm.Requests()[1].GetHistory(); len(h) != 3 {
		t.Fatalf("history = %v", enginetest.Kinds(h))
	}
}

func TestSteerOverGRPC(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
		fake.NewReply().Text("ok, python").Done(),
	)
	id := e.create(allowAll)
	evs := e.steerDuringATool(t, id, &penguinv1.SteerRequest{SessionId: id, Text: "use python"})
	nm := e.llm.Requests()[1].GetNewMessages()
	if len(nm) != 2 || nm[1].GetText().GetText() != "[user_steering]\nuse python\n[/user_steering]" {
		t.Fatalf("second request input = %v", nm)
	}
	if !enginetest.HasText(enginetest.Messages(evs), "[user_steering]") {
		t.Fatal("steering was not streamed")
	}
}

func TestReconnectAndRetryNowOverGRPC(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Fail(penguinv1.StopReason_STOP_REASON_TIMEOUT, "reset"),
		fake.NewReply().Outcome(&penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "overloaded", RetryAfterMs: 3}),
		fake.NewReply().Text("ok").Done(),
	)
	id := e.create(allowAll)
	evs := e.run(id, "go")
	checkStream(t, evs)
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("status %v %s", st.GetStatus(), st.GetMessage())
	}
	var ends []*penguinv1.RequestEnd
	var waits []int64
	for _, ev := range evs {
		if re := ev.GetMessage().GetRequestEnd(); re != nil {
			ends = append(ends, re)
		}
		if s := ev.GetState(); s.GetState() == penguinv1.SessionState_SESSION_STATE_RETRY_WAIT {
			waits = append(waits, s.GetRetryInMs())
		}
	}
	if len(ends) != 3 || ends[0].GetRetryInMs() != 1 || ends[1].GetRetryInMs() != 3 || ends[2].GetAttempt() != 3 {
		t.Fatalf("request_ends = %v", ends)
	}
	if len(waits) != 2 {
		t.Fatalf("retry_wait states = %v", waits)
	}

	// RetryNow cuts a long wait short.
	e2 := newEnv(t)
	e2.llm.Generate = fake.Script(
		fake.NewReply().Fail(penguinv1.StopReason_STOP_REASON_TIMEOUT, "reset"),
		fake.NewReply().Text("ok").Done(),
	)
	long := `max_turns: -1
retry:
  max_attempts: 2
  base_delay: 1h
  max_delay: 1h
`
	writeConfig(t, e2.agentDir, long)
	id2 := e2.create(allowAll)
	ctx := e2.ctx()
	stream, err := e2.client.Run(ctx, &penguinv1.RunRequest{SessionId: id2, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if st := r.GetEvent().GetState(); st.GetState() == penguinv1.SessionState_SESSION_STATE_RETRY_WAIT {
			if ms := st.GetRetryInMs(); ms <= 0 || ms > time.Hour.Milliseconds() {
				t.Fatalf("retry_in_ms = %d, want the time left of a 1 h wait", ms)
			}
			break
		}
	}
	// The wait is open to RetryNow once it is announced: the first call
	// takes.
	if r, err := e2.client.RetryNow(ctx, &penguinv1.RetryNowRequest{SessionId: id2}); err != nil || !r.GetRetried() {
		t.Fatalf("RetryNow right after the retry_wait event = %v, %v; want retried", r, err)
	}
	rest, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	if st := end(t, rest); st.GetStatus() != completedS {
		t.Fatalf("status %v", st.GetStatus())
	}
}

func TestAuthStopsTheRunAndSaysWhy(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(fake.NewReply().Fail(penguinv1.StopReason_STOP_REASON_AUTH, "invalid x-api-key"))
	id := e.create(allowAll)
	st := end(t, e.run(id, "go"))
	if st.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || !strings.Contains(st.GetMessage(), "invalid x-api-key") {
		t.Fatalf("end = %v", st)
	}
	if n := len(e.llm.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
}

func TestAttachReplaysAfterADrop(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("first answer").Done(),
		fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
		fake.NewReply().Text("second answer").Done(),
	)
	id := e.create(alwaysAsk)
	end(t, e.run(id, "one"))

	// A second run waits on an approval; a client that dropped earlier
	// attaches from its last sequence number.
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "two"})
	if err != nil {
		t.Fatal(err)
	}
	var live []*penguinv1.RunEvent
	var pending *penguinv1.ApprovalRequest
	for pending == nil {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, r.GetEvent())
		pending = r.GetEvent().GetApprovalRequest()
	}
	cut := live[2].GetSequence()
	attCtx, cancelAtt := context.WithCancel(ctx)
	defer cancelAtt()
	att, err := e.client.Attach(attCtx, &penguinv1.AttachRequest{SessionId: id, AfterSequence: cut})
	if err != nil {
		t.Fatal(err)
	}
	var replayed []*penguinv1.RunEvent
	for {
		r, err := att.Recv()
		if err != nil {
			t.Fatal(err)
		}
		replayed = append(replayed, r.GetEvent())
		if r.GetEvent().GetApprovalRequest() != nil {
			break
		}
	}
	// What the attach replayed equals what the live stream had after cut.
	want := live[3:]
	if len(replayed) != len(want) {
		t.Fatalf("replayed %d events, want %d", len(replayed), len(want))
	}
	for i := range want {
		if replayed[i].GetSequence() != want[i].GetSequence() {
			t.Fatalf("replayed %d: seq %d, want %d", i, replayed[i].GetSequence(), want[i].GetSequence())
		}
	}
	if _, err := e.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: "c1", Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
		t.Fatal(err)
	}
	// Both watchers see the rest and the end.
	rest, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	end(t, rest)
	var attRest []*penguinv1.RunEvent
	for {
		r, err := att.Recv()
		if err != nil {
			t.Fatal(err)
		}
		attRest = append(attRest, r.GetEvent())
		if r.GetEvent().GetState().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			break
		}
	}
	if len(attRest) != len(rest) || attRest[len(attRest)-1].GetSequence() != rest[len(rest)-1].GetSequence() {
		t.Fatalf("attach saw %d events, run %d", len(attRest), len(rest))
	}

	// A fresh Attach from zero on the idle, unloaded session replays the
	// whole log, and ends with how the task ended.
	cancelAtt()
	eventually.True(t, "the runtime to unload", func() bool { return e.mgr.Loaded() == 0 })
	all, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var last *penguinv1.RunEvent
	for {
		r, err := all.Recv()
		if err != nil {
			break
		}
		if r.GetEvent().GetMessage().GetPartialText() != nil {
			t.Fatal("a partial was replayed from the log")
		}
		if last = r.GetEvent(); last.GetMessage() != nil {
			n++
		}
	}
	if h := history(t, e, id); n != len(h) {
		t.Fatalf("attach from zero replayed %d events, the log has %d", n, len(h))
	}
	if st := last.GetState(); st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || last.GetSequence() != rest[len(rest)-1].GetSequence() {
		t.Fatalf("attach from zero ended with %v, want the idle state the run ended with (%v)", last, rest[len(rest)-1])
	}
}

func TestSlowWatcherIsCutNotTheRun(t *testing.T) {
	e := newEnv(t, func(o *session.Options) { o.BufferEvents = 16 })
	text := strings.Repeat("abcd", 200) // 200 deltas
	e.llm.Generate = fake.Script(fake.NewReply().Text(text).Done())
	id := e.create(allowAll)
	ctx := e.ctx()
	// A watcher that reads nothing until the run is over.
	att, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, AfterSequence: 1})
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the attach to register", func() bool { return e.mgr.Loaded() == 1 })
	// The run goes on whatever its watchers do (its own stream may be cut
	// as well with so small a buffer).
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "talk"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = enginetest.Collect(stream)
	eventually.True(t, "the run to finish", func() bool {
		s, err := e.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
		return err == nil && s.GetSession().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE && s.GetSession().GetLastSequence() > 5
	})
	var got error
	var last int64 = 1
	for {
		r, err := att.Recv()
		if err != nil {
			got = err
			break
		}
		last = r.GetEvent().GetSequence()
	}
	if code(got) != codes.ResourceExhausted || !strings.Contains(got.Error(), "Attach again") {
		t.Fatalf("slow watcher ended with %v", got)
	}
	// Attaching again from its last number gets the rest, from the log.
	again, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, AfterSequence: last, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for {
		r, err := again.Recv()
		if err != nil {
			break
		}
		if tx := r.GetEvent().GetMessage().GetText(); tx != nil {
			texts = append(texts, tx.GetText())
		}
	}
	if len(texts) == 0 || texts[len(texts)-1] != text {
		t.Fatalf("re-attached watcher missed the answer: %d texts", len(texts))
	}
}

func TestResumeAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
		fake.NewReply().Text("first done").Done(),
		fake.NewReply().Text("second done").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "one"))
	before := history(t, e, id)
	e.stop()
	e.start()
	evs := e.run(id, "two")
	end(t, evs)
	req := e.llm.Requests()[2]
	if got := enginetest.Kinds(req.GetHistory()); strings.Join(got, ",") != "text,tool_call,tool_call_output,text" {
		t.Fatalf("resumed history = %v", got)
	}
	// Sequence numbers continue above everything handed out before.
	if evs[0].GetSequence() <= before[len(before)-1].GetSequence() {
		t.Fatalf("first event after restart has sequence %d, log ended at %d", evs[0].GetSequence(), before[len(before)-1].GetSequence())
	}
}

func TestForkCutsToACompletedTurn(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("answer one").Done(),
		fake.NewReply().Text("answer two").Done(),
		fake.NewReply().Text("forked answer").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "one"))
	end(t, e.run(id, "two"))
	hist := history(t, e, id)
	// Cut in the middle of the second turn: the fork keeps the first.
	var secondBegin int64
	begins := 0
	for _, ev := range hist {
		if ev.GetMessage().GetRequestBegin() != nil {
			begins++
			if begins == 2 {
				secondBegin = ev.GetSequence()
			}
		}
	}
	fk, err := e.client.ForkSession(e.ctx(), &penguinv1.ForkSessionRequest{SessionId: id, UpToSequence: secondBegin + 1})
	if err != nil {
		t.Fatal(err)
	}
	fid := fk.GetSession().GetSessionId()
	if fid == id || fk.GetSession().GetSource() != "fork" {
		t.Fatalf("fork = %v", fk.GetSession())
	}
	fh := history(t, e, fid)
	if fh[0].GetMessage().GetSessionMeta().GetSessionId() != fid {
		t.Fatal("the fork's session_meta names the source")
	}
	end(t, e.run(fid, "three"))
	req := e.llm.Requests()[2]
	if got := enginetest.Kinds(req.GetHistory()); strings.Join(got, ",") != "text,text" {
		t.Fatalf("fork history = %v", got)
	}
	// The fork's input: the second prompt (recorded before the cut point's
	// request began) and the new one.
	nm := req.GetNewMessages()
	if len(nm) != 2 || nm[0].GetText().GetText() != "two" || nm[1].GetText().GetText() != "three" {
		t.Fatalf("fork input = %v", nm)
	}
}

func TestManualCompactOverGRPC(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("long answer").Done(),
		fake.NewReply().Text("[summary]we talked[/summary]").Done(),
		fake.NewReply().Text("fresh").Done(),
	)
	id := e.create(allowAll)
	if resp, err := e.client.Compact(e.ctx(), &penguinv1.CompactRequest{SessionId: id}); err != nil || resp.GetStatus() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(resp.GetMessage(), "the context is empty") {
		t.Fatalf("Compact of a new session: %v %v", resp, err)
	}
	end(t, e.run(id, "one"))
	resp, err := e.client.Compact(e.ctx(), &penguinv1.CompactRequest{SessionId: id})
	if err != nil || resp.GetStatus() != completedS {
		t.Fatalf("Compact: %v %v", resp, err)
	}
	// Compacting again at once has nothing to compact, and says why.
	if resp, err := e.client.Compact(e.ctx(), &penguinv1.CompactRequest{SessionId: id}); err != nil || resp.GetStatus() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(resp.GetMessage(), "just compacted") {
		t.Fatalf("Compact right after a compaction: %v %v", resp, err)
	}
	end(t, e.run(id, "two"))
	req := e.llm.Requests()[2]
	if len(req.GetHistory()) != 0 || !strings.Contains(req.GetNewMessages()[0].GetText().GetText(), "we talked") {
		t.Fatalf("after compaction: history %v, input %v", enginetest.Kinds(req.GetHistory()), req.GetNewMessages())
	}
	// The log holds a new context head: session_meta and tool_list_ready.
	kinds := enginetest.Kinds(enginetest.Messages(history(t, e, id)))
	joined := strings.Join(kinds, ",")
	if !strings.Contains(joined, "compaction_end,session_meta,tool_list_ready,text") {
		t.Fatalf("log = %v", kinds)
	}
}

// exportTrace reads ExportTrace to its end.
func exportTrace(e *env, req *penguinv1.ExportTraceRequest) ([]*penguinv1.ExportTraceResponse, error) {
	stream, err := e.client.ExportTrace(e.ctx(), req)
	if err != nil {
		return nil, err
	}
	var out []*penguinv1.ExportTraceResponse
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestExportTrace(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(fake.NewReply().Text("hi").Done())
	id := e.create(allowAll)
	end(t, e.run(id, "hello"))
	lines, err := exportTrace(e, &penguinv1.ExportTraceRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(history(t, e, id)) || !strings.Contains(lines[0].GetLine(), "session_meta") {
		t.Fatalf("trace = %v", lines)
	}
	for _, l := range lines {
		if l.GetContextIndex() != 1 {
			t.Fatalf("line %q in context %d, want 1", l.GetLine(), l.GetContextIndex())
		}
	}
}

// A compacted session exports one trace per model context, as
// docs/trace-format.md describes (one file per context): each opens with its own
// session_meta and holds no other, the compaction belongs to the context
// it closed, and one context can be asked for alone.
func TestExportTraceOfACompactedSession(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("long answer").Done(),
		fake.NewReply().Text("[summary]we talked[/summary]").Done(),
		fake.NewReply().Text("fresh").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "one"))
	if resp, err := e.client.Compact(e.ctx(), &penguinv1.CompactRequest{SessionId: id}); err != nil || resp.GetStatus() != completedS {
		t.Fatalf("Compact: %v %v", resp, err)
	}
	end(t, e.run(id, "two"))

	all, err := exportTrace(e, &penguinv1.ExportTraceRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	byContext := map[int32][]string{}
	prev := int32(1)
	for _, l := range all {
		if l.GetContextIndex() < prev {
			t.Fatalf("context index went back from %d to %d", prev, l.GetContextIndex())
		}
		prev = l.GetContextIndex()
		byContext[prev] = append(byContext[prev], l.GetLine())
	}
	if len(byContext) != 2 || len(all) != len(history(t, e, id)) {
		t.Fatalf("%d lines in contexts %v, want every line of the log in two", len(all), slices.Collect(maps.Keys(byContext)))
	}
	for idx, lines := range byContext {
		msgs, err := transcript.ReadJSONL(strings.NewReader(strings.Join(lines, "\n") + "\n"))
		if err != nil {
			t.Fatalf("context %d does not read as a trace: %v", idx, err)
		}
		got := enginetest.Kinds(msgs)
		if got[0] != "session_meta" || enginetest.CountKind(msgs, "session_meta") != 1 {
			t.Fatalf("context %d = %v, want one session_meta, first", idx, got)
		}
		switch idx {
		case 1:
			if got[len(got)-1] != "compaction_end" || !enginetest.HasText(msgs, "one") {
				t.Fatalf("context 1 = %v, want the first task and the compaction that closed it", got)
			}
		case 2:
			if !enginetest.HasText(msgs, "two") || enginetest.HasText(msgs, "one") || enginetest.CountKind(msgs, "compaction_begin") != 0 {
				t.Fatalf("context 2 = %v, want the summary and the second task alone", got)
			}
		}
	}
	// One context alone is exactly that context's lines.
	second, err := exportTrace(e, &penguinv1.ExportTraceRequest{SessionId: id, ContextIndex: 2})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range second {
		lines = append(lines, l.GetLine())
		if l.GetContextIndex() != 2 {
			t.Fatalf("line of context %d in the export of context 2", l.GetContextIndex())
		}
	}
	if !slices.Equal(lines, byContext[2]) {
		t.Fatalf("context 2 alone = %d lines, want the %d of the full export", len(lines), len(byContext[2]))
	}
	// A context that does not exist, and a negative index, say so.
	if _, err := exportTrace(e, &penguinv1.ExportTraceRequest{SessionId: id, ContextIndex: 3}); code(err) != codes.NotFound || !strings.Contains(err.Error(), "has 2 model contexts") {
		t.Fatalf("context 3: %v, want NotFound naming the 2 contexts", err)
	}
	if _, err := exportTrace(e, &penguinv1.ExportTraceRequest{SessionId: id, ContextIndex: -1}); code(err) != codes.InvalidArgument {
		t.Fatalf("context -1: %v, want InvalidArgument", err)
	}
}

// blockedRun starts a task whose first request blocks until its context
// ends, and returns once the request is in flight.
func blockedRun(t *testing.T, e *env, id string, then ...*fake.Reply) {
	t.Helper()
	g := newGate()
	e.llm.Generate = fake.Script(append([]*fake.Reply{fake.NewReply().PartialOnly("thinking about").Hook(func(ctx context.Context) error {
		g.open()
		<-ctx.Done()
		return ctx.Err()
	})}, then...)...)
	ctx := e.ctx()
	if _, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go"}); err != nil {
		t.Fatal(err)
	}
	if err := g.wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// An agent without durable tasks has its running task aborted by a
// shutdown, which records the abort.
func TestShutdownAbortsATaskThatIsNotDurable(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.agentDir, "system_config.yaml"), []byte(testConfig+"durable_tasks: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := e.create(allowAll)
	blockedRun(t, e, id)
	e.stop()
	e.start()
	hist := history(t, e, id)
	last := hist[len(hist)-1].GetMessage()
	if last.GetAbort() == nil || !strings.Contains(last.GetAbort().GetReason(), "shutting down") {
		t.Fatalf("last logged event = %v", last)
	}
	// Nothing is left to resume: the run ended.
	if ids, err := e.store.StaleLeases(e.ctx(), "nobody"); err != nil || len(ids) != 0 {
		t.Fatalf("stale leases after an aborted run = %v, %v", ids, err)
	}
}

// A durable task is handed over by a shutdown: nothing more is written to
// its log, and the engine started next on the store resumes it from there
// and finishes it, with no client sending anything.
func TestShutdownHandsADurableTaskOver(t *testing.T) {
	e := newEnv(t)
	id := e.create(allowAll)
	blockedRun(t, e, id, fake.NewReply().Text("finished after the handover").Done())
	e.stop()
	e.start()
	hist := history(t, e, id)
	for _, ev := range hist {
		if ev.GetMessage().GetAbort() != nil {
			t.Fatalf("a handed-over task recorded an abort: %v", ev)
		}
	}
	ctx := e.ctx()
	e.mgr.StartResuming()
	eventually.Within(t, 20*time.Second, "the resumed task to finish", func() bool {
		r, err := e.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: id})
		return err == nil && r.GetSession().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE &&
			enginetest.HasText(enginetest.Messages(history(t, e, id)), "finished after the handover")
	})
	reqs := e.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want the cut-off one and the resumed one", len(reqs))
	}
	// The resumed request carries the prompt the client sent once.
	if got := enginetest.Kinds(reqs[1].GetNewMessages()); len(reqs[1].GetHistory()) != 0 || strings.Join(got, ",") != "text" || reqs[1].GetNewMessages()[0].GetText().GetText() != "go" {
		t.Fatalf("resumed request: history %v, new messages %v", enginetest.Kinds(reqs[1].GetHistory()), got)
	}
	if n := enginetest.CountKind(enginetest.Messages(history(t, e, id)), "text"); n != 2 {
		t.Fatalf("%d texts in the log, want the prompt once and the answer", n)
	}
}

// A tool call waiting for approval when its engine stops never ran: the
// engine that resumes the task asks for it again, runs it once allowed,
// and the task goes on, the call's one output in the log.
func TestAResumedTaskAsksAPendingApprovalAgain(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	executed := 0
	e.envSvc.Execute = func(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		mu.Lock()
		executed++
		mu.Unlock()
		return stream.Send(&penguinv1.ExecuteToolResponse{Message: omni.ToolCallOutput(req.GetToolCall().GetToolCallId(), "ran", penguinv1.StopReason_STOP_REASON_COMPLETED)})
	}
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"make"}`).Done(),
		fake.NewReply().Text("built").Done(),
	)
	id := e.create(penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK)
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "build it"})
	if err != nil {
		t.Fatal(err)
	}
	// The engine stops once the call waits for approval and the model's
	// request has ended on record. The approval is asked while the model
	// still streams: a stop before the request's end leaves a request cut
	// off, which the next engine sends again instead of asking (seen under
	// load once the journal published without delay).
	askedFirst, ended := false, false
	for !askedFirst || !ended {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("the run ended before asking: %v", err)
		}
		askedFirst = askedFirst || r.GetEvent().GetApprovalRequest() != nil
		ended = ended || r.GetEvent().GetMessage().GetRequestEnd() != nil
	}
	e.stop()
	e.start()
	e.mgr.StartResuming()
	att, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	asked := false
	eventually.Within(t, 20*time.Second, "the resumed task to ask again", func() bool {
		for !asked {
			r, err := att.Recv()
			if err != nil {
				// Attached before the task was resumed: attach again.
				if att, err = e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true}); err != nil {
					t.Fatal(err)
				}
				return false
			}
			if q := r.GetEvent().GetApprovalRequest(); q != nil && q.GetToolCall().GetToolCallId() == "c1" {
				asked = true
			}
		}
		return true
	})
	if _, err := e.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: "c1", Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
		t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	for {
		r, err := att.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, r.GetEvent())
	}
	if len(evs) == 0 {
		t.Fatal("the Attach stream ended with no event after the approval")
	}
	if st := evs[len(evs)-1].GetState(); st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || st.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the resumed task ended with %v", evs[len(evs)-1])
	}
	mu.Lock()
	defer mu.Unlock()
	msgs := enginetest.Messages(history(t, e, id))
	if executed != 1 || enginetest.CountKind(msgs, "tool_call_output") != 1 || enginetest.CountKind(msgs, "approval_decision") != 1 || !enginetest.HasText(msgs, "built") {
		t.Fatalf("the call ran %d times; log %v", executed, enginetest.Kinds(msgs))
	}
	req := e.llm.Requests()[1]
	if h, n := enginetest.Kinds(req.GetHistory()), enginetest.Kinds(req.GetNewMessages()); strings.Join(h, ",") != "text,tool_call" || strings.Join(n, ",") != "tool_call_output" ||
		req.GetNewMessages()[0].GetToolCallOutput().GetOutput() != "ran" {
		t.Fatalf("the resumed request: history %v, new messages %v", h, n)
	}
}

func TestTwoEnginesShareAStore(t *testing.T) {
	e := newEnv(t, func(o *session.Options) { o.EngineID, o.Address = "engine-a", "10.0.0.1:7423" })
	g := newGate()
	hold := fake.NewReply().Text("slow").Done()
	hold.Before = g.wait
	e.llm.Generate = fake.Script(hold)
	id := e.create(allowAll)
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	// A second engine on the same store: the session runs on the first.
	st, err := store.Open(ctx, e.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := session.New(session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(e.llmConn), Environment: penguinv1.NewEnvironmentServiceClient(e.envConn),
		DefaultAgentState: e.agentDir, EngineID: "engine-b", Address: "10.0.0.2:7423",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown(ctx)
	b := penguinv1.NewEngineServiceClient(fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEngineServiceServer(s, engine.New(other, nil)) }))
	second, err := b.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "again"})
	if err == nil {
		_, err = second.Recv()
	}
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "engine-a") {
		t.Fatalf("Run on the other engine: %v", err)
	}
	_, err = b.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "x"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "10.0.0.1:7423") {
		t.Fatalf("Steer on the other engine: %v", err)
	}
	att, err := b.Attach(ctx, &penguinv1.AttachRequest{SessionId: id})
	if err == nil {
		_, err = att.Recv()
	}
	if code(err) != codes.FailedPrecondition {
		t.Fatalf("Attach on the other engine: %v", err)
	}
	g.open()
	evs, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	end(t, evs)
}

// An agent whose system_config.yaml is in PenguinHarness's spelling
// (docs/configuration.md) runs as written: its request timeout reaches the
// model request, its context threshold triggers a compaction, and its turn
// threshold is read.
func TestAnAgentInTheReferencesSpellingRuns(t *testing.T) {
	e := newEnv(t)
	ref := `name: default_agent
version: 3
system_prompt: |
  You are {{AGENT_ID}}.
  {{SCHEDULES}}
max_turns: -1
model:
  max_tokens: 32000
  thinking_level: medium
  timeoutMs: 4321
compaction:
  max_context_length: 500
  max_session_turns: -1
  mode: discard
`
	if err := os.WriteFile(filepath.Join(e.agentDir, "system_config.yaml"), []byte(ref), 0o644); err != nil {
		t.Fatal(err)
	}
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "read_file", `{"file_path":"a"}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completedS}),
		fake.NewReply().Text("done").Done(),
	)
	id := e.create(allowAll)
	if st := end(t, e.run(id, "go")); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	reqs := e.llm.Requests()
	if len(reqs) != 2 || reqs[0].GetRequestTimeoutMs() != 4321 || strings.Contains(reqs[0].GetSystemPrompt(), "{{") {
		t.Fatalf("%d requests; first: timeout %d, system prompt %q", len(reqs), reqs[0].GetRequestTimeoutMs(), reqs[0].GetSystemPrompt())
	}
	// The context threshold of 500 was passed: the second request starts
	// a fresh context, the old one discarded.
	if len(reqs[1].GetHistory()) != 0 || !strings.Contains(reqs[1].GetNewMessages()[0].GetText().GetText(), "[context_discarded]") {
		t.Fatalf("second request: history %v, input %v", enginetest.Kinds(reqs[1].GetHistory()), reqs[1].GetNewMessages())
	}
}

// steerDuringATool runs a task on session id whose tool call sends steer
// while it runs, and returns the task's events once it ended.
func (e *env) steerDuringATool(t *testing.T, id string, steer *penguinv1.SteerRequest) []*penguinv1.RunEvent {
	t.Helper()
	steered := make(chan error, 1)
	e.envSvc.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		_, err := e.client.Steer(s.Context(), steer)
		steered <- err
		return fake.Echo(req, s)
	}
	evs := e.run(id, "go")
	if err := <-steered; err != nil {
		t.Fatalf("Steer: %v", err)
	}
	end(t, evs)
	return evs
}
