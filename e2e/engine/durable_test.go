package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// The durable task of these tests: append the lines step-1 … step-N to
// out.txt, one exec_command per line, each approved by the client. Every
// append also writes its call id to calls.txt, so a call the environment
// ran twice shows there.
const durableSteps = 30

// stepModel is a model that works the task out from what it is sent, as a
// real one would, so that it answers sensibly however often its engine is
// killed: for the first step whose line is not known to be written, it
// appends it; when an append of that step was cut off without a result
// (an interrupted output, or a request that never ended), it first checks
// the file. It streams its text slowly enough for a kill to land mid-stream.
type stepModel struct {
	mu    sync.Mutex
	calls int
}

func (m *stepModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	// The markers below hold no character that JSON escapes, so the raw
	// body can be searched: messages in order, the harness's notes last.
	all := string(body)
	text, call := finalAnswer, ""
	for k := 1; k <= durableSteps; k++ {
		if strings.Contains(all, marker("DONE", k)) || strings.Contains(all, marker("PRESENT", k)) {
			continue
		}
		id := fmt.Sprintf("call_%d_%d", k, n)
		appended, absent := strings.LastIndex(all, marker("APPEND", k)), strings.LastIndex(all, marker("ABSENT", k))
		if appended < 0 || absent > appended {
			text = fmt.Sprintf("Appending line %d now.", k)
			call = execArgs(fmt.Sprintf("sleep 0.2; echo step-%d >> out.txt; echo %s >> calls.txt; echo %s", k, id, shellMarker("DONE", k)), marker("APPEND", k))
		} else {
			text = fmt.Sprintf("The append of line %d was cut off; checking the file first.", k)
			call = execArgs(fmt.Sprintf("if grep -qx step-%d out.txt; then echo %s; else echo %s; fi", k, shellMarker("PRESENT", k), shellMarker("ABSENT", k)), marker("CHECK", k))
		}
		streamChat(w, text, id, call)
		return
	}
	streamChat(w, text, "", "")
}

// finalAnswer is the model's answer once every line is written.
const finalAnswer = "All steps are done."

func marker(kind string, k int) string { return kind + "_" + strconv.Itoa(k) + "_" }

// shellMarker is marker as a command prints it: the command's own text
// (in the call's arguments, which the model is sent too) does not contain
// the marker, only its output does.
func shellMarker(kind string, k int) string { return kind + "_$((" + strconv.Itoa(k) + "))_" }

func execArgs(cmd, description string) string {
	b, _ := json.Marshal(map[string]string{"cmd": cmd, "description": description})
	return string(b)
}

// streamChat streams an OpenAI chat completion: text in small paced
// deltas, then one tool call when id is set.
func streamChat(w http.ResponseWriter, text, id, args string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-step", "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i := 0; i < len(text); i += 6 {
		time.Sleep(10 * time.Millisecond)
		send(chunk(map[string]any{"content": text[i:min(i+6, len(text))]}, nil))
	}
	finish := "stop"
	if id != "" {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": "exec_command", "arguments": ""}}}}, nil))
		for i := 0; i < len(args); i += 24 {
			time.Sleep(5 * time.Millisecond)
			send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args[i:min(i+24, len(args))]}}}}, nil))
		}
		finish = "tool_calls"
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": "chatcmpl-step", "object": "chat.completion.chunk", "model": "m", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func TestDurableTaskSurvivesKillsSQLite(t *testing.T) {
	durableKills(t, filepath.Join(t.TempDir(), "engine.db"))
}

func TestDurableTaskSurvivesKillsPostgres(t *testing.T) {
	durableKills(t, postgresURL(t))
}

// killPoint is where in the task a trial kills the engine.
type killPoint int

const (
	midStream   killPoint = iota // while the model's answer streams
	midTool                      // while an approved append runs
	midApproval                  // while an approval waits for its answer
)

func (k killPoint) String() string { return [...]string{"mid-stream", "mid-tool", "mid-approval"}[k] }

// durableKills SIGKILLs the engine running a durable task 20 times in a
// row, each time at a random point of one of three kinds, restarting it on
// the same store and address after each kill; no client re-sends the
// task, the client only follows it with Attach and answers approvals.
// The task completes, every event of the log was streamed to the client
// exactly once as recorded, and no tool call ran twice: out.txt holds
// each step's line once, calls.txt each call id at most once. Then a
// SIGTERM mid-task hands the task over to the next start.
func durableKills(t *testing.T, storeURL string) {
	const kills = 20
	b := enginetest.NewBackendsWithModel(t, &stepModel{})
	ws := filepath.Join(b.Root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("random seed %d", seed)

	ctx := testkit.Context(t, 6*time.Minute)
	proc, addr := startEngine(t, "127.0.0.1:0", b, storeURL, agentDir)
	client := e2etest.DialEngine(t, addr, "")
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	run, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: fmt.Sprintf("Append the lines step-1 to step-%d to out.txt.", durableSteps)})
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{t: t, client: client, id: id, seen: map[int64]*penguinv1.RunEvent{}}
	// The Run stream is followed like any Attach stream until the first kill.
	var stream enginetest.Stream = run
	counts := map[killPoint]int{}
	for trial := 1; trial <= kills; trial++ {
		point := killPoint(rng.IntN(3))
		// Wait for the point, answering approvals on the way (all but
		// the one a mid-approval kill waits in).
		delay := time.Duration(rng.IntN(150)) * time.Millisecond
		ok := f.follow(ctx, stream, func(ev *penguinv1.RunEvent) bool {
			switch point {
			case midStream:
				return ev.GetMessage().GetPartialText() != nil && rng.IntN(3) == 0
			case midTool:
				d := ev.GetMessage().GetApprovalDecision()
				return d != nil && d.GetDecision() == penguinv1.Decision_DECISION_ALLOW
			default:
				return ev.GetApprovalRequest() != nil
			}
		})
		if !ok {
			t.Fatalf("trial %d: the task ended before %d kills; make it longer", trial, kills)
		}
		if point != midApproval {
			time.Sleep(delay) // within the stream's or the command's 200 ms
		}
		proc.Kill()
		proc.Wait(30 * time.Second)
		counts[point]++
		t.Logf("trial %d: killed %v after event %d", trial, point, f.last)
		proc, _ = startEngine(t, addr, b, storeURL, agentDir)
		client = e2etest.DialEngine(t, addr, "")
		f.client = client
		stream = f.attach(ctx)
	}
	t.Logf("%d kills: %d mid-stream, %d mid-tool, %d mid-approval", kills, counts[midStream], counts[midTool], counts[midApproval])

	// A SIGTERM mid-task: the task is handed over, the next start resumes it.
	if !f.follow(ctx, stream, func(ev *penguinv1.RunEvent) bool { return ev.GetMessage().GetPartialText() != nil }) {
		t.Fatal("the task ended before the SIGTERM")
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("graceful stop exited %d", code)
	}
	proc, _ = startEngine(t, addr, b, storeURL, agentDir)
	client = e2etest.DialEngine(t, addr, "")
	f.client = client
	stream = f.attach(ctx)
	if f.follow(ctx, stream, func(*penguinv1.RunEvent) bool { return false }) {
		t.Fatal("follow stopped early")
	}
	if !f.idle || f.status != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the task ended %v (idle %v), want completed", f.status, f.idle)
	}

	// The log: every event streamed exactly once, as recorded.
	hist := e2etest.History(ctx, t, client, id)
	for _, ev := range hist {
		if ev.GetMessage().GetSessionMeta() != nil {
			continue // recorded by CreateSession, before the Run's stream
		}
		got, ok := f.seen[ev.GetSequence()]
		if !ok {
			t.Fatalf("event %d (%s) of the log never reached the client", ev.GetSequence(), enginetest.Kinds(enginetest.Messages([]*penguinv1.RunEvent{ev})))
		}
		if !sameMessage(got, ev) {
			t.Fatalf("event %d reached the client as %v, the log says %v", ev.GetSequence(), got, ev)
		}
	}
	if f.dups > 0 {
		t.Fatalf("%d events reached the client twice", f.dups)
	}
	msgs := enginetest.Messages(hist)
	calls, outputs := map[string]int{}, map[string]int{}
	for _, m := range msgs {
		if c := m.GetToolCall(); c != nil {
			calls[c.GetToolCallId()]++
		}
		if o := m.GetToolCallOutput(); o != nil {
			outputs[o.GetToolCallId()]++
		}
	}
	for id, n := range calls {
		if n != 1 || outputs[id] > 1 {
			t.Fatalf("call %s logged %d times with %d outputs", id, n, outputs[id])
		}
	}
	if n := enginetest.CountKind(msgs, "session_meta"); n != 1 {
		t.Fatalf("%d session_meta in the log", n)
	}
	// No tool ran twice.
	out, err := os.ReadFile(filepath.Join(ws, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := 1; k <= durableSteps; k++ {
		want = append(want, fmt.Sprintf("step-%d", k))
	}
	lines := strings.Fields(string(out))
	if !slices.Equal(lines, want) {
		t.Fatalf("out.txt = %q, want each step once in order", lines)
	}
	ran, err := os.ReadFile(filepath.Join(ws, "calls.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(ran))
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(ids) {
		t.Fatalf("a call ran twice: calls.txt = %q", ids)
	}
	t.Logf("task completed after %d kills and a SIGTERM: %d log events, %d tool calls, %d appends run for %d lines, %d approvals answered",
		kills, len(hist), len(calls), len(ids), len(lines), f.approved)
}

// follower follows the task as a client would: through Run and then
// Attach streams, answering every approval, and keeps every event it got.
type follower struct {
	t        *testing.T
	client   penguinv1.EngineServiceClient
	id       string
	seen     map[int64]*penguinv1.RunEvent
	last     int64
	dups     int
	approved int
	idle     bool
	status   penguinv1.StopReason
}

// attach opens an Attach stream after the last event seen, waiting for
// the restarted engine to resume the task.
func (f *follower) attach(ctx context.Context) enginetest.Stream {
	f.t.Helper()
	att, err := f.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: f.id, AfterSequence: f.last, UntilIdle: true})
	if err != nil {
		f.t.Fatalf("Attach: %v", err)
	}
	return attachStream{att}
}

type attachStream struct {
	s interface {
		Recv() (*penguinv1.AttachResponse, error)
	}
}

func (a attachStream) Recv() (*penguinv1.RunResponse, error) {
	r, err := a.s.Recv()
	if err != nil {
		return nil, err
	}
	return &penguinv1.RunResponse{Event: r.GetEvent()}, nil
}

// follow reads s until stop says so (true) or the task ends (false),
// answering approvals unless stop stopped at one. A stream that ends
// before the task did (the engine was killed, or an Attach came before
// the restarted engine resumed the task) is reopened.
func (f *follower) follow(ctx context.Context, s enginetest.Stream, stop func(*penguinv1.RunEvent) bool) bool {
	for {
		r, err := s.Recv()
		if err != nil {
			if ctx.Err() != nil {
				f.t.Fatalf("following the task: %v", ctx.Err())
			}
			if f.finished(ctx) {
				return false
			}
			// Poll for the resumed task, briefly: the restarted engine
			// takes its run back at once.
			eventually.Within(f.t, 30*time.Second, "the engine to serve again", func() bool {
				_, err := f.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: f.id})
				return err == nil
			})
			s = f.attach(ctx)
			continue
		}
		ev := r.GetEvent()
		if ev.GetMessage() != nil && ev.GetSequence() > 0 {
			if _, ok := f.seen[ev.GetSequence()]; ok {
				f.dups++
			}
			f.seen[ev.GetSequence()] = ev
		}
		if ev.GetSequence() > f.last {
			f.last = ev.GetSequence()
		}
		if st := ev.GetState(); st != nil && st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			f.idle, f.status = true, st.GetStatus()
			return false
		}
		if stop(ev) {
			return true
		}
		if q := ev.GetApprovalRequest(); q != nil {
			_, err := f.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: f.id, ToolCallId: q.GetToolCall().GetToolCallId(), Decision: penguinv1.Decision_DECISION_ALLOW, Origin: q.GetOrigin()})
			if err == nil {
				f.approved++
			}
		}
	}
}

// finished reports whether the task ended while no stream was there to
// see its idle state: the session is idle and its log ends with the
// model's last answer, committed.
func (f *follower) finished(ctx context.Context) bool {
	r, err := f.client.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: f.id})
	if err != nil || r.GetSession().GetState() != penguinv1.SessionState_SESSION_STATE_IDLE {
		return false
	}
	msgs := enginetest.Messages(e2etest.History(ctx, f.t, f.client, f.id))
	answered, ended := false, false
	for _, m := range msgs {
		switch {
		case m.GetRequestBegin() != nil:
			answered, ended = false, false
		case m.GetText().GetText() == finalAnswer:
			answered = true
		case m.GetRequestEnd() != nil:
			ended = m.GetRequestEnd().GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED
		}
	}
	if !answered || !ended {
		return false
	}
	f.idle, f.status = true, penguinv1.StopReason_STOP_REASON_COMPLETED
	return true
}

func sameMessage(a, b *penguinv1.RunEvent) bool {
	return proto.Equal(a.GetMessage(), b.GetMessage())
}
