package llm

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
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

// TestValidToolNameMatchesPattern checks the tool-name check against the
// pattern it stands for, ^[a-zA-Z0-9_-]{1,64}$, on names of every byte
// and around the length bound.
func TestValidToolNameMatchesPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	names := []string{"", "a", "read_file", "run-cmd", "A9_z-", strings.Repeat("x", 64), strings.Repeat("x", 65),
		strings.Repeat("é", 10), "tool\n", "\ntool", "tool name", "tool.name", "tool/x", "ünïcode", "\xff", "a\x00"}
	for c := range 256 {
		names = append(names, string([]byte{byte(c)}), "t"+string([]byte{byte(c)})+"t")
	}
	for _, name := range names {
		if got, want := validToolName(name), pattern.MatchString(name); got != want {
			t.Errorf("validToolName(%q) = %v, the pattern says %v", name, got, want)
		}
	}
}

// TestUnknownModelLoggedOnce checks that a model the catalog does not
// know is logged once per route, also when requests for it come at once,
// and that nothing more is logged once the bound is reached.
func TestUnknownModelLoggedOnce(t *testing.T) {
	logs := &llmtest.LogRecorder{}
	s := &Service{log: slog.New(logs)}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				s.unknownModel("route", "model")
				s.unknownModel("route", "other")
				s.unknownModel("route2", "model")
			}
		})
	}
	wg.Wait()
	const msg = "a model is not in the catalog or the providers file: it gets conservative defaults (add it to the providers file to change them)"
	seen := map[string]int{}
	for _, r := range logs.Find(msg) {
		p, _ := llmtest.Attr(r, "provider")
		m, _ := llmtest.Attr(r, "model")
		seen[p.String()+"/"+m.String()]++
	}
	if len(seen) != 3 || seen["route/model"] != 1 || seen["route/other"] != 1 || seen["route2/model"] != 1 {
		t.Errorf("logged %v, want each of the three once", seen)
	}
	s.unknownN.Store(maxUnknownLogged)
	s.unknownModel("route", "new")
	if n := len(logs.Find(msg)); n != 3 {
		t.Errorf("%d lines after the bound, want 3", n)
	}
}
