package translate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// TestToolEncodingsBody checks the bodies a ToolEncodings builds: the
// object's members with the tools' array appended (to an empty object
// too), no array without tools, each tool encoded once, and an encoding
// error returned.
func TestToolEncodingsBody(t *testing.T) {
	calls := 0
	e := translate.NewToolEncodings(func(d *penguinv1.ToolDefinition) ([]byte, error) {
		calls++
		if d.GetName() == "bad" {
			return nil, errors.New("bad tool")
		}
		return json.Marshal(map[string]string{"name": d.GetName()})
	})
	tools := []*penguinv1.ToolDefinition{{Name: "a", Parameters: "{}"}, {Name: "b"}}
	cases := []struct {
		v     any
		tools []*penguinv1.ToolDefinition
		want  string
	}{
		{struct {
			Model string `json:"model"`
		}{"m"}, tools, `{"model":"m","tools":[{"name":"a"},{"name":"b"}]}`},
		{struct{}{}, tools, `{"tools":[{"name":"a"},{"name":"b"}]}`},
		{struct {
			Model string `json:"model"`
		}{"m<"}, nil, `{"model":"m\u003c"}`},
	}
	for _, c := range cases {
		got, err := body(e, c.v, c.tools)
		if err != nil || got != c.want {
			t.Errorf("Body(%v) = %s, %v; want %s", c.v, got, err, c.want)
		}
	}
	if calls != 2 {
		t.Errorf("the tools were encoded %d times, want once each", calls)
	}
	if got, err := body(e, struct{}{}, []*penguinv1.ToolDefinition{{Name: "bad"}}); err == nil || got != "" {
		t.Errorf("a tool that does not encode made a body %q", got)
	}
	buf := bytes.NewBufferString("kept")
	if err := e.Body(buf, struct{ C chan int }{}, "tools", tools); err == nil || buf.String() != "kept" {
		t.Errorf("a value that does not encode left %q in the buffer, error %v", buf, err)
	}
}

// body is the body e writes for v and tools, into a new buffer.
func body(e *translate.ToolEncodings, v any, tools []*penguinv1.ToolDefinition) (string, error) {
	var buf bytes.Buffer
	err := e.Body(&buf, v, "tools", tools)
	return buf.String(), err
}

// TestNestedToolEncodingsBody checks a body whose tools' array is nested
// in other JSON (Gemini's groups).
func TestNestedToolEncodingsBody(t *testing.T) {
	e := translate.NewNestedToolEncodings(func(d *penguinv1.ToolDefinition) ([]byte, error) {
		return json.Marshal(map[string]string{"name": d.GetName()})
	}, `[{"functionDeclarations":[`, `]}]`)
	got, err := body(e, struct {
		Model string `json:"model"`
	}{"m"}, []*penguinv1.ToolDefinition{{Name: "a"}, {Name: "b"}})
	if want := `{"model":"m","tools":[{"functionDeclarations":[{"name":"a"},{"name":"b"}]}]}`; err != nil || got != want {
		t.Errorf("Body = %s, %v; want %s", got, err, want)
	}
	if got, err := body(e, struct{}{}, nil); err != nil || got != `{}` {
		t.Errorf("Body without tools = %s, %v; want {}", got, err)
	}
}
