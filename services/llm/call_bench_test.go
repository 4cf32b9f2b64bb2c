package llm_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routing"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// shippedService is the llm service over the routes of a providers
// file, sent through hc, with the middlewares `penguin serve` runs
// (tracing without an exporter, logging to log, metering into metrics).
func shippedService(b *testing.B, providers string, hc *http.Client, metrics prometheus.Registerer, log *slog.Logger) *llm.Service {
	b.Helper()
	f, err := routing.Parse([]byte(providers))
	if err != nil {
		b.Fatal(err)
	}
	reg := registry.New()
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(nil), HTTPClient: hc, IdleTimeout: llm.DefaultIdleTimeout}); err != nil {
		b.Fatal(err)
	}
	metering, err := middleware.NewMetering(metrics)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := llm.New(llm.Options{Registry: reg, Logger: log, Middleware: []stream.Middleware{
		middleware.Tracing(noop.NewTracerProvider()), middleware.Logging(log), metering.Middleware(),
	}})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// mockAnswers are the HTTP responses `penguin mockllm` sends for the two
// turns of the end-to-end benchmark's task (a read_file call, then a
// short text), taken from the emulator once, as they come off the wire.
func mockAnswers(b *testing.B) (call, text string) {
	b.Helper()
	emu := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{
		{Name: "read", ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: `{"file_path":"hello.txt"}`}},
			Usage: emulator.Usage{Input: 1200, Output: 20}},
		{Name: "answer", Text: "hello.txt says: Hello from the benchmark's workspace.", Usage: emulator.Usage{Input: 1260, Output: 14}},
	}}, emulator.WithoutRecording())
	defer emu.Close()
	raw := func() string {
		c, err := net.Dial("tcp", emu.URL[len("http://"):])
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		body := `{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: mock\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
			b.Fatal(err)
		}
		resp, err := io.ReadAll(bufio.NewReader(c))
		if err != nil {
			b.Fatal(err)
		}
		// Served again and again on one connection: not its last answer.
		return string(bytes.Replace(resp, []byte("Connection: close\r\n"), nil, 1))
	}
	return raw(), raw()
}

// BenchmarkModelCalls is the llm service's share of the end-to-end
// benchmark's task, per operation: its two model calls (the first turn's
// request, then the second's with the tool call and its output in the
// history) through Generate, with the middlewares `penguin serve` runs
// (tracing without an exporter, logging at Info, metering), the OpenAI
// adapter and the shipped HTTP client, against servers that answer what
// the mockllm answers and allocate nearly nothing themselves. Besides
// the time it reports the process's CPU per operation.
func BenchmarkModelCalls(b *testing.B) {
	callAnswer, textAnswer := mockAnswers(b)
	first, second := llmtest.NewRawServer(b, false), llmtest.NewRawServer(b, false)
	first.Response, second.Response = callAnswer, textAnswer
	base := func(s *llmtest.RawServer) string { return s.URL()[:len(s.URL())-len("/chat/completions")] }
	hc := llm.NewHTTPClient()
	defer hc.CloseIdleConnections()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := shippedService(b, "providers:\n  - name: first\n    type: openai\n    base_url: "+base(first)+
		"\n  - name: second\n    type: openai\n    base_url: "+base(second)+"\n", hc, prometheus.NewRegistry(), log)
	tools := llmtest.FirstRequest("").Tools
	user := omni.UserText("Read hello.txt and tell me what it says")
	call := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCall{ToolCall: &penguinv1.ToolCall{
		Role: penguinv1.Role_ROLE_ASSISTANT, Name: "read_file", Arguments: `{"file_path":"hello.txt"}`, ToolCallId: "call_1"}}}
	output := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
		ToolCallId: "call_1", Output: "Hello from the benchmark's workspace.\n"}}}
	system := "You are a coding agent. Be brief."
	requests := []*penguinv1.StreamGenerateRequest{
		{Model: &penguinv1.ModelRef{Provider: "first", ModelId: "bench-model"}, SystemPrompt: system, Tools: tools,
			NewMessages: []*penguinv1.OmniMessage{user}},
		{Model: &penguinv1.ModelRef{Provider: "second", ModelId: "bench-model"}, SystemPrompt: system, Tools: tools,
			History: []*penguinv1.OmniMessage{user, call}, NewMessages: []*penguinv1.OmniMessage{output}},
	}
	ctx := context.Background()
	var out *penguinv1.LLMOutcome
	send := func(r *penguinv1.StreamGenerateResponse) error {
		if o := r.GetOutcome(); o != nil {
			out = o
		}
		return nil
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		for _, req := range requests {
			if err := svc.Generate(ctx, req, send); err != nil {
				b.Fatal(err)
			}
			if out.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				b.Fatalf("outcome %v", out)
			}
		}
	}
	// The process's CPU, the servers' included: on a loaded machine,
	// steadier than the time.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
