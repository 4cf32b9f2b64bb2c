package gemini

import (
	"testing"

	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// BenchmarkBuildBody measures a first request's body: a short history
// and twelve tools with schemas of a few hundred bytes each, as the
// engine's tool set, written into a pooled body as Stream does.
func BenchmarkBuildBody(b *testing.B) {
	req := llmtest.FirstRequest("gemini-3.1-pro-preview")
	b.ReportAllocs()
	for b.Loop() {
		body := sse.NewBody()
		if err := buildBody(body.Buffer(), req, translate.NewIDs(req.Messages)); err != nil {
			b.Fatal(err)
		}
		body.Release()
	}
}
