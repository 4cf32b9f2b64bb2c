package llm

import (
	"encoding/json"
	"testing"
)

// TestObjectOrNullMatchesDecoding proves the fast schema check accepts
// exactly what decoding into a map accepts, so skipping the decoding
// changed no request's fate.
func TestObjectOrNullMatchesDecoding(t *testing.T) {
	for _, p := range []string{
		`{}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, `null`, `{"a":1,"a":2}`,
		`[]`, `"x"`, `1`, `true`, `nul`, `{`, `{"a":}`, `{} {}`, `{}x`, `[{}]`, `{"a":"\ud800"}`,
	} {
		var obj map[string]json.RawMessage
		want := json.Unmarshal([]byte(p), &obj) == nil
		if got := objectOrNull(p); got != want {
			t.Errorf("objectOrNull(%s) = %v, decoding accepts it: %v", p, got, want)
		}
	}
}
