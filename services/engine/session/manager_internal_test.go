package session

import (
	"strings"
	"testing"
)

func TestTitle(t *testing.T) {
	if got := title("  fix\tthe\n\nbuild  "); got != "fix the build" {
		t.Errorf("title = %q", got)
	}
	long := strings.Repeat("é", 100)
	if got := []rune(title(long)); len(got) != 80 || got[79] != '…' {
		t.Errorf("a long prompt's title has %d runes, ends %q", len(got), string(got[len(got)-1]))
	}
}
