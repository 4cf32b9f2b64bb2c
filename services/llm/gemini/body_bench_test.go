package gemini

import (
	"fmt"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// BenchmarkBuildBody measures a first request's body: a short history
// and twelve tools with schemas of a few hundred bytes each, as the
// engine's tool set.
func BenchmarkBuildBody(b *testing.B) {
	req := &stream.Request{Model: "gemini-3.1-pro-preview", System: "be brief", MaxTokens: 1000,
		Messages: []*penguinv1.OmniMessage{omni.UserText("Read hello.txt and tell me what it says")}}
	for i := range 12 {
		req.Tools = append(req.Tools, &penguinv1.ToolDefinition{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: "Does one thing to the workspace, and says what it did.",
			Parameters: `{"type": "object", "properties": {"path": {"type": "string", "description": "The file's path, relative to the workspace."},
				"offset": {"type": "integer", "description": "The first line."}, "limit": {"type": "integer"}}, "required": ["path"]}`,
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBody(req, translate.NewIDs(req.Messages)); err != nil {
			b.Fatal(err)
		}
	}
}
