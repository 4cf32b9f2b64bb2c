package session

import (
	"strings"
	"testing"
)

func TestConfigRoundTrip(t *testing.T) {
	c := config{MaxTurns: 3, Depth: 1, SeqHigh: 42, ContextSeq: 7, Note: "[turn_aborted]", NoteSeq: 41, SharedEnvironment: true}
	got, err := parseConfig(c.bytes())
	if err != nil || got != c {
		t.Fatalf("parseConfig(bytes) = %+v, %v", got, err)
	}
	if empty, err := parseConfig(nil); err != nil || empty != (config{}) {
		t.Fatalf("parseConfig(nil) = %+v, %v", empty, err)
	}
	if _, err := parseConfig([]byte("{not json")); err == nil || !strings.Contains(err.Error(), "session config") {
		t.Fatalf("a corrupt config = %v", err)
	}
}
