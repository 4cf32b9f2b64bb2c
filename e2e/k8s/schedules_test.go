package k8s

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// The work that runs with no one at the keyboard, through a rollout of the
// engine Deployment: a schedule due every few seconds and a goal, both
// started before the rollout and both carried across it by the replicas
// that come and go. The scripted model (overlay/script.yaml) answers the
// schedule's prompt (SCHED-K8S) every time, and plays the goal's rounds:
// round one runs a long command that the rollout cuts (its cut output is
// answered as the rollout scenarios' is), round two claims the goal
// complete.
const (
	schedName   = "k8s-tick"
	schedPrompt = "SCHED-K8S: say tick"
	schedPeriod = 4 * time.Second
	goalPrompt  = "GOAL-K8S: get through the rollout"
	// goalSpend is what each of the goal's own scripted requests costs
	// (usage input 100 + output 10 in the script): three of them; the cut
	// command's output is answered by the rollout scenarios' turn
	// (MOVED-FINISHED), which reports no usage.
	goalSpend = 110
)

// TestScheduleAndGoalThroughARollout: while the engine pods are replaced
// one by one (rollout restart), every due time of the schedule from the
// first to the last has exactly one run, started, whose new session holds
// the prompt once (no due run lost or run twice); the goal goes on on the
// replica that takes it over, its cut command is never run again, each
// round runs once and the tokens of its requests are counted once.
func TestScheduleAndGoalThroughARollout(t *testing.T) {
	c := setup(t)
	ctx := testkit.Context(t, 12*time.Minute)
	c.waitReady(t, engineDeploy, 2)
	ip := c.kubectl(t, "get", "service", engineDeploy, "-o", "jsonpath={.spec.clusterIP}")
	conn, err := grpcclient.New(ip+":7420", grpcclient.Options{Token: c.token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	api := penguinv1.NewScheduleServiceClient(conn)

	start := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	def := func(enabled bool) *penguinv1.Schedule {
		return &penguinv1.Schedule{Prompt: schedPrompt, Enabled: enabled, StartAt: timestamppb.New(start), Period: schedPeriod.String(),
			Workspace: "sched-k8s", Model: &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"}, Overlap: "queue"}
	}
	if _, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: schedName, Schedule: def(true)}); err != nil {
		t.Fatalf("CreateSchedule: %v", err)
	}

	goalID := c.newSession(ctx, t, "goal-k8s")
	s, err := c.engine.Run(ctx, &penguinv1.RunRequest{SessionId: goalID, Prompt: goalPrompt, Goal: &penguinv1.GoalOptions{Budget: 100_000}})
	if err != nil {
		t.Fatalf("Run (goal): %v", err)
	}
	r := follow[*penguinv1.RunResponse](s)
	r.waitOutput(t, "GK-STARTED", 2*time.Minute)
	// A few due times before the rollout, on the replicas as they were:
	// counted from the first due time, not from now (seen: a rollout one
	// period after the first due time, when the goal started quickly).
	time.Sleep(time.Until(start.Add(2*schedPeriod + schedPeriod/4)))

	rolled := time.Now()
	c.rolloutRestart(t, engineDeploy)
	rolledOut := time.Now()
	t.Logf("rollout done in %v", rolledOut.Sub(rolled).Round(time.Second))

	t.Run("the goal goes on on the next owner, each round once, its tokens counted once", func(t *testing.T) {
		res := c.followToEnd(ctx, t, goalID, r.wait(t, 4*time.Minute))
		res.requireCompleted(t)
		hist := e2etest.History(ctx, t, c.engine, goalID)
		requireOnce(t, hist)
		var msgs []*penguinv1.OmniMessage
		var fin *penguinv1.GoalFinished
		cut, execID := 0, ""
		for _, ev := range hist {
			m := ev.GetMessage()
			if m == nil {
				continue
			}
			msgs = append(msgs, m)
			if f := m.GetGoalFinished(); f != nil {
				fin = f
			}
			if c := m.GetToolCall(); c != nil && strings.Contains(c.GetArguments(), "GK-STARTED") {
				execID = c.GetToolCallId()
			}
			if o := m.GetToolCallOutput(); o != nil && o.GetToolCallId() == execID && execID != "" {
				cut++
				if !strings.Contains(o.GetOutput(), "may or may not have happened") {
					t.Errorf("round one's command was not cut by the rollout: %q", o.GetOutput())
				}
			}
		}
		if fin == nil {
			t.Fatalf("no goal_finished in the log:\n%s", res.text())
		}
		if cut != 1 {
			t.Fatalf("round one's command has %d outputs, want one (it ran once)", cut)
		}
		e2etest.CheckGoalLog(ctx, t, c.engine, msgs, fin)
		if fin.GetOutcome() != penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE || fin.GetRounds() != 2 || fin.GetTokens() != 3*goalSpend {
			t.Fatalf("the goal ended %v after %d rounds, %d tokens (%s); want complete after 2 rounds, %d tokens",
				fin.GetOutcome(), fin.GetRounds(), fin.GetTokens(), fin.GetMessage(), 3*goalSpend)
		}
		t.Logf("goal complete after the rollout: %d rounds, %d tokens", fin.GetRounds(), fin.GetTokens())
	})

	t.Run("every due time of the schedule ran exactly once", func(t *testing.T) {
		// Three more periods on the new replicas, then the cadence stops.
		time.Sleep(3 * schedPeriod)
		stopAt := time.Now()
		if _, err := api.UpdateSchedule(ctx, &penguinv1.UpdateScheduleRequest{Agent: "default", Name: schedName, Schedule: def(false)}); err != nil {
			t.Fatalf("UpdateSchedule (disable): %v", err)
		}
		var runs []*penguinv1.ScheduleRun
		deadline := time.Now().Add(2 * time.Minute)
		for {
			resp, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: schedName, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			runs = resp.GetRuns()
			pending := 0
			for _, run := range runs {
				if run.GetState() == "pending" {
					pending++
				}
			}
			if pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs still pending", pending)
			}
			time.Sleep(time.Second) // the poll interval
		}
		due := map[time.Time]int{}
		started, dups, missing := 0, 0, 0
		for _, run := range runs {
			at := run.GetDueAt().AsTime()
			if due[at]++; due[at] > 1 {
				dups++
				t.Errorf("due time %v ran twice", at)
			}
			if run.GetState() != "started" {
				t.Errorf("run due %v is %s (%s), want started", at, run.GetState(), run.GetReason())
				continue
			}
			started++
			sess, err := c.engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: run.GetSessionId()})
			if err != nil {
				t.Fatalf("the session of the run due %v: %v", at, err)
			}
			if got := sess.GetSession(); got.GetSource() != "schedule" || got.GetTitle() != schedName {
				t.Errorf("session %s: source %q, title %q; want schedule, %s", run.GetSessionId(), got.GetSource(), got.GetTitle(), schedName)
			}
			prompts := 0
			for _, ev := range e2etest.History(ctx, t, c.engine, run.GetSessionId()) {
				if tx := ev.GetMessage().GetText(); tx.GetSender() == penguinv1.Sender_SENDER_SERVER && tx.GetText() == schedPrompt {
					prompts++
				}
			}
			if prompts != 1 {
				t.Errorf("session %s (due %v) holds the prompt %d times, want once", run.GetSessionId(), at, prompts)
			}
		}
		// Every session the schedule made is one of its runs'.
		list, err := c.engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		made := 0
		for _, s := range list.GetSessions() {
			if s.GetTitle() == schedName {
				made++
			}
		}
		if made != started {
			t.Errorf("%d sessions made by the schedule, %d runs started", made, started)
		}
		periods := 0
		for at := start; !at.After(stopAt.Add(-schedPeriod)); at = at.Add(schedPeriod) {
			periods++
			if due[at] == 0 {
				missing++
				t.Errorf("due time %v has no run (lost)", at)
			}
		}
		if !start.Add(schedPeriod).Before(rolled) || !stopAt.Add(-2*schedPeriod).After(rolledOut) {
			t.Fatalf("the cadence (%v to %v) did not span the rollout (%v to %v) by two due times each side", start, stopAt, rolled, rolledOut)
		}
		t.Logf("through a rollout of the engine: %d due times, %d runs recorded, %d started, %d duplicates, %d missing",
			periods, len(runs), started, dups, missing)
	})
}
