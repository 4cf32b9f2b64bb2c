package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
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
	body, err := a.body(req, translate.NewIDs(nil))
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := a.body(&stream.Request{Model: "m", Tools: []*penguinv1.ToolDefinition{{Name: "bad", Parameters: "{"}}}, translate.NewIDs(nil)); err == nil {
		t.Fatal("a tool whose schema is not JSON is sent")
	}
}
