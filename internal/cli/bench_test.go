package cli

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
)

// answer is a long answer as models write them: paragraphs, lists and one
// long fenced code block, about 60 KiB.
func answer() string {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "## Step %d\n\nThis step changes **the parser** so that `flags` may follow the prompt, and checks it.\n\n- first point %d\n- second point\n\n", i, i)
	}
	b.WriteString("```go\n")
	for i := range 800 {
		fmt.Fprintf(&b, "func f%d() int { return %d }\n", i, i)
	}
	b.WriteString("```\n\nDone.\n")
	return b.String()
}

// stream feeds text to r as a model streams it, 8 characters a delta.
func stream(r *Renderer, text string) {
	r.Event(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, "")}})
	for off := 0; off < len(text); off += 8 {
		d := omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, text[off:min(off+8, len(text))])
		r.Event(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: d}})
	}
	r.Event(&penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: omni.AssistantText(text)}})
}

// BenchmarkMarkdownAnswer streams a 60 KiB answer through the markdown
// renderer of a terminal and, in the same run, through the plain renderer
// of a pipe, which writes each delta as it comes: the ratio is what
// rendering markdown block by block costs.
func BenchmarkMarkdownAnswer(b *testing.B) {
	text := answer()
	b.SetBytes(int64(len(text)))
	var md, plain time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		stream(NewRenderer(io.Discard, RendererOptions{Markdown: true, Width: 100, Color: true}), text)
		t1 := time.Now()
		stream(NewRenderer(io.Discard, RendererOptions{}), text)
		md, plain = md+t1.Sub(t0), plain+time.Since(t1)
	}
	mb := float64(len(text)) / (1 << 20)
	b.ReportMetric(mb/(md.Seconds()/float64(b.N)), "markdown-MiB/s")
	b.ReportMetric(mb/(plain.Seconds()/float64(b.N)), "plain-MiB/s")
	b.ReportMetric(float64(md)/float64(plain), "ratio")
}
