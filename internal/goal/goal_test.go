package goal

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

func TestParseBudget(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "-1": 0, "1500": 1500, "500k": 500_000, "2m": 2_000_000, "1.5M": 1_500_000, " 20K ": 20_000} {
		got, err := ParseBudget(in)
		if err != nil || got != want {
			t.Errorf("ParseBudget(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"abc", "5x", "-5", "0", "k", "1e400", "NaN", "0.0001"} {
		if _, err := ParseBudget(in); !errors.Is(err, ErrBudget) {
			t.Errorf("ParseBudget(%q) = %v, want ErrBudget", in, err)
		}
	}
	for _, n := range []int64{0, 1500, 500_000, 2_000_000} {
		if s := FormatBudget(n); n > 0 {
			if back, _ := ParseBudget(s); back != n {
				t.Errorf("FormatBudget(%d) = %q reads back as %d", n, s, back)
			}
		}
	}
}

func TestReadStatus(t *testing.T) {
	for _, c := range []struct {
		data string
		err  error
		want Status
	}{
		{FileContent("x: y"), nil, Active},
		{"objective: x\nstatus: complete\n", nil, Complete},
		{"objective: x\nstatus: Blocked\n", nil, Blocked},
		{"objective: x\nstatus: done\n", nil, Blocked},
		{"objective: x\n", nil, Blocked},
		{"status: [complete\n", nil, Blocked},
		{"", fs.ErrNotExist, Blocked},
	} {
		if got := ReadStatus([]byte(c.data), c.err); got != c.want {
			t.Errorf("ReadStatus(%q, %v) = %s, want %s", c.data, c.err, got, c.want)
		}
	}
	// An objective YAML would misread is quoted.
	if !strings.Contains(FileContent("status: complete"), `"status: complete"`) && !strings.Contains(FileContent("status: complete"), `'status: complete'`) {
		t.Fatalf("FileContent does not quote a tricky objective: %q", FileContent("status: complete"))
	}
}

func TestDecide(t *testing.T) {
	done := RoundEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}
	st := State{Active: true, Rounds: 2, Used: 100, Budget: 1000}
	cases := []struct {
		st     State
		end    RoundEnd
		status Status
		want   Outcome
	}{
		{st, done, Active, Outcome{Next: true}},
		{st, done, Complete, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE}},
		{st, done, Blocked, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_BLOCKED}},
		{st, RoundEnd{Status: penguinv1.StopReason_STOP_REASON_ABORTED}, Complete, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED}},
		{st, RoundEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Cut: true}, Active, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED}},
		{State{Active: true, Rounds: 2, Used: 1000, Budget: 1000}, done, Active, Outcome{Next: true, WrapUp: true}},
		{State{Active: true, Rounds: 3, Used: 1200, Budget: 1000, WrapUp: true}, done, Complete, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_BUDGET_LIMITED}},
		{State{Active: true, Rounds: MaxRounds}, done, Active, Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED}},
	}
	for i, c := range cases {
		got := c.st.Decide(c.end, c.status)
		if got.Next != c.want.Next || got.WrapUp != c.want.WrapUp || got.End != c.want.End {
			t.Errorf("case %d: Decide = %+v, want %+v", i, got, c.want)
		}
	}
}

func TestObserve(t *testing.T) {
	var st State
	usage := func(total, cached int64) *penguinv1.OmniMessage {
		return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{Request: &penguinv1.TokenCounts{Total: total, CacheRead: cached}}}}
	}
	r := Round{Number: 1, Objective: "o", File: "scratchpad/GOAL.yaml"}
	for _, m := range []*penguinv1.OmniMessage{
		usage(1000, 0), // before the goal: not counted
		{Payload: &penguinv1.OmniMessage_GoalStarted{GoalStarted: &penguinv1.GoalStarted{Objective: "o", Budget: 500, GoalFile: r.File}}},
		{Payload: &penguinv1.OmniMessage_GoalRound{GoalRound: &penguinv1.GoalRound{Round: 1}}},
	} {
		st.Observe(m)
	}
	if !st.PromptDue || st.Rounds != 1 || st.Budget != 500 {
		t.Fatalf("after goal_round: %+v", st)
	}
	st.Observe(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: r.Prompt("go")}}})
	st.Observe(usage(160, 50))
	st.Observe(&penguinv1.OmniMessage{Origin: []string{"child"}, Payload: usage(999, 0).Payload})
	st.Observe(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Subagent{Subagent: &penguinv1.Subagent{SessionId: "child-1"}}})
	if st.PromptDue || st.Used != 110 || len(st.Children) != 1 || st.Children[0] != "child-1" {
		t.Fatalf("after the round's prompt and usage: %+v", st)
	}
	st.Observe(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_GoalFinished{GoalFinished: &penguinv1.GoalFinished{}}})
	if st.Active {
		t.Fatal("still active after goal_finished")
	}
}
