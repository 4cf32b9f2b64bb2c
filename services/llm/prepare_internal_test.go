package llm

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
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

// TestToolsCheckedOnce checks that a schema found valid is remembered (a
// session's next request skips checking it), that an invalid one is not,
// that the set stays within its bound, and that a tool defined twice is
// refused in a short list and in a long one alike.
func TestToolsCheckedOnce(t *testing.T) {
	valid := `{"type":"object","properties":{"remembered":{}}}`
	if !objectOrNull(valid) || !hasSchema(valid) {
		t.Fatal("a valid schema is not remembered: every request checks it again")
	}
	if objectOrNull(`{"type":`) || hasSchema(`{"type":`) {
		t.Fatal("an invalid schema is accepted or remembered")
	}
	big := `{"description":"` + strings.Repeat("x", maxValidSchemaBytes/32)
	for i := range 40 {
		if !objectOrNull(big + strconv.Itoa(i) + `"}`) {
			t.Fatal("a large valid schema is refused")
		}
		if n := validSchemas.Bytes(); n > maxValidSchemaBytes {
			t.Fatalf("%d bytes held, over the bound of %d", n, maxValidSchemaBytes)
		}
	}
	for _, n := range []int{3, 100} {
		var tools []*penguinv1.ToolDefinition
		for i := range n {
			tools = append(tools, &penguinv1.ToolDefinition{Name: "t" + strconv.Itoa(i), Parameters: valid})
		}
		if err := checkTools(tools); err != nil {
			t.Fatalf("%d distinct tools: %v", n, err)
		}
		tools = append(tools, &penguinv1.ToolDefinition{Name: "t1"})
		if err := checkTools(tools); err == nil || !strings.Contains(err.Error(), "defined twice") {
			t.Errorf("%d tools, one twice: %v", n+1, err)
		}
	}
}

// hasSchema reports whether validSchemas holds p.
func hasSchema(p string) bool {
	_, ok := validSchemas.Get(p)
	return ok
}
