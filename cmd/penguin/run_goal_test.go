package main

import (
	"errors"
	"slices"
	"testing"
)

// TestParseGoalFlag: --goal with and without a budget, the budget as the
// next word only when it reads as one and the message is elsewhere, and a
// budget that is not a number refused as a usage error.
func TestParseGoalFlag(t *testing.T) {
	for _, c := range []struct {
		set     bool
		value   string
		message bool
		args    []string
		budget  int64
		left    []string
		goal    bool
	}{
		{set: false, args: []string{"fix", "it"}, left: []string{"fix", "it"}},
		{set: true, value: goalUnlimited, args: []string{"fix", "it"}, left: []string{"fix", "it"}, goal: true},
		{set: true, value: goalUnlimited, message: true, args: []string{"500k"}, budget: 500_000, goal: true},
		{set: true, value: goalUnlimited, args: []string{"2m", "make", "tests", "pass"}, budget: 2_000_000, left: []string{"make", "tests", "pass"}, goal: true},
		{set: true, value: goalUnlimited, args: []string{"100"}, left: []string{"100"}, goal: true},
		{set: true, value: "1500", args: []string{"go"}, budget: 1500, left: []string{"go"}, goal: true},
		{set: true, value: "-1", args: []string{"go"}, left: []string{"go"}, goal: true},
	} {
		g, left, err := parseGoalFlag(c.set, c.value, c.message, c.args)
		if err != nil || (g != nil) != c.goal || g.GetBudget() != c.budget || !slices.Equal(left, c.left) {
			t.Errorf("parseGoalFlag(%v, %q, %v, %q) = %v, %q, %v", c.set, c.value, c.message, c.args, g, left, err)
		}
	}
	var ue *usageError
	if _, _, err := parseGoalFlag(true, "lots", false, []string{"go"}); !errors.As(err, &ue) {
		t.Errorf("--goal=lots: %v, want a usage error", err)
	}
}
