package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// TestBodyToolsEncodedOnce checks that a body carries its tools as Chat
// Completions wants them (the schema compacted, an empty object for a
// tool without one) and that a tool's encoding is kept for the next
// request instead of being compacted again.
func TestBodyToolsEncodedOnce(t *testing.T) {
	a := &Adapter{}
	req := &stream.Request{Model: "m", Tools: []*penguinv1.ToolDefinition{
		{Name: "read_file", Description: "reads <a> file", Parameters: "{ \"type\": \"object\",\n \"properties\": {\"path\": {\"type\": \"string\"}} }"},
		{Name: "now"},
	}}
	var buf bytes.Buffer
	if err := a.body(&buf, req, translate.NewIDs(nil)); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()
	var got struct {
		Model string `json:"model"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if got.Model != "m" || len(got.Tools) != 2 || got.Tools[0].Type != "function" ||
		got.Tools[0].Function.Name != "read_file" || got.Tools[0].Function.Description != "reads <a> file" ||
		string(got.Tools[0].Function.Parameters) != `{"type":"object","properties":{"path":{"type":"string"}}}` ||
		string(got.Tools[1].Function.Parameters) != string(emptyObjectSchema) {
		t.Fatalf("body %s", body)
	}
	first, err := encodedTools.Get(req.Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	again, err := encodedTools.Get(&penguinv1.ToolDefinition{Name: "read_file", Description: "reads <a> file", Parameters: req.Tools[0].GetParameters()})
	if err != nil {
		t.Fatal(err)
	}
	if &first[0] != &again[0] {
		t.Fatal("a tool sent again is encoded again")
	}
	if !bytes.Contains(body, first) {
		t.Fatalf("body %s does not hold the tool's encoding %s", body, first)
	}
	if err := a.body(new(bytes.Buffer), &stream.Request{Model: "m", Tools: []*penguinv1.ToolDefinition{{Name: "bad", Parameters: "{"}}}, translate.NewIDs(nil)); err == nil {
		t.Fatal("a tool whose schema is not JSON is sent")
	}
}

// BenchmarkBody measures a first request's body: a short history and
// twelve tools with schemas of a few hundred bytes each, as the engine's
// tool set, written into a pooled body as Stream does.
func BenchmarkBody(b *testing.B) {
	a := &Adapter{}
	req := llmtest.FirstRequest("gpt-5.4")
	b.ReportAllocs()
	for b.Loop() {
		body := sse.NewBody()
		if err := a.body(body.Buffer(), req, translate.NewIDs(req.Messages)); err != nil {
			b.Fatal(err)
		}
		body.Release()
	}
}
