package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Goal mode, end to end: a real `penguin serve engine` process, the real
// llm service in front of the provider emulator playing a script, and the
// real environment service. The model edits the goal's control file with
// the agent-file tools, as a real one would.

// spend is what every scripted request costs the budget: uncached input
// plus output (input 100 + cache read 50 + output 10, less the cache read).
var goalUsage = emulator.Usage{Input: 100, CacheRead: 50, Output: 10}

const spend = 110

const objective = "Make every test in the suite pass."

// answer is a turn that answers without a tool call.
func answer(text string) emulator.Turn { return emulator.Turn{Text: text, Usage: goalUsage} }

// agentTool is a turn that calls one agent-file tool.
func agentTool(name string, args map[string]string) emulator.Turn {
	b, _ := json.Marshal(args)
	return emulator.Turn{Text: "Updating the goal file.", ToolCalls: []emulator.ToolCall{{Name: name, Arguments: string(b)}}, Usage: goalUsage}
}

// setStatus is a turn that writes the control file with status (and the
// objective given, which the engine must ignore).
func setStatus(obj, st string) emulator.Turn {
	return agentTool("write_agent_file", map[string]string{"file_path": "scratchpad/GOAL.yaml", "content": fmt.Sprintf("objective: %s\nstatus: %s\n", obj, st)})
}

// goalRun is one goal run on a fresh engine.
type goalRun struct {
	b        *enginetest.Backends
	agentDir string
	id       string
	events   []*penguinv1.RunEvent
	finished *penguinv1.GoalFinished
	runErr   error
}

func runGoal(t *testing.T, turns []emulator.Turn, budget int64, during func(ctx context.Context, client penguinv1.EngineServiceClient, id string, ev *penguinv1.RunEvent)) *goalRun {
	t.Helper()
	return runGoalRequest(t, turns, &penguinv1.RunRequest{Prompt: objective, Goal: &penguinv1.GoalOptions{Budget: budget}}, during)
}

// runGoalRequest is runGoal with the Run request given (its session id
// set here).
func runGoalRequest(t *testing.T, turns []emulator.Turn, req *penguinv1.RunRequest, during func(ctx context.Context, client penguinv1.EngineServiceClient, id string, ev *penguinv1.RunEvent)) *goalRun {
	t.Helper()
	g := &goalRun{b: enginetest.NewBackends(t, turns...), agentDir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(g.b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.agentDir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, 2*time.Minute)
	_, addr := startEngine(t, "127.0.0.1:0", g.b, filepath.Join(t.TempDir(), "engine.db"), g.agentDir)
	client := e2etest.DialEngine(t, addr, "")
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	g.id = created.GetSession().GetSessionId()
	req.SessionId = g.id
	run, err := client.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := run.Recv()
		if err != nil {
			g.runErr = err
			break
		}
		ev := r.GetEvent()
		g.events = append(g.events, ev)
		if during != nil {
			during(ctx, client, g.id, ev)
		}
		if st := ev.GetState(); st != nil && st.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			break
		}
	}
	hist := enginetest.Messages(e2etest.History(ctx, t, client, g.id))
	for _, m := range hist {
		if f := m.GetGoalFinished(); f != nil {
			g.finished = f
		}
	}
	if g.finished == nil {
		t.Fatalf("no goal_finished in the log; kinds %v (run error %v)", enginetest.Kinds(hist), g.runErr)
	}
	e2etest.CheckGoalLog(ctx, t, client, hist, g.finished)
	return g
}

func (g *goalRun) want(t *testing.T, outcome penguinv1.GoalOutcome, rounds int32, tokens int64) {
	t.Helper()
	if g.finished.GetOutcome() != outcome || g.finished.GetRounds() != rounds || g.finished.GetTokens() != tokens {
		t.Fatalf("goal ended %v after %d rounds, %d tokens (%s); want %v after %d rounds, %d tokens",
			g.finished.GetOutcome(), g.finished.GetRounds(), g.finished.GetTokens(), g.finished.GetMessage(), outcome, rounds, tokens)
	}
}

// goalFile reads the session's control file from the agent's scratchpad.
func (g *goalRun) goalFile(t *testing.T) (string, bool) {
	b, err := os.ReadFile(filepath.Join(g.agentDir, "scratchpad", g.id, "GOAL.yaml"))
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// lastUserText is the last user message of a request the emulator got.
func lastUserText(r emulator.Request) string {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] == "user" {
			s, _ := m["content"].(string)
			return s
		}
	}
	return ""
}

func TestGoalCompletesInRoundThree(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		answer("Round one: I looked at the failing tests."),
		answer("Round two: I fixed two of them."),
		setStatus(objective, "complete"),
		answer("All tests pass now; the goal is complete."),
	}, 0, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, 3, 4*spend)
	if g.events[len(g.events)-1].GetState().GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the task ended %v", g.events[len(g.events)-1].GetState())
	}
	reqs := g.b.Emulator.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	// Every round's prompt restates the objective inside its block; the
	// first carries the person's message as its body.
	for i, want := range map[int]string{0: "this is round 1.", 1: "this is round 2.", 2: "this is round 3."} {
		u := lastUserText(reqs[i])
		if !strings.Contains(u, want) || !strings.Contains(u, "objective: "+objective) {
			t.Fatalf("request %d's prompt lacks %q or the objective: %q", i+1, want, u)
		}
	}
	if !strings.HasSuffix(lastUserText(reqs[0]), "\n\n"+objective) {
		t.Fatalf("round one's body is not the person's message: %q", lastUserText(reqs[0]))
	}
}

// TestGoalCountsSubagents: a subagent a round starts spends the goal's
// budget too.
func TestGoalCountsSubagents(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		agentTool("run_subagent", map[string]string{"prompt": "CHILD-TASK: list the failing tests"}),
		{Match: "CHILD-TASK", Text: "Two tests fail.", Usage: goalUsage},
		setStatus(objective, "complete"),
		answer("Done."),
	}, 0, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, 1, 4*spend)
}

func TestGoalBlocked(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		answer("I need credentials for the staging database; retrying next round."),
		answer("Still no credentials (second round)."),
		setStatus(objective, "blocked"),
		answer("Blocked three rounds running: I need the staging database credentials."),
	}, 0, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_BLOCKED, 3, 4*spend)
}

// TestGoalBudgetReachedMidRound: the budget runs out during round two,
// which is not cut short; one wrap-up round follows, then the goal ends as
// budget_limited, however the model set the file.
func TestGoalBudgetReachedMidRound(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		agentTool("read_agent_file", map[string]string{"file_path": "scratchpad/GOAL.yaml"}),
		answer("Round one done."),
		agentTool("read_agent_file", map[string]string{"file_path": "scratchpad"}),
		answer("Round two done."),
		setStatus(objective, "complete"),
		answer("Summary: two of five tests fixed; next: fix the parser."),
	}, 300, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_BUDGET_LIMITED, 3, 6*spend)
	reqs := g.b.Emulator.Requests()
	u := lastUserText(reqs[4])
	if !strings.Contains(u, "this is round 3.") || !strings.Contains(u, "this is the last round") || !strings.Contains(u, "440 of 300 tokens used") {
		t.Fatalf("the wrap-up round's prompt: %q", u)
	}
	// The read in round one showed the model the file as the system wrote it.
	out := ""
	for _, ev := range g.events {
		if o := ev.GetMessage().GetToolCallOutput(); o != nil && out == "" {
			out = o.GetOutput()
		}
	}
	if out != "objective: "+objective+"\nstatus: active\n" {
		t.Fatalf("read_agent_file scratchpad/GOAL.yaml gave %q", out)
	}
}

func TestGoalAborted(t *testing.T) {
	var once sync.Once
	sleep, _ := json.Marshal(map[string]string{"cmd": "sleep 30", "description": "wait"})
	g := runGoal(t, []emulator.Turn{
		answer("Round one done."),
		{Text: "Running the slow suite.", ToolCalls: []emulator.ToolCall{{Name: "exec_command", Arguments: string(sleep)}}, Usage: goalUsage},
		answer("unused"),
	}, 0, func(ctx context.Context, client penguinv1.EngineServiceClient, id string, ev *penguinv1.RunEvent) {
		if ev.GetMessage().GetToolCall() != nil {
			once.Do(func() {
				if _, err := client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id, Reason: "stop the goal"}); err != nil {
					t.Errorf("Abort: %v", err)
				}
			})
		}
	})
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED, 2, 2*spend)
	if st := g.events[len(g.events)-1].GetState().GetStatus(); st != penguinv1.StopReason_STOP_REASON_ABORTED {
		t.Fatalf("the task ended %v", st)
	}
	// The file keeps the model's last write (none): active, the resume point.
	if f, _ := g.goalFile(t); !strings.Contains(f, "status: active") {
		t.Fatalf("GOAL.yaml after an abort: %q", f)
	}
}

// TestGoalTamperedObjective: the model rewrites the objective in the
// file; the next round still states the original, and the goal completes
// on the original's terms.
func TestGoalTamperedObjective(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		setStatus("Make one test pass.", "active"),
		answer("I narrowed the goal."),
		setStatus("Make one test pass.", "complete"),
		answer("Done."),
	}, 0, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, 2, 4*spend)
	reqs := g.b.Emulator.Requests()
	u := lastUserText(reqs[2])
	if !strings.Contains(u, "this is round 2.") || !strings.Contains(u, "objective: "+objective) || strings.Contains(u, "Make one test pass.") {
		t.Fatalf("round two's prompt does not restate the original objective: %q", u)
	}
	var started *penguinv1.GoalStarted
	for _, ev := range g.events {
		if s := ev.GetMessage().GetGoalStarted(); s != nil {
			started = s
		}
	}
	if started.GetObjective() != objective {
		t.Fatalf("goal_started objective %q", started.GetObjective())
	}
}

func TestGoalFileDeletedReadsAsBlocked(t *testing.T) {
	g := runGoal(t, []emulator.Turn{
		agentTool("delete_agent_file", map[string]string{"file_path": "scratchpad/GOAL.yaml"}),
		answer("I removed the goal file."),
	}, 0, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_BLOCKED, 1, 2*spend)
	if _, ok := g.goalFile(t); ok {
		t.Fatal("GOAL.yaml is still there")
	}
}

// TestGoalImageInObjective: an image sent with an objective is saved to
// the session's scratchpad and named by its path in the objective, so
// every round's block states it as text (round two's as much as round
// one's), and no request carries it as an image.
func TestGoalImageInObjective(t *testing.T) {
	png := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	g := runGoalRequest(t, []emulator.Turn{
		answer("Round one: the page differs from the mockup."),
		setStatus(objective, "complete"),
		answer("The page matches the mockup."),
	}, &penguinv1.RunRequest{Prompt: objective, Images: []string{png}, Goal: &penguinv1.GoalOptions{}}, nil)
	g.want(t, penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, 2, 3*spend)
	saved, err := os.ReadFile(filepath.Join(g.agentDir, "scratchpad", g.id, "goal-image-1.png"))
	if err != nil || !strings.HasPrefix(string(saved), "\x89PNG") {
		t.Fatalf("the image in the scratchpad: %v (%d bytes)", err, len(saved))
	}
	ref := "[attached image: scratchpad/goal-image-1.png]"
	reqs := g.b.Emulator.Requests()
	for i, want := range map[int]string{0: "this is round 1.", 1: "this is round 2."} {
		u := lastUserText(reqs[i])
		if !strings.Contains(u, want) || !strings.Contains(u, ref) {
			t.Fatalf("request %d's prompt lacks %q or %q: %q", i+1, want, ref, u)
		}
	}
	for i, r := range reqs {
		if b, _ := json.Marshal(r.Body); strings.Contains(string(b), "iVBORw0KGgo") {
			t.Fatalf("request %d carries the image itself", i+1)
		}
	}
}

// TestGoalBadInput: an objective that is only an image, or only blanks,
// is refused before anything is recorded.
func TestGoalBadInput(t *testing.T) {
	b := enginetest.NewBackends(t)
	agentDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, time.Minute)
	_, addr := startEngine(t, "127.0.0.1:0", b, filepath.Join(t.TempDir(), "engine.db"), agentDir)
	client := e2etest.DialEngine(t, addr, "")
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	png := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	for _, req := range []*penguinv1.RunRequest{
		{SessionId: id, Images: []string{png}, Goal: &penguinv1.GoalOptions{}},
		{SessionId: id, Prompt: "  \n ", Goal: &penguinv1.GoalOptions{Budget: 1000}},
		{SessionId: id, Prompt: "fix it", Images: []string{"file:///etc/passwd"}, Goal: &penguinv1.GoalOptions{}},
	} {
		run, err := client.Run(ctx, req)
		if err == nil {
			_, err = run.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("Run(%q, %d images) = %v, want InvalidArgument", req.GetPrompt(), len(req.GetImages()), err)
		}
	}
	hist := enginetest.Messages(e2etest.History(ctx, t, client, id))
	if len(hist) != 1 || hist[0].GetSessionMeta() == nil {
		t.Fatalf("refused goals left %v in the log", enginetest.Kinds(hist))
	}
	if _, err := os.Stat(filepath.Join(agentDir, "scratchpad", id)); !os.IsNotExist(err) {
		t.Fatalf("refused goals left a scratchpad: %v", err)
	}
	if len(b.Emulator.Requests()) != 0 {
		t.Fatal("a refused goal reached the model")
	}
}

// goalModel answers by round, from what it is sent, so that it answers
// sensibly however often its engine is killed: rounds one and two just
// report; round three writes status complete and then answers. It streams
// slowly enough for a kill to land mid-stream, and counts the requests it
// answered in full.
type goalModel struct {
	mu       sync.Mutex
	answered map[int]int // round -> requests answered in full
}

func (m *goalModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	round, afterWrite := 0, false
	for _, msg := range body.Messages {
		s, _ := msg.Content.(string)
		if msg.Role == "user" {
			for k := 1; k <= 9; k++ {
				if strings.Contains(s, fmt.Sprintf("this is round %d.", k)) {
					round, afterWrite = k, false
				}
			}
		}
		if msg.Role == "tool" && strings.Contains(s, "Wrote scratchpad/GOAL.yaml") {
			afterWrite = true
		}
	}
	text, id, args := fmt.Sprintf("Round %d: progress made, more to do.", round), "", ""
	if round >= 3 && !afterWrite {
		text = "Everything passes; marking the goal complete."
		id = fmt.Sprintf("call_goal_%d", round)
		b, _ := json.Marshal(map[string]string{"file_path": "scratchpad/GOAL.yaml", "content": "objective: x\nstatus: complete\n"})
		args = string(b)
	} else if afterWrite {
		text = "The goal is complete."
	}
	streamGoalChat(w, text, id, args)
	m.mu.Lock()
	m.answered[round]++
	m.mu.Unlock()
}

// streamGoalChat is streamChat with a tool call of write_agent_file.
func streamGoalChat(w http.ResponseWriter, text, id, args string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-goal", "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i := 0; i < len(text); i += 4 {
		time.Sleep(25 * time.Millisecond)
		send(chunk(map[string]any{"content": text[i:min(i+4, len(text))]}, nil))
	}
	finish := "stop"
	if id != "" {
		send(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": "write_agent_file", "arguments": args}}}}, nil))
		finish = "tool_calls"
	}
	send(chunk(map[string]any{}, finish))
	send(map[string]any{"id": "chatcmpl-goal", "object": "chat.completion.chunk", "model": "m", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 150, "completion_tokens": 10, "total_tokens": 160, "prompt_tokens_details": map[string]any{"cached_tokens": 50}}})
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

// TestGoalSurvivesKills SIGKILLs the engine running a goal twice, once
// between rounds (right after round one's answer ended) and once in the
// middle of round two's answer, restarting it on the same store and
// address each time. No client re-sends anything. The goal completes in
// round three on the restarted engine, each round ran once (one
// goal_round and one prompt each), and the tokens counted are the log's:
// the request cut by the kill, which reported no usage, costs nothing.
func TestGoalSurvivesKills(t *testing.T) {
	model := &goalModel{answered: map[int]int{}}
	b := enginetest.NewBackendsWithModel(t, model)
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := postgresURL(t)
	ctx := testkit.Context(t, 3*time.Minute)
	proc, addr := startEngine(t, "127.0.0.1:0", b, storeURL, agentDir)
	client := e2etest.DialEngine(t, addr, "")
	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	run, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: objective, Goal: &penguinv1.GoalOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{t: t, client: client, id: id, seen: map[int64]*penguinv1.RunEvent{}}
	var stream enginetest.Stream = run
	// Kill one: between rounds, as round one's answer is recorded.
	if !f.follow(ctx, stream, func(ev *penguinv1.RunEvent) bool {
		return ev.GetMessage().GetText().GetText() == "Round 1: progress made, more to do."
	}) {
		t.Fatal("the goal ended before round one's answer")
	}
	proc.Kill()
	proc.Wait(30 * time.Second)
	proc, _ = startEngine(t, addr, b, storeURL, agentDir)
	client = e2etest.DialEngine(t, addr, "")
	f.client = client
	stream = f.attach(ctx)
	// Kill two: in the middle of round two's answer.
	if !f.follow(ctx, stream, func(ev *penguinv1.RunEvent) bool {
		return ev.GetMessage().GetPartialText() != nil && strings.Contains(ev.GetMessage().GetPartialText().GetText(), "2:")
	}) {
		t.Fatal("the goal ended before round two's answer")
	}
	time.Sleep(40 * time.Millisecond)
	proc.Kill()
	proc.Wait(30 * time.Second)
	_, _ = startEngine(t, addr, b, storeURL, agentDir)
	client = e2etest.DialEngine(t, addr, "")
	f.client = client
	stream = f.attach(ctx)
	eventually.Within(t, 90*time.Second, "the goal to finish", func() bool {
		f.follow(ctx, stream, func(*penguinv1.RunEvent) bool { return false })
		return f.idle
	})
	hist := enginetest.Messages(e2etest.History(ctx, t, client, id))
	var fin *penguinv1.GoalFinished
	for _, m := range hist {
		if g := m.GetGoalFinished(); g != nil {
			fin = g
		}
	}
	if fin == nil {
		t.Fatalf("no goal_finished; log kinds %v", enginetest.Kinds(hist))
	}
	e2etest.CheckGoalLog(ctx, t, client, hist, fin)
	model.mu.Lock()
	answered := fmt.Sprint(model.answered)
	full := 0
	for _, n := range model.answered {
		full += n
	}
	model.mu.Unlock()
	if fin.GetOutcome() != penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE || fin.GetRounds() != 3 {
		t.Fatalf("goal ended %v after %d rounds (%s), want complete after 3", fin.GetOutcome(), fin.GetRounds(), fin.GetMessage())
	}
	// Rounds one and two ended once each; round three took two requests.
	// Every request answered in full was counted once (110 tokens each);
	// a request answered in full but cut before its usage was recorded
	// would make the log's count smaller, never larger.
	if fin.GetTokens() > int64(full)*spend || fin.GetTokens() < 4*spend {
		t.Fatalf("goal counted %d tokens; the model answered %d requests in full (%s)", fin.GetTokens(), full, answered)
	}
	if f.dups > 0 {
		t.Fatalf("%d events reached the client twice", f.dups)
	}
	t.Logf("goal completed after 2 kills: %d rounds, %d tokens, requests answered in full by round %s", fin.GetRounds(), fin.GetTokens(), answered)
}

// TestGoalMovesToAnotherReplica: two engine replicas share PostgreSQL and
// the agent's state; the one running a goal is SIGKILLed between rounds
// and never comes back. The other takes the run over once its lease has
// expired and finishes the goal: round two and three run there, once each.
func TestGoalMovesToAnotherReplica(t *testing.T) {
	model := &goalModel{answered: map[int]int{}}
	b := enginetest.NewBackendsWithModel(t, model)
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := postgresURL(t)
	ctx := testkit.Context(t, 3*time.Minute)
	start := func() (*netns.Proc, string) {
		cmd := exec.Command(penguinBin, "serve", "engine", "--listen", "127.0.0.1:0", "--llm", b.LLM, "--environment", b.Environment,
			"--store", storeURL, "--agent-state", agentDir, "--home", t.TempDir(), "--lease-ttl", "2s")
		cmd.Env = append(e2etest.BaseEnv(t), "PENGUIN_AUTH_TOKEN=")
		p := netns.Start(t, "engine", cmd)
		addr := p.WaitLog("gRPC server listening", map[string]string{"server": "engine"}, "addr", time.Minute)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := netns.WaitServing(wctx, addr, ""); err != nil {
			t.Fatal(err)
		}
		return p, addr
	}
	procA, addrA := start()
	_, addrB := start()
	clientA := e2etest.DialEngine(t, addrA, "")
	clientB := e2etest.DialEngine(t, addrB, "")
	created, err := clientA.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()
	run, err := clientA.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: objective, Goal: &penguinv1.GoalOptions{Budget: 10_000}})
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{t: t, client: clientA, id: id, seen: map[int64]*penguinv1.RunEvent{}}
	if !f.follow(ctx, run, func(ev *penguinv1.RunEvent) bool { return ev.GetMessage().GetGoalRound().GetRound() == 2 }) {
		t.Fatal("the goal ended before round two")
	}
	procA.Kill()
	procA.Wait(30 * time.Second)
	f.client = clientB
	eventually.Within(t, 90*time.Second, "the other replica to finish the goal", func() bool {
		f.follow(ctx, f.attach(ctx), func(*penguinv1.RunEvent) bool { return false })
		return f.idle
	})
	hist := enginetest.Messages(e2etest.History(ctx, t, clientB, id))
	var fin *penguinv1.GoalFinished
	for _, m := range hist {
		if g := m.GetGoalFinished(); g != nil {
			fin = g
		}
	}
	if fin == nil || fin.GetOutcome() != penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE || fin.GetRounds() != 3 {
		t.Fatalf("goal_finished %v; log kinds %v", fin, enginetest.Kinds(hist))
	}
	e2etest.CheckGoalLog(ctx, t, clientB, hist, fin)
	t.Logf("goal finished on the second replica: %d rounds, %d tokens of a budget of 10000", fin.GetRounds(), fin.GetTokens())
}

// TestRunGoalExitStatus runs `penguin run --goal` against the engine as a
// script would: its exit status is 0 only when the goal completes (here
// in round one), and 1 when it ends otherwise (blocked: the model deleted
// the goal file), with the outcome said on the terminal.
func TestRunGoalExitStatus(t *testing.T) {
	b := enginetest.NewBackends(t,
		setStatus(objective, "complete"),
		answer("All tests pass; the goal is complete."),
		agentTool("delete_agent_file", map[string]string{"file_path": "scratchpad/GOAL.yaml"}),
		answer("I removed the goal file."),
	)
	ws := filepath.Join(b.Root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	_, addr := startEngine(t, "127.0.0.1:0", b, filepath.Join(t.TempDir(), "engine.db"), agentDir)
	for _, c := range []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"complete", []string{"--goal=5000", "-m", objective}, 0, "complete"},
		{"blocked", []string{"--goal", objective}, 1, "blocked"},
	} {
		cmd := exec.Command(penguinBin, append([]string{"run", "--engine", addr, "--provider", enginetest.Model.GetProvider(), "--model", enginetest.Model.GetModelId(),
			"--workspace", ws, "--approval", "allow-all"}, c.args...)...)
		cmd.Env = append(e2etest.BaseEnv(t), "PENGUIN_AUTH_TOKEN=", "TERM=dumb")
		p := netns.Start(t, "penguin run --goal ("+c.name+")", cmd)
		if code := p.Wait(90 * time.Second); code != c.code || !strings.Contains(strings.ToLower(p.Output()), c.say) {
			t.Fatalf("penguin run --goal (%s) exited %d, want %d with %q said:\n%s", c.name, code, c.code, c.say, p.Output())
		}
	}
	if n := len(b.Emulator.Requests()); n != 4 {
		t.Fatalf("%d model requests, want 4", n)
	}
}
