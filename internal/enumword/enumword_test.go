package enumword_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

func TestWord(t *testing.T) {
	cases := []struct {
		got, want string
	}{
		{enumword.Word(penguinv1.StopReason_STOP_REASON_COMPLETED), "completed"},
		{enumword.Word(penguinv1.StopReason_STOP_REASON_UNSPECIFIED), "unspecified"},
		{enumword.Word(penguinv1.SessionState_SESSION_STATE_AWAITING_APPROVAL), "awaiting_approval"},
		{enumword.Word(penguinv1.Sender_SENDER_PARENT_AGENT), "parent_agent"},
		{enumword.Word(penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED), "failed"},
		{enumword.Word(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA), "delta"},
		{enumword.Word(penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH), "xhigh"},
		{enumword.Word(penguinv1.Permission_PERMISSION_RW), "rw"},
		{enumword.Word(penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED), "context_window_exceeded"},
		// A number this build does not define still gets a word.
		{enumword.Word(penguinv1.StopReason(42)), "42"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("word %q, want %q", c.got, c.want)
		}
	}
}

func TestLookupReportsUndefinedNumbers(t *testing.T) {
	if w, ok := enumword.Lookup(penguinv1.Decision_DECISION_FORBIDDEN); !ok || w != "forbidden" {
		t.Fatalf("Lookup(forbidden) = %q, %v", w, ok)
	}
	if w, ok := enumword.Lookup(penguinv1.Decision(9)); ok {
		t.Fatalf("Lookup(9) = %q, true; want not defined", w)
	}
}

func TestParseRoundTripsEveryValue(t *testing.T) {
	for n := range penguinv1.StopReason_name {
		v := penguinv1.StopReason(n)
		got, ok := enumword.Parse[penguinv1.StopReason](enumword.Word(v))
		if v == 0 {
			if ok {
				t.Fatalf("the zero value parsed from %q", enumword.Word(v))
			}
			continue
		}
		if !ok || got != v {
			t.Fatalf("Parse(Word(%v)) = %v, %v", v, got, ok)
		}
	}
	for _, bad := range []string{"", "unspecified", "COMPLETED", "stop_reason_completed", "42"} {
		if v, ok := enumword.Parse[penguinv1.StopReason](bad); ok {
			t.Errorf("Parse(%q) = %v, want no value", bad, v)
		}
	}
}

func TestWords(t *testing.T) {
	got := enumword.Words[penguinv1.ThinkingLevel]()
	want := []string{"none", "low", "medium", "high", "xhigh", "max"}
	if !slices.Equal(got, want) {
		t.Fatalf("Words = %v, want %v", got, want)
	}
}

// BenchmarkWord measures Word against the hand-written conversion it
// replaced (lower-casing the generated String() without its prefix), which
// runs first in the same benchmark as the baseline; "ratio" is Word's time
// over the baseline's.
func BenchmarkWord(b *testing.B) {
	const rounds = 100000
	v := penguinv1.StopReason_STOP_REASON_ABORTED
	var sink string
	timeIt := func(f func()) time.Duration {
		start := time.Now()
		for range rounds {
			f()
		}
		return time.Since(start)
	}
	var base, word time.Duration
	for b.Loop() {
		base += timeIt(func() { sink = strings.ToLower(strings.TrimPrefix(v.String(), "STOP_REASON_")) })
		word += timeIt(func() { sink = enumword.Word(v) })
	}
	_ = sink
	b.ReportMetric(float64(word)/float64(base), "ratio")
	b.ReportMetric(float64(word.Nanoseconds())/float64(b.N*rounds), "word-ns/op")
}
