package subagent_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/enginetool/subagent"
)

// fakeParent is a parent session whose children are scripted by the test:
// each started child's events come from a channel the test feeds.
type fakeParent struct {
	mu       sync.Mutex
	spawned  []string
	runs     map[string]*fakeRun
	aborted  []string
	emitted  []*penguinv1.OmniMessage
	notices  []*penguinv1.OmniMessage
	children map[string]int64 // child id → last sequence
	starts   []string         // prompts started
	// gate, when set, holds every Spawn after it has created its child
	// until it is closed.
	gate chan struct{}
}

func newParent() *fakeParent {
	return &fakeParent{runs: map[string]*fakeRun{}, children: map[string]int64{}}
}

type fakeRun struct {
	events   chan *penguinv1.RunEvent
	begin    int64
	after    int64
	released bool
}

func (p *fakeParent) ID() string      { return "session-parent" }
func (p *fakeParent) AgentID() string { return "coder" }

func (p *fakeParent) Spawn(_ context.Context, model *penguinv1.ModelRef, _ penguinv1.ThinkingLevel) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if model.GetModelId() == "refused" {
		return "", errors.New("no such model")
	}
	id := fmt.Sprintf("session-child-%d", len(p.spawned)+1)
	p.spawned = append(p.spawned, id)
	p.children[id] = 1
	if gate := p.gate; gate != nil {
		p.mu.Unlock()
		<-gate
		p.mu.Lock()
	}
	return id, nil
}

func (p *fakeParent) Start(_ context.Context, id, prompt string, _ penguinv1.ThinkingLevel) (subagent.Run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &fakeRun{events: make(chan *penguinv1.RunEvent, 64), begin: p.children[id]}
	p.runs[id] = r
	p.starts = append(p.starts, prompt)
	return (*runHandle)(r), nil
}

type runHandle fakeRun

func (r *runHandle) Begin() int64 { return r.begin }
func (r *runHandle) Release()     { r.released = true }
func (r *runHandle) Follow(ctx context.Context, after int64, send func(*penguinv1.RunEvent)) error {
	r.after = after
	for {
		select {
		case ev := <-r.events:
			send(ev)
			if ev.GetState().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (p *fakeParent) Child(_ context.Context, id string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.children[id]
	return last, ok
}

func (p *fakeParent) Abort(_ context.Context, id, _ string) error {
	p.mu.Lock()
	r := p.runs[id]
	p.aborted = append(p.aborted, id)
	p.mu.Unlock()
	r.events <- idle(penguinv1.StopReason_STOP_REASON_ABORTED, "stopped")
	return nil
}

func (p *fakeParent) Emit(m *penguinv1.OmniMessage) {
	p.mu.Lock()
	p.emitted = append(p.emitted, m)
	p.mu.Unlock()
}

func (p *fakeParent) Notify(n *penguinv1.OmniMessage) {
	p.mu.Lock()
	p.notices = append(p.notices, n)
	p.mu.Unlock()
}

func (p *fakeParent) run(id string) *fakeRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[id]
}

func idle(st penguinv1.StopReason, msg string) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: st, Message: msg}}}
}

func message(m *penguinv1.OmniMessage) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: m}}
}

// answer plays a child's turn that ends with text, then its idle state.
func (r *fakeRun) answer(text string) {
	r.events <- message(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}})
	r.events <- message(omni.AssistantText(text))
	r.events <- message(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}})
	r.events <- idle(penguinv1.StopReason_STOP_REASON_COMPLETED, "")
}

type callResult struct {
	out       *penguinv1.ToolCallOutput
	forwarded []*penguinv1.OmniMessage
}

// call runs tool name of tools in a goroutine of the bubble.
func call(ctx context.Context, tools *subagent.Tools, name, args string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		var mu sync.Mutex
		var fwd []*penguinv1.OmniMessage
		out := tools.Tool(name).Execute(ctx, &penguinv1.ToolCall{ToolCallId: "c-" + name, Name: name, Arguments: args}, func(m *penguinv1.OmniMessage) {
			mu.Lock()
			fwd = append(fwd, m)
			mu.Unlock()
		})
		mu.Lock()
		defer mu.Unlock()
		ch <- callResult{out: out.GetToolCallOutput(), forwarded: fwd}
	}()
	return ch
}

func newTools(p *fakeParent, max int) *subagent.Tools {
	return subagent.NewRegistry(max).For(p, slog.New(slog.DiscardHandler))
}

func TestForegroundSubagentAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		res := call(t.Context(), newTools(p, 0), "run_subagent", `{"prompt":"find the bug","agent_id":"coder"}`)
		synctest.Wait()
		r := p.run("session-child-1")
		// Two requests: the answer is the last completed one's text.
		r.events <- message(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}})
		r.events <- message(omni.AssistantText("let me look"))
		r.events <- message(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}})
		r.answer("the bug is in parse.go")
		got := <-res
		if got.out.GetOutput() != "the bug is in parse.go" || got.out.GetStopReason() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
			t.Fatalf("output = %v", got.out)
		}
		// The pointer to the child goes first, then the child's messages
		// with their origin.
		if got.forwarded[0].GetSubagent().GetSessionId() != "session-child-1" {
			t.Fatalf("first forwarded = %v, want the subagent pointer", got.forwarded[0])
		}
		for _, m := range got.forwarded[1:] {
			if len(m.GetOrigin()) != 1 || m.GetOrigin()[0] != "session-child-1" {
				t.Fatalf("forwarded %v without the child as origin", m)
			}
		}
		synctest.Wait()
		if !r.released || r.after != 0 {
			t.Fatalf("run released %v, followed after %d; want released, from the child's first event", r.released, r.after)
		}
	})
}

func TestTheWindowPassesAndTheChildReportsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		res := call(t.Context(), newTools(p, 0), "run_subagent", `{"prompt":"long job","yield_time_ms":1000}`)
		synctest.Wait()
		r := p.run("session-child-1")
		r.events <- message(omni.AssistantText("halfway"))
		time.Sleep(time.Second)
		got := <-res
		if !strings.Contains(got.out.GetOutput(), "moved to the background") || !strings.Contains(got.out.GetOutput(), "halfway") {
			t.Fatalf("output when the window passed = %q", got.out.GetOutput())
		}
		r.answer("all done")
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.notices) != 1 {
			t.Fatalf("%d completion reports", len(p.notices))
		}
		text := p.notices[0].GetText().GetText()
		for _, want := range []string{"kind: subagent", "id: session-child-1", "status: completed", "all done"} {
			if !strings.Contains(text, want) {
				t.Errorf("report lacks %q:\n%s", want, text)
			}
		}
		if len(p.emitted) == 0 {
			t.Fatal("the background child's messages did not reach the parent's watchers")
		}
	})
}

func TestTheLimitRefusesBeforeSpawning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		tools := newTools(p, 1)
		first := call(t.Context(), tools, "run_subagent", `{"prompt":"a","run_in_background":true}`)
		if out := (<-first).out.GetOutput(); !strings.Contains(out, "working in the background") {
			t.Fatalf("first = %q", out)
		}
		second := <-call(t.Context(), tools, "run_subagent", `{"prompt":"b"}`)
		if second.out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(second.out.GetOutput(), "running already") {
			t.Fatalf("second = %v", second.out)
		}
		p.mu.Lock()
		spawned := len(p.spawned)
		p.mu.Unlock()
		if spawned != 1 {
			t.Fatalf("%d children spawned, want the refused one not created", spawned)
		}
		// Once the first finishes, its slot is free.
		p.run("session-child-1").answer("done")
		synctest.Wait()
		third := call(t.Context(), tools, "run_subagent", `{"prompt":"c","run_in_background":true}`)
		if out := (<-third).out.GetOutput(); !strings.Contains(out, "working in the background") {
			t.Fatalf("third = %q", out)
		}
		p.run("session-child-2").answer("done")
		synctest.Wait()
	})
}

// Nine run_subagent calls at once against a limit of eight: the slot is
// taken before the child session is created, so the ninth is refused
// without a child session and without a subagent pointer, however the
// calls interleave. Spawn holds every call that reaches it until all nine
// have either reached it or been refused.
func TestConcurrentSpawnsPastTheLimitLeaveNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		p.gate = make(chan struct{})
		tools := newTools(p, 8)
		results := make([]<-chan callResult, 9)
		for i := range results {
			results[i] = call(t.Context(), tools, "run_subagent", fmt.Sprintf(`{"prompt":"part %d","run_in_background":true}`, i))
		}
		synctest.Wait()
		p.mu.Lock()
		held := len(p.spawned)
		p.mu.Unlock()
		close(p.gate)
		var refused, pointers int
		for _, ch := range results {
			got := <-ch
			for _, m := range got.forwarded {
				if m.GetSubagent() != nil {
					pointers++
				}
			}
			if got.out.GetStopReason() == penguinv1.StopReason_STOP_REASON_FAILED {
				refused++
				if !strings.Contains(got.out.GetOutput(), "8 subagents are running already") || len(got.forwarded) != 0 {
					t.Errorf("refusal = %q, forwarded %v", got.out.GetOutput(), got.forwarded)
				}
			}
		}
		p.mu.Lock()
		spawned := slices.Clone(p.spawned)
		p.mu.Unlock()
		for _, id := range spawned {
			if r := p.run(id); r != nil {
				r.answer("done")
			}
		}
		synctest.Wait()
		if held != 8 || len(spawned) != 8 || refused != 1 || pointers != 8 {
			t.Fatalf("%d children reached Spawn together, %d created, %d refused, %d pointers; want 8, 8, 1, 8", held, len(spawned), refused, pointers)
		}
	})
}

func TestKillStopsWithoutAReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		tools := newTools(p, 0)
		<-call(t.Context(), tools, "run_subagent", `{"prompt":"a","run_in_background":true}`)
		p.run("session-child-1").events <- message(omni.AssistantText("partial work"))
		synctest.Wait()
		got := <-call(t.Context(), tools, "kill_subagent", `{"subagent_id":"session-child-1"}`)
		if !strings.Contains(got.out.GetOutput(), "was stopped") {
			t.Fatalf("kill = %q", got.out.GetOutput())
		}
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.aborted) != 1 || len(p.notices) != 0 {
			t.Fatalf("aborted %v, %d reports; want the child aborted and no report", p.aborted, len(p.notices))
		}
	})
}

func TestInputPollsThenFollowsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		tools := newTools(p, 0)
		<-call(t.Context(), tools, "run_subagent", `{"prompt":"a","run_in_background":true}`)
		r := p.run("session-child-1")
		r.events <- message(omni.AssistantText("step one"))
		synctest.Wait()
		if got := <-call(t.Context(), tools, "input_subagent", `{"subagent_id":"session-child-1","prompt":"more"}`); got.out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED {
			t.Fatalf("a follow-up to a running subagent = %v", got.out)
		}
		got := <-call(t.Context(), tools, "input_subagent", `{"subagent_id":"session-child-1"}`)
		if !strings.Contains(got.out.GetOutput(), "still working") || !strings.Contains(got.out.GetOutput(), "step one") {
			t.Fatalf("poll = %q", got.out.GetOutput())
		}
		// A poll waiting when the child ends gets the result; no report follows.
		poll := call(t.Context(), tools, "input_subagent", `{"subagent_id":"session-child-1","yield_time_ms":60000}`)
		synctest.Wait()
		r.answer("finished")
		if got := <-poll; got.out.GetOutput() != "finished" {
			t.Fatalf("poll at the end = %q", got.out.GetOutput())
		}
		// Idle now: a follow-up starts a new task that is followed from the
		// child's log's end.
		p.mu.Lock()
		p.children["session-child-1"] = 40
		p.mu.Unlock()
		follow := call(t.Context(), tools, "input_subagent", `{"subagent_id":"session-child-1","prompt":"and the tests?"}`)
		synctest.Wait()
		r2 := p.run("session-child-1")
		r2.answer("they pass")
		if got := <-follow; got.out.GetOutput() != "they pass" {
			t.Fatalf("follow-up = %q", got.out.GetOutput())
		}
		if r2.after != 40 {
			t.Fatalf("follow-up followed after %d, want 40", r2.after)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.notices) != 0 || p.starts[1] != "and the tests?" {
			t.Fatalf("notices %d, starts %v", len(p.notices), p.starts)
		}
	})
}

func TestAnInterruptedCallAbortsItsChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		ctx, cancel := context.WithCancel(t.Context())
		res := call(ctx, newTools(p, 0), "run_subagent", `{"prompt":"a"}`)
		synctest.Wait()
		cancel()
		got := <-res
		if got.out.GetStopReason() != penguinv1.StopReason_STOP_REASON_ABORTED {
			t.Fatalf("output = %v", got.out)
		}
		synctest.Wait()
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.aborted) != 1 {
			t.Fatalf("aborted %v", p.aborted)
		}
	})
}

func TestBadCallsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newParent()
		tools := newTools(p, 0)
		for _, c := range []struct{ name, args, want string }{
			{"run_subagent", `not json`, "not valid JSON"},
			{"run_subagent", `{"prompt":" "}`, "the prompt is required"},
			{"run_subagent", `{"prompt":"x","model_id":"m"}`, "go together"},
			{"run_subagent", `{"prompt":"x","agent_id":"other"}`, `unknown agent "other"`},
			{"run_subagent", `{"prompt":"x","thinking_level":"ultra"}`, "unknown thinking level"},
			{"run_subagent", `{"prompt":"x","provider":"p","model_id":"refused"}`, "could not create the subagent's session: no such model"},
			{"input_subagent", `{}`, "subagent_id is missing"},
			{"input_subagent", `{"subagent_id":"session-stranger"}`, "no subagent"},
			{"kill_subagent", `{"subagent_id":"session-stranger"}`, "no subagent"},
		} {
			got := <-call(t.Context(), tools, c.name, c.args)
			if got.out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(got.out.GetOutput(), c.want) {
				t.Errorf("%s %s = %v, want a failure saying %q", c.name, c.args, got.out, c.want)
			}
		}
		if tools.Tool("read_file") != nil {
			t.Error("a tool that is not a subagent tool was offered")
		}
	})
}
