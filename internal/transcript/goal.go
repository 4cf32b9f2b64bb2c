package transcript

import (
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The goal events (goal mode), in the trace format's event_msg family.

type goalStartedJSON struct {
	Type      string `json:"type"`
	Objective string `json:"objective"`
	Budget    int64  `json:"budget,omitempty"`
	GoalFile  string `json:"goal_file,omitempty"`
}

type goalRoundJSON struct {
	Type   string `json:"type"`
	Round  int32  `json:"round"`
	Used   int64  `json:"used"`
	Budget int64  `json:"budget,omitempty"`
	WrapUp bool   `json:"wrap_up,omitempty"`
}

type goalFinishedJSON struct {
	Type    string `json:"type"`
	Outcome string `json:"outcome"`
	Rounds  int32  `json:"rounds"`
	Tokens  int64  `json:"tokens"`
	Message string `json:"message,omitempty"`
}

func goalOutcomes() enumNames[penguinv1.GoalOutcome] {
	return enumNames[penguinv1.GoalOutcome]{what: "goal outcome"}
}

// goalEvent encodes a goal event; ok is false for any other payload.
func (e *encoder) goalEvent(m *penguinv1.OmniMessage) (any, bool) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_GoalStarted:
		x := p.GoalStarted
		return goalStartedJSON{Type: "goal_started", Objective: x.GetObjective(), Budget: x.GetBudget(), GoalFile: x.GetGoalFile()}, true
	case *penguinv1.OmniMessage_GoalRound:
		x := p.GoalRound
		return goalRoundJSON{Type: "goal_round", Round: x.GetRound(), Used: x.GetUsed(), Budget: x.GetBudget(), WrapUp: x.GetWrapUp()}, true
	case *penguinv1.OmniMessage_GoalFinished:
		x := p.GoalFinished
		return goalFinishedJSON{Type: "goal_finished", Outcome: e.check(goalOutcomes().required(x.GetOutcome())), Rounds: x.GetRounds(),
			Tokens: x.GetTokens(), Message: x.GetMessage()}, true
	}
	return nil, false
}

// goalEvent decodes a goal event of payload type typ into m.
func (d *decoder) goalEvent(typ string, m *penguinv1.OmniMessage) error {
	switch typ {
	case "goal_started":
		var x goalStartedJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_GoalStarted{GoalStarted: &penguinv1.GoalStarted{Objective: x.Objective, Budget: x.Budget, GoalFile: x.GoalFile}}
	case "goal_round":
		var x goalRoundJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		m.Payload = &penguinv1.OmniMessage_GoalRound{GoalRound: &penguinv1.GoalRound{Round: x.Round, Used: x.Used, Budget: x.Budget, WrapUp: x.WrapUp}}
	case "goal_finished":
		var x goalFinishedJSON
		if err := d.unmarshal(&x); err != nil {
			return err
		}
		outcome, err := goalOutcomes().requiredValue(x.Outcome)
		d.check(err)
		m.Payload = &penguinv1.OmniMessage_GoalFinished{GoalFinished: &penguinv1.GoalFinished{Outcome: outcome, Rounds: x.Rounds, Tokens: x.Tokens, Message: x.Message}}
	}
	return nil
}
