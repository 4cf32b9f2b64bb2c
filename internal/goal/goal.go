// Package goal is goal mode's protocol: the budget a person writes, the
// control file GOAL.yaml, the [goal] block that opens every round, the
// goal's state as the session log records it, and the decision taken after
// each round. It holds no state of its own: an engine replica that takes a
// goal over after a crash or a rollout reads it all back from the log
// (FromLog), so a round never runs twice and the budget is counted once.
package goal

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"gopkg.in/yaml.v3"
)

// FileName is the control file's name in the session's scratchpad.
const FileName = "GOAL.yaml"

// MaxRounds is the hard backstop for a goal whose model never writes the
// control file: without a budget nothing else would end the loop.
const MaxRounds = 100

// Status is the control file's status field.
type Status string

// The statuses of the protocol: the system writes active, the model only
// complete or blocked.
const (
	Active   Status = "active"
	Complete Status = "complete"
	Blocked  Status = "blocked"
)

// ErrBudget marks a budget that is not a number of tokens.
var ErrBudget = errors.New("goal budget")

// ParseBudget reads a token budget as people write it: empty or -1 for
// unlimited (0), a whole number, or a number with k or m ("500k", "2m",
// "1.5m").
func ParseBudget(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "-1" {
		return 0, nil
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mult, s = 1e6, strings.TrimSuffix(s, "m")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f*mult >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: %q is not a token count; write a positive number such as 200000, 500k or 2m, or -1 for no budget", ErrBudget, s)
	}
	n := int64(math.Round(f * mult))
	if n < 1 {
		return 0, fmt.Errorf("%w: %q rounds to no tokens", ErrBudget, s)
	}
	return n, nil
}

// FormatBudget writes a budget back as ParseBudget reads it.
func FormatBudget(n int64) string {
	switch {
	case n <= 0:
		return "unlimited"
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return strconv.FormatInt(n, 10)
}

// fileDoc is the control file's content.
type fileDoc struct {
	Objective string `yaml:"objective"`
	Status    Status `yaml:"status"`
}

// FileContent is the control file as the system writes it, once, when the
// goal starts.
func FileContent(objective string) string {
	b, err := yaml.Marshal(fileDoc{Objective: objective, Status: Active})
	if err != nil {
		// Marshalling two strings cannot fail.
		panic(err)
	}
	return string(b)
}

// ReadStatus reads the status the model left in the control file. Reads
// are tolerant in one direction only: a missing file (err set), YAML that
// does not parse, or a status outside the protocol all read as blocked, so
// a broken control channel stops the loop instead of spinning it.
func ReadStatus(data []byte, err error) Status {
	if err != nil {
		return Blocked
	}
	var doc fileDoc
	if yaml.Unmarshal(data, &doc) != nil {
		return Blocked
	}
	switch s := Status(strings.ToLower(strings.TrimSpace(string(doc.Status)))); s {
	case Active, Complete, Blocked:
		return s
	}
	return Blocked
}

// Spend is what one request costs the budget: uncached input plus output,
// its total less what was read from the provider's cache. An unreported
// request costs nothing, since its counts are unknown.
func Spend(c *penguinv1.TokenCounts) int64 {
	if c == nil || c.GetUnreported() {
		return 0
	}
	return max(c.GetTotal()-c.GetCacheRead(), 0)
}
