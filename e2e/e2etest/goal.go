package e2etest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// CheckGoalLog checks what every goal's log must hold, whichever engine
// replicas ran it: one goal_started, one goal_round per round numbered
// 1..rounds each followed by exactly one round prompt (no round ran
// twice), and a goal_finished whose tokens are the log's own spend, its
// subagents' included (the budget was counted once).
func CheckGoalLog(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, hist []*penguinv1.OmniMessage, fin *penguinv1.GoalFinished) {
	t.Helper()
	started, rounds, prompts, tokens := 0, 0, 0, int64(0)
	for _, m := range hist {
		switch {
		case m.GetGoalStarted() != nil:
			started++
		case m.GetGoalRound() != nil:
			rounds++
			if int(m.GetGoalRound().GetRound()) != rounds {
				t.Fatalf("goal_round %d where round %d was due", m.GetGoalRound().GetRound(), rounds)
			}
		case m.GetText().GetRole() == penguinv1.Role_ROLE_USER && strings.HasPrefix(m.GetText().GetText(), "[goal]\n"):
			prompts++
			if !strings.Contains(m.GetText().GetText(), fmt.Sprintf("this is round %d.", rounds)) || prompts != rounds {
				t.Fatalf("round prompt %d follows goal_round %d: %q", prompts, rounds, m.GetText().GetText())
			}
		case m.GetTokenUsage() != nil:
			tokens += spend(m.GetTokenUsage().GetRequest())
		case m.GetSubagent() != nil:
			// A subagent's requests count as the goal's: its log has them.
			for _, ev := range History(ctx, t, engine, m.GetSubagent().GetSessionId()) {
				tokens += spend(ev.GetMessage().GetTokenUsage().GetRequest())
			}
		}
	}
	if started != 1 || rounds != int(fin.GetRounds()) || prompts != rounds {
		t.Fatalf("log has %d goal_started, %d goal_round, %d round prompts; goal_finished says %d rounds", started, rounds, prompts, fin.GetRounds())
	}
	if fin.GetTokens() != tokens {
		t.Fatalf("goal_finished counts %d tokens, the log's token_usage events %d", fin.GetTokens(), tokens)
	}
}

// spend is what a request costs a goal's budget, as the log reports it:
// its tokens less those read from the cache.
func spend(r *penguinv1.TokenCounts) int64 {
	if r == nil {
		return 0
	}
	return r.GetTotal() - r.GetCacheRead()
}
