package goal

import (
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Round is what one round's [goal] block is made of.
type Round struct {
	// Number is the 1-based round.
	Number int
	// Objective is the canonical objective, from goal_started.
	Objective string
	// File is the agent-file path the model edits the control file by.
	File string
	// Used and Budget are the tokens spent before the round and the
	// budget (zero: unlimited).
	Used, Budget int64
	// WrapUp marks the one round after the budget ran out.
	WrapUp bool
}

// Block is the protocol block that opens the round's prompt. It embeds
// the control file as the system wrote it (composed from the same
// objective, so a tampered file cannot change what the model is asked to
// do), the budget on a line of its own, and the working rules.
func (r Round) Block() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[goal]\nYou are working toward a goal over rounds of tasks in this session; this is round %d.\n", r.Number)
	fmt.Fprintf(&b, "The goal's control file is %s (read it with read_agent_file, change it with write_agent_file):\n", r.File)
	b.WriteString("```yaml\n" + FileContent(r.Objective) + "```\n")
	if r.Budget > 0 {
		fmt.Fprintf(&b, "Budget: %d of %d tokens used, %d left.\n", r.Used, r.Budget, max(r.Budget-r.Used, 0))
	} else {
		fmt.Fprintf(&b, "Budget: unlimited (%d tokens used so far).\n", r.Used)
	}
	if r.WrapUp {
		b.WriteString("The budget is spent: this is the last round. Do not start new work. Summarize what was done, list what remains, " +
			"and leave a clear next step in your reply and in PLAN.md. Do not set status: complete because the budget ran out.\n")
		b.WriteString("[/goal]")
		return b.String()
	}
	b.WriteString("Rules:\n" +
		"- Work toward the whole objective. Never shrink it to an easier subset.\n" +
		"- Before you claim it is met, verify with evidence (run the tests, read the output, check the result).\n" +
		"- Keep the key progress in scratchpad/PLAN.md (write_agent_file), so it survives context compaction.\n" +
		"- When the objective is met and verified, set status: complete in the control file.\n" +
		"- Set status: blocked only when the same blocking condition has stopped you three rounds running; then say in your reply what you need.\n" +
		"- Otherwise leave status: active. When this round ends, the next one starts.\n")
	b.WriteString("[/goal]")
	return b.String()
}

// Prompt is the round's user message: the block, then the body (the
// person's message in round one, a call to go on after that).
func (r Round) Prompt(body string) string {
	if strings.TrimSpace(body) == "" {
		body = "Continue working toward the objective."
		if r.WrapUp {
			body = "Wrap up: the budget is spent."
		}
	}
	return r.Block() + "\n\n" + body
}

// IsRoundPrompt reports whether a user text opens a goal round.
func IsRoundPrompt(text string) bool { return strings.HasPrefix(text, "[goal]\n") }

// State is a goal as the session log records it.
type State struct {
	// Active is true from goal_started to goal_finished.
	Active bool
	// Objective, Budget and File come from goal_started.
	Objective string
	Budget    int64
	File      string
	// Rounds is the last round started (goal_round).
	Rounds int
	// WrapUp marks that the last round started was the wrap-up.
	WrapUp bool
	// Used is the tokens spent since goal_started, from the session's own
	// token_usage events; the caller adds its subagents' (Children).
	Used int64
	// Children are the subagent sessions the goal's rounds started, whose
	// own logs hold their usage.
	Children []string
	// PromptDue is set when the last round's goal_round is recorded but
	// its prompt is not: the round started, and its prompt is recorded
	// next, never a new round.
	PromptDue bool
}

// Observe folds one logged message into the state; messages forwarded
// from subagents (with an origin) are never in the log and are ignored.
func (s *State) Observe(m *penguinv1.OmniMessage) {
	if len(m.GetOrigin()) > 0 {
		return
	}
	switch {
	case m.GetGoalStarted() != nil:
		g := m.GetGoalStarted()
		*s = State{Active: true, Objective: g.GetObjective(), Budget: g.GetBudget(), File: g.GetGoalFile()}
	case !s.Active:
	case m.GetGoalRound() != nil:
		s.Rounds, s.WrapUp, s.PromptDue = int(m.GetGoalRound().GetRound()), m.GetGoalRound().GetWrapUp(), true
	case m.GetText() != nil && m.GetText().GetRole() == penguinv1.Role_ROLE_USER && IsRoundPrompt(m.GetText().GetText()):
		s.PromptDue = false
	case m.GetTokenUsage() != nil:
		s.Used += Spend(m.GetTokenUsage().GetRequest())
	case m.GetSubagent() != nil:
		s.Children = append(s.Children, m.GetSubagent().GetSessionId())
	case m.GetGoalFinished() != nil:
		s.Active = false
	}
}

// Outcome is what the loop does after a round.
type Outcome struct {
	// Next is set when another round runs; WrapUp when that round is the
	// wrap-up.
	Next, WrapUp bool
	// End is the outcome when the goal ends; Message says why.
	End     penguinv1.GoalOutcome
	Message string
}

// RoundEnd says how a round's task ended.
type RoundEnd struct {
	// Status is the task's stop reason.
	Status penguinv1.StopReason
	// Cut is set when the task stopped at its turn cap (max_turns) with
	// work pending, or with a note of an interrupted request.
	Cut bool
	// Message is the task's own message, when it did not just complete.
	Message string
}

// Decide takes the decision after a round: the round's end first (an
// abort, a failure or the turn cap end the goal), then the wrap-up, then
// the model's claim in the control file, then the round limit and the
// budget.
func (s State) Decide(end RoundEnd, status Status) Outcome {
	switch {
	case end.Status != penguinv1.StopReason_STOP_REASON_COMPLETED:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED, Message: "round " + fmt.Sprint(s.Rounds) + " did not complete: " + nonEmpty(end.Message, "it stopped")}
	case end.Cut:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED, Message: "round " + fmt.Sprint(s.Rounds) + " was cut off before the model could update the control file: " + nonEmpty(end.Message, "it stopped")}
	case s.WrapUp:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_BUDGET_LIMITED, Message: fmt.Sprintf("the budget of %d tokens is spent (%d used); the wrap-up round ran", s.Budget, s.Used)}
	case status == Complete:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE, Message: "the model claimed the objective complete"}
	case status == Blocked:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_BLOCKED, Message: "the model claimed the goal blocked, or the control file was missing or broken; its last reply says what it needs"}
	case s.Rounds >= MaxRounds:
		return Outcome{End: penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED, Message: fmt.Sprintf("the goal reached the limit of %d rounds without a claim in the control file", MaxRounds)}
	case s.Budget > 0 && s.Used >= s.Budget:
		return Outcome{Next: true, WrapUp: true}
	}
	return Outcome{Next: true}
}

func nonEmpty(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
