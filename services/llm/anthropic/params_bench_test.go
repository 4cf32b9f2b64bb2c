package anthropic

import (
	"testing"

	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// BenchmarkBuildParams measures a first request's parameters: a short
// history and twelve tools with schemas of a few hundred bytes each, as
// the engine's tool set.
func BenchmarkBuildParams(b *testing.B) {
	req := llmtest.FirstRequest("claude-test")
	b.ReportAllocs()
	for b.Loop() {
		if _, fe := buildParams(req, translate.NewIDs(req.Messages), ""); fe != nil {
			b.Fatal(fe)
		}
	}
}
