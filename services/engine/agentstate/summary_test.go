package agentstate

import (
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

func TestExtractSummary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		reply string
		want  string
		ok    bool
	}{
		{"tagged", "Sure.\n[summary]\nThe user wants X.\nDone: Y.\n[/summary]\n", "The user wants X.\nDone: Y.", true},
		{"first non-empty pair wins", "[summary]first[/summary] and [summary]second[/summary]", "first", true},
		{"empty pair skipped", "[summary]  \n [/summary]\n[summary]real one[/summary]", "real one", true},
		{"angle brackets", "<summary>old style</summary>", "old style", true},
		{"mixed styles", "[summary]mixed</summary>", "mixed", true},
		{"upper case", "[SUMMARY]loud[/SUMMARY]", "loud", true},
		{"body after closing tag", "[summary][/summary]\nThe summary written after the tags.", "The summary written after the tags.", true},
		{"all pairs empty", "Intro. [summary][/summary] <summary> </summary> tail", "Intro.    tail", true},
		{"unclosed tag", "[summary]\nA reply cut off before its closing tag", "A reply cut off before its closing tag", true},
		{"stray closing tag", "The text.\n[/summary]", "The text.", true},
		{"no tags", "  Just a plain summary.\n", "Just a plain summary.", true},
		{"empty", "", "", false},
		{"blank", " \n\t ", "", false},
		{"only tags", "[summary]\n[/summary]", "", false},
		{"multiline body kept", "[summary]a\n\n  b\n[/summary]", "a\n\n  b", true},
		{"not a summary tag", "[summaries]x[/summaries]", "[summaries]x[/summaries]", true},
	}
	for _, tc := range cases {
		got, ok := ExtractSummary(tc.reply)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ExtractSummary(%q) = %q, %v; want %q, %v", tc.name, tc.reply, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWrapContextSummary(t *testing.T) {
	t.Parallel()
	got := WrapContextSummary("  S  ")
	if !strings.HasPrefix(got, ContextSummaryOpen+"\n") || !strings.HasSuffix(got, "\nS\n"+ContextSummaryClose) {
		t.Errorf("WrapContextSummary = %q", got)
	}
}

func TestDefaultCompactionPromptAsksForASummaryBlock(t *testing.T) {
	t.Parallel()
	p := agentconfig.Default().Compaction.Prompt
	if !strings.Contains(p, SummaryOpen) || !strings.Contains(p, SummaryClose) {
		t.Errorf("the compaction prompt does not ask for a %s block", SummaryOpen)
	}
}
