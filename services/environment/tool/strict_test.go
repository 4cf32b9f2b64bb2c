package tool

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParamsCheck(t *testing.T) {
	closed := ParseParams(`{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"},"env":{"type":"object"}}}`)
	open := ParseParams(`{"type":"object"}`)
	extra := ParseParams(`{"type":"object","properties":{"cmd":{}},"additionalProperties":true}`)
	refused := []struct {
		p    Params
		args string
		want string
	}{
		{closed, `{"cmd":"echo harmless","Cmd":"rm -rf sub1"}`, `both "cmd" and "Cmd"`},
		{closed, `{"Cmd":"rm -rf sub1"}`, `unknown argument "Cmd": argument names are case-sensitive, the parameter is "cmd"`},
		{closed, `{"CMD":"x"}`, `the parameter is "cmd"`},
		{open, `{"ſ":"x","S":"y"}`, `differ only in case`}, // U+017F folds to s, as encoding/json folds it
		{closed, `{"cmd":"a","cmd":"b"}`, `the key "cmd" twice`},
		{closed, `{"cmd":"a","shell":"zsh"}`, `unknown argument "shell": the parameters are "cmd", "env", "workdir"`},
		{closed, `{"env":{"PATH":"/a","path":"/b"}}`, `argument "env" gives both "PATH" and "path"`},
		{closed, `{"env":{"a":[{"k":1,"k":2}]}}`, `argument "env.a[0]" gives the key "k" twice`},
		{open, `{"Cmd":"x","cmd":"y"}`, `differ only in case`},
		{extra, `{"CMD":"x"}`, `the parameter is "cmd"`},
	}
	for _, c := range refused {
		err := c.p.Check(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%s) = %v; want an error containing %q", c.args, err, c.want)
		}
	}
	accepted := []struct {
		p    Params
		args string
	}{
		{closed, `{"cmd":"ls","workdir":"sub","env":{"PATH":"/bin","HOME":"/h"}}`},
		{closed, ``},
		{closed, `not json`}, // the tool's decoding reports it
		{closed, `[1,2]`},
		{closed, `{"cmd":"a"`},
		{open, `{"anything":1,"else":{"x":[1,{"y":2}]}}`},
		{extra, `{"cmd":"x","more":1}`},
	}
	for _, c := range accepted {
		if err := c.p.Check(c.args); err != nil {
			t.Errorf("Check(%s) = %v; want nil", c.args, err)
		}
	}
}

// BenchmarkParamsCheck measures the strict check of a typical
// exec_command call against decoding the same arguments into a map (what
// the command policy does anyway), in the same run.
func BenchmarkParamsCheck(b *testing.B) {
	p := ParseParams(`{"type":"object","properties":{"description":{},"cmd":{},"workdir":{},"yield_time_ms":{},"run_in_background":{},"tty":{}}}`)
	args := `{"description":"Run the tests of the package","cmd":"go test ./services/environment/... -run TestAttack -count=1","yield_time_ms":30000,"tty":false}`
	var check, decode time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := p.Check(args); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var m map[string]any
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			b.Fatal(err)
		}
		check += t1.Sub(t0)
		decode += time.Since(t1)
	}
	b.ReportMetric(float64(check.Nanoseconds())/float64(b.N), "check-ns")
	b.ReportMetric(float64(decode.Nanoseconds())/float64(b.N), "map-decode-ns")
	b.ReportMetric(float64(check)/float64(decode), "ratio")
}

// TestParseParamsKeepsABoundedCache: a schema parsed again answers from
// the cache with what a fresh parse says, and schemas past the bound are
// still parsed, not cached.
func TestParseParamsKeepsABoundedCache(t *testing.T) {
	schema := `{"type":"object","properties":{"path_for_cache_test":{}}}`
	first := ParseParams(schema)
	again := ParseParams(schema)
	if first.names == nil || !again.names["path_for_cache_test"] || again.open {
		t.Fatalf("ParseParams(%s) = %+v, then %+v", schema, first, again)
	}
	if err := again.Check(`{"Path_For_Cache_Test":"x"}`); err == nil {
		t.Error("a cached Params lets a case variant of its parameter through")
	}
	for i := range maxParsedParams + 10 {
		name := fmt.Sprintf("p%d", i)
		p := ParseParams(`{"type":"object","properties":{"` + name + `":{}}}`)
		if !p.names[name] || p.open {
			t.Fatalf("schema %d parsed as %+v", i, p)
		}
	}
	parsedParams.mu.Lock()
	n := len(parsedParams.m)
	parsedParams.mu.Unlock()
	if n > maxParsedParams {
		t.Errorf("the cache holds %d schemas, more than its bound %d", n, maxParsedParams)
	}
}
