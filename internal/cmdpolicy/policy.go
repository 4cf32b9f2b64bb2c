// Package cmdpolicy is the command policy: deny rules (RE2 regular expressions)
// matched against what reaches a shell, exec_command's cmd and
// input_command's chars. A match answers "forbidden" before anything runs.
//
// It is an accident guardrail, not a security boundary: commands computed at
// run time (variables, eval, substitutions, interpreters) are not covered.
// Matching normalizes the spellings people and models actually type so that
// plain typing does not slip through: a leading path (/bin/rm), wrappers
// (sudo, env, command, nice, xargs, ...), quotes and backslash escapes of
// words, and literal `sh -c '...'` payloads.
//
// The engine evaluates the policy before asking for approval; the
// environment evaluates it again when the call arrives, so a call that skips
// the engine is still refused.
package cmdpolicy

import (
	"encoding/json"
	"fmt"
	"regexp"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// DeniedOutput is the fixed text a forbidden call gets back, distinct from a
// person's refusal so the model reads it as a rule, not a user.
const DeniedOutput = "Tool call denied by policy."

// Rule is one compiled deny rule.
type Rule struct {
	Name        string
	Description string
	re          *regexp.Regexp
}

// Policy is a compiled command policy. The zero value and a nil *Policy
// forbid nothing.
type Policy struct {
	rules []Rule
}

// Compile checks and compiles p. A nil p, a disabled p, and one with no
// rules and no defaults forbid nothing. A rule whose pattern is not valid
// RE2 is an error naming the rule.
func Compile(p *penguinv1.CommandPolicy) (*Policy, error) {
	out := &Policy{}
	if p == nil || p.GetDisabled() {
		return out, nil
	}
	specs := append([]*penguinv1.CommandRule(nil), p.GetRules()...)
	if p.GetUseDefaults() {
		specs = append(specs, FactoryRules()...)
	}
	for i, r := range specs {
		name := r.GetName()
		if name == "" {
			name = fmt.Sprintf("rule %d", i+1)
		}
		re, err := regexp.Compile(r.GetPattern())
		if err != nil {
			return nil, fmt.Errorf("command policy rule %q: invalid pattern: %w", name, err)
		}
		if r.GetPattern() == "" {
			return nil, fmt.Errorf("command policy rule %q: empty pattern", name)
		}
		out.rules = append(out.rules, Rule{Name: name, Description: r.GetDescription(), re: re})
	}
	return out, nil
}

// Rules returns the compiled rules in match order.
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	return p.rules
}

// Evaluate decides one tool call: for exec_command it checks the "cmd"
// argument, for input_command the "chars" argument; every other tool is
// allowed. rule names the first matching rule when forbidden. Arguments
// that are not JSON are allowed here: the tool itself refuses them.
func (p *Policy) Evaluate(toolName, argsJSON string) (forbidden bool, rule string) {
	if p == nil || len(p.rules) == 0 {
		return false, ""
	}
	var field string
	switch toolName {
	case "exec_command":
		field = "cmd"
	case "input_command":
		field = "chars"
	default:
		return false, ""
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		return false, ""
	}
	text, _ := args[field].(string)
	if text == "" {
		return false, ""
	}
	return p.Check(text)
}

// Check matches one command text against the rules, trying every normalized
// spelling of it.
func (p *Policy) Check(command string) (forbidden bool, rule string) {
	if p == nil || len(p.rules) == 0 {
		return false, ""
	}
	for _, cand := range Candidates(command) {
		for _, r := range p.rules {
			if r.re.MatchString(cand) {
				return true, r.Name
			}
		}
	}
	return false, ""
}
