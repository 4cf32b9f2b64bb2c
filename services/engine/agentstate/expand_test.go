package agentstate

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// expandByRegexp is expand as it was written with regular expressions:
// the placeholders' grammar and the dropped lines that the hand-written
// scan must keep.
func expandByRegexp(tmpl string, lookup func(string) (string, bool)) string {
	placeholder := regexp.MustCompile(`\{\{([A-Z][A-Z0-9_]*)\}\}`)
	whole := regexp.MustCompile(`^[ \t]*\{\{([A-Z][A-Z0-9_]*)\}\}[ \t]*\n?$`)
	var b strings.Builder
	lastBlank, dropped := true, false
	for _, line := range strings.SplitAfter(tmpl, "\n") {
		if line == "" {
			continue
		}
		out := line
		if strings.Contains(line, "{{") {
			if m := whole.FindStringSubmatch(line); m != nil {
				if val, ok := lookup(m[1]); ok && val == "" {
					dropped = true
					continue
				}
			}
			out = placeholder.ReplaceAllStringFunc(line, func(m string) string {
				if val, ok := lookup(m[2 : len(m)-2]); ok {
					return val
				}
				return m
			})
		}
		blank := strings.TrimSpace(out) == ""
		if blank && dropped && lastBlank {
			continue
		}
		dropped = false
		lastBlank = blank
		b.WriteString(out)
	}
	return b.String()
}

// TestExpandMatchesRegexp checks expand against the regular expressions
// it replaced, on templates made of the pieces that placeholders, blank
// lines and near-placeholders are made of.
func TestExpandMatchesRegexp(t *testing.T) {
	vals := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "  ", "NL": "x\n{{A}}\n", "BRACE": "{{"}
	lookup := func(name string) (string, bool) {
		v, ok := vals[name]
		return v, ok
	}
	pieces := []string{"{{A}}", "{{EMPTY}}", "{{B_2}}", "{{NL}}", "{{BRACE}}", "{{UNKNOWN}}", "{{a}}", "{{A", "}}", "{", "{{{A}}}",
		"{{_A}}", "{{A-B}}", " ", "\t", "\n", "\n\n", "\r\n", "text", "é", "\u00a0"}
	cases := []string{"", "\n", "{{EMPTY}}\n\n{{EMPTY}}\n", "a\n\n{{EMPTY}}\n\nb\n", "  {{EMPTY}} \t\nx", "{{EMPTY}}\r\n"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		cases = append(cases, b.String())
	}
	for _, tmpl := range cases {
		if got, want := expand(tmpl, lookup), expandByRegexp(tmpl, lookup); got != want {
			t.Fatalf("expand(%q) = %q, want %q", tmpl, got, want)
		}
	}
}

// TestExpandAllocatesOnce checks that a template with placeholders is
// built into one allocation of its size.
func TestExpandAllocatesOnce(t *testing.T) {
	tmpl := strings.Repeat("A line of the prompt.\n", 200) + "{{AGENTS_MD}}\n\n{{EMPTY}}\n\nend {{NAME}}\n"
	vals := map[string]string{"AGENTS_MD": strings.Repeat("rule\n", 1000), "EMPTY": "", "NAME": "x"}
	lookup := func(name string) (string, bool) {
		v, ok := vals[name]
		return v, ok
	}
	if n := testing.AllocsPerRun(20, func() { expand(tmpl, lookup) }); n > 1 {
		t.Errorf("expand allocated %v times, want 1", n)
	}
}
