package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/goal"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Goal mode. A goal is one task that runs rounds: each round is a run of
// the agent loop whose prompt is the [goal] block and a body, and after
// each the engine reads the control file the model may have changed and
// decides (goal.State.Decide). The task holds the run lease for the whole
// goal, so an engine that dies between rounds or in one leaves a cut-off
// run that the next replica resumes (durable.go). The goal's state is read
// back from the log every time, never kept only in memory: goal_started
// gives the objective and the budget, goal_round the rounds, the
// token_usage events since goal_started the spend. A round's goal_round is
// recorded before its prompt, and a round is started only when the log's
// last round has ended, so no round runs twice.

// GoalSpec makes a Run a goal loop; the prompt's text is the objective.
type GoalSpec struct {
	// Budget is the token budget; zero or less is unlimited.
	Budget int64
}

// goalFile is the agent-file path of the control file.
var goalFile = scratchpad.Path(goal.FileName)

// checkGoal refuses a goal the loop cannot run, before anything is
// stored: an objective must be text (an image states none), and its
// images must be images the scratchpad keeps.
func checkGoal(spec RunSpec) error {
	if strings.TrimSpace(spec.Prompt) == "" {
		return fmt.Errorf("%w: a goal needs an objective in text; an image alone states none", ErrInvalid)
	}
	for i, img := range spec.Images {
		switch {
		case strings.HasPrefix(img, "http://"), strings.HasPrefix(img, "https://"):
		case strings.HasPrefix(img, "data:image/") && strings.Contains(img, ";base64,"):
		default:
			return fmt.Errorf("%w: image %d of the goal is neither a web URL nor a base64 data URL of an image", ErrInvalid, i+1)
		}
	}
	return nil
}

// pad is the session's scratchpad.
func (rt *Runtime) pad(p *prepared) *scratchpad.Pad { return scratchpad.For(p.st.Dir, rt.id) }

// startGoal records a new goal and its first round: the control file is
// written (once, here), the objective's images are saved beside it and
// named in the objective, then goal_started, goal_round 1 and the round's
// prompt (the person's message under the block) are recorded.
func (rt *Runtime) startGoal(t *task, p *prepared, spec RunSpec) error {
	pad := rt.pad(p)
	objective := strings.TrimSpace(spec.Prompt)
	for i, img := range spec.Images {
		ref := img
		if strings.HasPrefix(img, "data:") {
			name, err := pad.SaveImage(fmt.Sprintf("goal-image-%d", i+1), img)
			if err != nil {
				return fmt.Errorf("%w: image %d of the goal: %v", ErrInvalid, i+1, err)
			}
			ref = scratchpad.Path(name)
		}
		objective += "\n[attached image: " + ref + "]"
	}
	if err := pad.WriteFile(goal.FileName, []byte(goal.FileContent(objective))); err != nil {
		return fmt.Errorf("could not write the goal's control file: %w", err)
	}
	// The scratchpad is part of the agent's working copy: saved to the
	// store, a replica that takes the goal over finds it.
	rt.m.saveAgent(t.ctx, p.st.Dir)
	budget := max(spec.Goal.Budget, 0)
	if err := rt.Emit(t.ctx, &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_GoalStarted{GoalStarted: &penguinv1.GoalStarted{
		Objective: objective, Budget: budget, GoalFile: goalFile,
	}}}); err != nil {
		return err
	}
	t.goal = true
	st := goal.State{Active: true, Objective: objective, Budget: budget, File: goalFile}
	round := rt.nextRound(st, false)
	if err := rt.emitRound(t, round); err != nil {
		return err
	}
	return rt.recordPrompt(p, RunSpec{Prompt: round.Prompt(spec.Prompt), Sender: spec.Sender, Skills: spec.Skills}, nil)
}

// nextRound is the round after the state's last.
func (rt *Runtime) nextRound(st goal.State, wrapUp bool) goal.Round {
	return goal.Round{Number: st.Rounds + 1, Objective: st.Objective, File: st.File, Used: st.Used, Budget: st.Budget, WrapUp: wrapUp}
}

func (rt *Runtime) emitRound(t *task, r goal.Round) error {
	return rt.Emit(t.ctx, &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_GoalRound{GoalRound: &penguinv1.GoalRound{
		Round: int32(r.Number), Used: r.Used, Budget: r.Budget, WrapUp: r.WrapUp,
	}}})
}

// goalState reads the session's goal back from its log.
func (rt *Runtime) goalState(ctx context.Context) (goal.State, error) {
	events, err := rt.m.store.ReadEvents(ctx, rt.id, 0, 0)
	if err != nil {
		return goal.State{}, err
	}
	var st goal.State
	for _, e := range events {
		st.Observe(e.Message)
	}
	// The subagents' requests count too: their usage is in their own logs
	// (a subagent starts none of its own).
	for _, child := range st.Children {
		evs, err := rt.m.store.ReadEvents(ctx, child, 0, 0)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since
		}
		if err != nil {
			return goal.State{}, err
		}
		for _, e := range evs {
			if u := e.Message.GetTokenUsage(); u != nil && len(e.Message.GetOrigin()) == 0 {
				st.Used += goal.Spend(u.GetRequest())
			}
		}
	}
	return st, nil
}

// resumeGoal prepares a resumed goal: when the log's last round was
// announced but its prompt never recorded, the prompt is recorded now
// (the round goes on; it is not started again).
func (rt *Runtime) resumeGoal(t *task, p *prepared, st goal.State) error {
	t.goal = true
	if !st.PromptDue {
		return nil
	}
	r := goal.Round{Number: st.Rounds, Objective: st.Objective, File: st.File, Used: st.Used, Budget: st.Budget, WrapUp: st.WrapUp}
	msg := omni.UserText(r.Prompt(""))
	if err := rt.Emit(t.ctx, msg); err != nil {
		return err
	}
	p.input = append(p.input, msg)
	return nil
}

// runGoal runs the rounds after the task's first loop ended with res (or,
// for a goal resumed between rounds, with nothing left of its last round
// to run), and returns how the task ends.
func (rt *Runtime) runGoal(t *task, p *prepared, deps loop.Deps, res loop.Result) loop.Result {
	for {
		if res.Err != nil || rt.sealed.Load() {
			// The log failed (nothing more can be recorded), or the task
			// was handed over: the goal goes on from the log, elsewhere
			// or at the next look.
			return res
		}
		if err := rt.journal.Flush(); err != nil {
			res.Err = err
			return res
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), storeTimeout)
		st, err := rt.goalState(ctx)
		cancel()
		if err != nil {
			res.Err = errors.Join(res.Err, err)
			return res
		}
		if !st.Active {
			return res
		}
		data, rerr := rt.pad(p).ReadFile(goal.FileName)
		end := goal.RoundEnd{Status: res.Status, Cut: len(res.CarryOver) > 0 || res.Note != "", Message: res.Message}
		if t.ctx.Err() != nil && end.Status == penguinv1.StopReason_STOP_REASON_COMPLETED {
			end.Status = penguinv1.StopReason_STOP_REASON_ABORTED
		}
		out := st.Decide(end, goal.ReadStatus(data, rerr))
		if !out.Next {
			if err := rt.Emit(context.WithoutCancel(t.ctx), &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_GoalFinished{GoalFinished: &penguinv1.GoalFinished{
				Outcome: out.End, Rounds: int32(st.Rounds), Tokens: st.Used, Message: out.Message,
			}}}); err != nil {
				res.Err = err
				return res
			}
			res.Message = strings.TrimSpace(fmt.Sprintf("goal %s after %d round(s), %d tokens: %s. %s", enumword.Word(out.End), st.Rounds, st.Used, out.Message, res.Message))
			return res
		}
		round := rt.nextRound(st, out.WrapUp)
		if err := rt.emitRound(t, round); err != nil {
			res.Err = err
			return res
		}
		input := rt.takeLateSteering(t)
		msg := omni.UserText(round.Prompt(""))
		if err := rt.Emit(t.ctx, msg); err != nil {
			res.Err = err
			return res
		}
		if err := rt.journal.Flush(); err != nil {
			res.Err = err
			return res
		}
		res = loop.Run(t.ctx, deps, p.settings, p.mctx, append(input, msg))
	}
}

// takeLateSteering records the steering that came after a round's last
// request, for the next round's first request.
func (rt *Runtime) takeLateSteering(t *task) []*penguinv1.OmniMessage {
	rt.mu.Lock()
	left := t.steering
	t.steering = nil
	rt.mu.Unlock()
	var out []*penguinv1.OmniMessage
	for _, m := range slices.Concat(left...) {
		if err := rt.Emit(t.ctx, m); err != nil {
			rt.m.log.Error("lost steering text: the log could not be written", "session", rt.id, "error", err)
			continue
		}
		out = append(out, m)
	}
	return out
}
