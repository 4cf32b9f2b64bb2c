package openai

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// benchStream is a realistic Chat Completions answer: a role chunk, text
// deltas (one with escapes), a tool call whose arguments come in several
// chunks, the finish_reason, the usage chunk and [DONE], with the fields
// OpenAI sends that the adapter does not read.
func benchStream() []byte {
	var b bytes.Buffer
	head := `"id":"chatcmpl-B9MHDbslfCsjRGA2ZHxgRQkQ9Jb3y","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8"`
	ev := func(s string) { fmt.Fprintf(&b, "data: {%s,%s}\n\n", head, s) }
	ev(`"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null`)
	for _, w := range []string{"I", " will", " read", " the", " file", ` \"main.go\"`, " first", ",", " then", " fix", " the", " failing", " test", ".\\n"} {
		ev(`"choices":[{"index":0,"delta":{"content":"` + w + `"},"logprobs":null,"finish_reason":null}],"usage":null`)
	}
	ev(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"read_file","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null`)
	for _, a := range []string{`{\"`, `path`, `\":\"`, `cmd/`, `main`, `.go`, `\",\"`, `limit`, `\":`, `200`, `}`} {
		ev(`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + a + `"}}]},"logprobs":null,"finish_reason":null}],"usage":null`)
	}
	ev(`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null`)
	ev(`"choices":[],"usage":{"prompt_tokens":5120,"completion_tokens":41,"total_tokens":5161,"prompt_tokens_details":{"cached_tokens":4864,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkReadStream measures relaying one streamed answer from its
// bytes: the SSE reading, the per-chunk decoding and the translation, with
// no HTTP around it.
func BenchmarkReadStream(b *testing.B) {
	body := benchStream()
	a := &Adapter{}
	ctx := context.Background()
	emit := func(*penguinv1.OmniMessage) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		r := sse.NewReader(bytes.NewReader(body))
		out := a.read(ctx, r, translate.New(emit, translate.NewIDs(nil)), &httpwatch.Exchange{})
		r.Release()
		if out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			b.Fatalf("outcome %v", out)
		}
	}
}
