package emulator

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a ResponseWriter that keeps nothing, so that only the
// emulator's own allocations are counted.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// TestStreamAllocationsDoNotGrowWithDeltas checks that a stream costs a
// fixed number of allocations, not some per delta: the llm benchmark runs a
// thousand concurrent paced streams against the emulator, and the emulator
// must not be what it measures.
func TestStreamAllocationsDoNotGrowWithDeltas(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"x"}]}`},
	} {
		allocs := func(deltas int) float64 {
			s := New(Script{OnExhausted: ExhaustedRepeatLast, Turns: []Turn{{
				Thinking: strings.Repeat("t", deltas), Text: strings.Repeat("é", deltas),
				ToolCalls: []ToolCall{{Name: "f", Arguments: strings.Repeat("a", deltas)}}, ChunkSize: 1,
			}}}, WithoutRecording())
			w := &discardWriter{h: http.Header{}}
			return testing.AllocsPerRun(20, func() {
				clear(w.h)
				r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
				r.Header.Set("anthropic-version", "2023-06-01")
				s.Handler().ServeHTTP(w, r)
			})
		}
		few, many := allocs(4), allocs(400)
		t.Logf("%s: %.0f allocations for 3x4 deltas, %.0f for 3x400", tc.path, few, many)
		if many > few+2 {
			t.Errorf("%s: %.0f allocations for 1200 deltas but %.0f for 12: deltas allocate", tc.path, many, few)
		}
	}
}
