package llm_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/internal/testkit/servetest"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routing"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const apiKey = "sk-secret-key-123"

// env is the llm service on a real 127.0.0.1 port, in front of an emulator.
type env struct {
	emu      *emulator.Server
	emuLogs  *llmtest.LogRecorder
	logs     *llmtest.LogRecorder
	metrics  *prometheus.Registry
	spans    *tracetest.SpanRecorder
	reg      *registry.Registry
	outcomes *outcomes
	client   penguinv1.LLMServiceClient
}

// outcomes records what every call returned, server side, so a test can
// see the outcome of a call whose client has already hung up.
type outcomes struct {
	mu   sync.Mutex
	list []*penguinv1.LLMOutcome
}

func (o *outcomes) middleware(next stream.Streamer) stream.Streamer {
	return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
		out := next.Stream(ctx, req, emit)
		o.mu.Lock()
		// A copy: the outcome is the caller's (see stream.Middleware).
		o.list = append(o.list, proto.CloneOf(out))
		o.mu.Unlock()
		return out
	})
}

func (o *outcomes) last() *penguinv1.LLMOutcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.list) == 0 {
		return nil
	}
	return o.list[len(o.list)-1]
}

const providersYAML = `
providers:
  - name: emu-openai
    type: openai
    base_url: %[1]s/v1
    api_key_env: EMU_KEY
    headers: {X-Title: penguin}
    models:
      - id: gpt-small
        context_window: 8192
        max_tokens: 2048
        vision: false
        thinking: [low]
      - id: gpt-chat
        context_window: 8192
        tools: false
      - id: gpt-big
        context_window: 200000
  - name: emu-anthropic
    type: anthropic
    base_url: %[1]s
    api_key_env: EMU_KEY
    models:
      - id: claude-test
        context_window: 200000
        max_tokens: 16000
        thinking: {low: "2048", high: "16384"}
`

type options struct {
	extra    []stream.Middleware
	maxBytes int
	// inProcess makes the client call through the server's in-process
	// channel (tracing off, as a process without an exporter runs it)
	// instead of TCP.
	inProcess bool
}

func start(t *testing.T, script emulator.Script, opt options) *env {
	t.Helper()
	e := &env{emuLogs: &llmtest.LogRecorder{}, logs: &llmtest.LogRecorder{}, metrics: prometheus.NewRegistry(),
		spans: tracetest.NewSpanRecorder(), reg: registry.New(), outcomes: &outcomes{}}
	e.emu = emulator.NewServer(script, emulator.WithAPIKey(apiKey), emulator.WithLogger(slog.New(e.emuLogs)))
	t.Cleanup(e.emu.Close)

	f, err := routing.Parse([]byte(fmt.Sprintf(providersYAML, e.emu.URL)))
	if err != nil {
		t.Fatal(err)
	}
	hc := llmtest.Client(t)
	if err := routing.Build(f, e.reg, routing.Deps{
		Lookup: config.MapLookup(map[string]string{"EMU_KEY": apiKey}), HTTPClient: hc, IdleTimeout: 5 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	metering, err := middleware.NewMetering(e.metrics)
	if err != nil {
		t.Fatal(err)
	}
	mw := []stream.Middleware{middleware.Tracing(tp), middleware.Logging(slog.New(e.logs)), metering.Middleware(), e.outcomes.middleware}
	svc, err := llm.New(llm.Options{Registry: e.reg, Middleware: append(mw, opt.extra...), MaxRequestBytes: opt.maxBytes})
	if err != nil {
		t.Fatal(err)
	}

	srvOpts := grpcserver.Options{Name: "llm", ShutdownTimeout: 5 * time.Second}
	if opt.inProcess {
		srvOpts.TracerProvider = noop.NewTracerProvider()
	}
	srv, err := grpcserver.New(srvOpts)
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv, svc)
	conn, err := grpc.NewClient(servetest.Serve(t, srv), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client = penguinv1.NewLLMServiceClient(conn)
	if opt.inProcess {
		e.client = penguinv1.NewLLMServiceClient(srv.InProcess())
	}
	return e
}

// call runs StreamGenerate to the end, checks the stream, and returns the
// frames.
func (e *env) call(t *testing.T, req *penguinv1.StreamGenerateRequest, opts ...grpc.CallOption) llmtest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := e.client.StreamGenerate(ctx, req, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var r llmtest.Result
	for {
		f, err := s.Recv()
		if err != nil {
			if st, _ := status.FromError(err); err.Error() != "EOF" && st.Code() != codes.OK {
				t.Fatalf("stream error: %v", err)
			}
			break
		}
		r.Frames = append(r.Frames, f)
		if o := f.GetOutcome(); o != nil {
			r.Outcome = o
		}
	}
	llmtest.Validate(t, r.Frames)
	return r
}

func genRequest(provider, model string, msgs ...*penguinv1.OmniMessage) *penguinv1.StreamGenerateRequest {
	if len(msgs) == 0 {
		msgs = []*penguinv1.OmniMessage{omni.UserText("hello")}
	}
	return &penguinv1.StreamGenerateRequest{
		Model:        &penguinv1.ModelRef{Provider: provider, ModelId: model},
		NewMessages:  msgs,
		SystemPrompt: "be brief",
	}
}

// comparable strips what legitimately differs between two runs of the same
// answer: timestamps, made-up call ids and the provider's request id.
func comparable(frames []*penguinv1.StreamGenerateResponse) []*penguinv1.StreamGenerateResponse {
	out := make([]*penguinv1.StreamGenerateResponse, len(frames))
	for i, f := range frames {
		c := proto.Clone(f).(*penguinv1.StreamGenerateResponse)
		if m := c.GetMessage(); m != nil {
			m.Timestamp = nil
			if p := m.GetPartialToolCall(); p != nil {
				p.ToolCallId = ""
			}
			if p := m.GetToolCall(); p != nil {
				p.ToolCallId = ""
			}
			if tu := m.GetTokenUsage(); tu != nil {
				// The service names the model and prices the usage; an
				// adapter called directly does neither.
				tu.Provider, tu.ModelId = "", ""
				tu.Request.CostUsd, tu.Session.CostUsd = nil, nil
			}
		}
		if o := c.GetOutcome(); o != nil {
			o.ProviderRequestId = ""
		}
		out[i] = c
	}
	return out
}

// TestSameFramesOverGRPC runs each adapter directly and through the gRPC
// service against the same scripted answer: the client sees the same frames.
func TestSameFramesOverGRPC(t *testing.T) {
	turn := emulator.Turn{
		Thinking: "Thinking it over.", Signature: "sig-abc", Text: "Here is the plan.",
		ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: `{"path":"a.txt"}`}, {Name: "list_dir", Arguments: `{"path":"."}`}},
		Usage:     emulator.Usage{Input: 50, Output: 30, CacheRead: 10},
	}
	for _, route := range []struct{ provider, model string }{{"emu-openai", "gpt-big"}, {"emu-anthropic", "claude-test"}} {
		t.Run(route.provider, func(t *testing.T) {
			e := start(t, emulator.Script{Turns: []emulator.Turn{turn, turn}}, options{})
			req := genRequest(route.provider, route.model)
			viaGRPC := e.call(t, req)
			if viaGRPC.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				t.Fatalf("outcome = %v\n%s", viaGRPC.Outcome, llmtest.Dump(viaGRPC.Frames))
			}
			adapter, route, _ := e.reg.Lookup(route.provider)
			direct := llmtest.Run(t, t.Context(), adapter, &stream.Request{
				Provider: req.GetModel().GetProvider(), Model: req.GetModel().GetModelId(), Spec: route.Model(req.GetModel().GetModelId()),
				Messages: req.GetNewMessages(), System: req.GetSystemPrompt(),
				MaxTokens: e.lastMaxTokens(t),
			})
			a, b := comparable(viaGRPC.Frames), comparable(direct.Frames)
			if len(a) != len(b) {
				t.Fatalf("%d frames over gRPC, %d direct\n%s\n%s", len(a), len(b), llmtest.Dump(a), llmtest.Dump(b))
			}
			for i := range a {
				if !proto.Equal(a[i], b[i]) {
					t.Errorf("frame %d differs:\n grpc:   %v\n direct: %v", i, a[i], b[i])
				}
			}
			if u := viaGRPC.Usage(); u.GetProvider() != req.GetModel().GetProvider() || u.GetModelId() != req.GetModel().GetModelId() {
				t.Errorf("token usage names %q/%q", u.GetProvider(), u.GetModelId())
			}
			if len(viaGRPC.ToolCalls()) != 2 || viaGRPC.Usage() == nil {
				t.Errorf("tool calls or usage missing:\n%s", llmtest.Dump(viaGRPC.Frames))
			}
		})
	}
}

// lastMaxTokens is the max_tokens the last provider request carried.
func (e *env) lastMaxTokens(t *testing.T) int64 {
	reqs := e.emu.Requests()
	b := reqs[len(reqs)-1].Body
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := b[k].(float64); ok {
			return int64(v)
		}
	}
	return 0
}

// TestCancelAborts cancels a call mid-stream: the call ends as aborted and
// the provider request is closed, as the emulator itself observes.
func TestCancelAborts(t *testing.T) {
	for _, route := range []struct{ provider, model string }{{"emu-openai", "gpt-big"}, {"emu-anthropic", "claude-test"}} {
		t.Run(route.provider, func(t *testing.T) {
			e := start(t, emulator.Script{Turns: []emulator.Turn{
				{Text: "This answer stalls after a few words and never ends.", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 6}},
			}}, options{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := e.client.StreamGenerate(ctx, genRequest(route.provider, route.model))
			if err != nil {
				t.Fatal(err)
			}
			for {
				f, err := s.Recv()
				if err != nil {
					t.Fatalf("stream ended before any text: %v", err)
				}
				if f.GetMessage().GetPartialText().GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
					break
				}
			}
			cancel()
			eventually.Within(t, 15*time.Second, "the aborted outcome", func() bool {
				o := e.outcomes.last()
				return o != nil && o.GetStatus() == penguinv1.StopReason_STOP_REASON_ABORTED && o.GetCode() == penguinv1.FailureCode_FAILURE_CODE_ABORTED
			})
			reqID := e.emu.Requests()[0].RequestID
			eventually.Within(t, 15*time.Second, "the emulator to see the provider request closed", func() bool {
				for _, r := range e.emuLogs.Find("emulator stream ended early") {
					id, _ := llmtest.Attr(r, "request_id")
					errv, _ := llmtest.Attr(r, "err")
					// The emulator notices the closed connection either
					// while it waits (its request context is cancelled) or
					// while it still writes the events before the stall.
					if id.String() != reqID {
						continue
					}
					for _, closed := range []string{"context canceled", "broken pipe", "connection reset"} {
						if strings.Contains(errv.String(), closed) {
							return true
						}
					}
				}
				return false
			})
		})
	}
}

func TestInvalidArgument(t *testing.T) {
	e := start(t, emulator.Script{}, options{maxBytes: 1 << 20})
	big := strings.Repeat("lorem ipsum dolor sit amet ", 2000) // ~13k tokens
	cases := []struct {
		name string
		req  *penguinv1.StreamGenerateRequest
		want string
	}{
		{"no model", &penguinv1.StreamGenerateRequest{NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")}}, "model.provider is required"},
		{"unknown provider", genRequest("nope", "gpt-big"), `unknown provider "nope"; known providers: ["emu-anthropic" "emu-openai"]`},
		{"empty model id", genRequest("emu-openai", ""), "model.model_id is required"},
		{"tool output without call", genRequest("emu-openai", "gpt-big", omni.UserText("hi"),
			omni.ToolCallOutput("call_9", "out", penguinv1.StopReason_STOP_REASON_COMPLETED)),
			`new_messages[1] is a tool_call_output for call "call_9", but no earlier tool_call has that id`},
		{"partial in history", &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{Provider: "emu-openai", ModelId: "gpt-big"},
			History: []*penguinv1.OmniMessage{omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, "x")}}, "history[0] is a partial_text"},
		{"no messages", &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{Provider: "emu-openai", ModelId: "gpt-big"}}, "nothing to answer"},
		{"oversized for the window", genRequest("emu-openai", "gpt-small", omni.UserText(big)), "too large for the model's context window"},
		{"oversized in bytes", genRequest("emu-openai", "gpt-big", omni.UserText(strings.Repeat("x", 2<<20))), "more than the 1048576 bytes"},
		{"image for a text-only model", genRequest("emu-openai", "gpt-small", omni.UserText("look"), omni.ImageURL("data:image/png;base64,AAAA")),
			"does not take images"},
		{"tools for a model that cannot call them", func() *penguinv1.StreamGenerateRequest {
			r := genRequest("emu-openai", "gpt-chat")
			r.Tools = []*penguinv1.ToolDefinition{{Name: "t", Parameters: `{"type":"object"}`}}
			return r
		}(), `model "gpt-chat" of provider "emu-openai" cannot call tools`},
		{"bad tool schema", func() *penguinv1.StreamGenerateRequest {
			r := genRequest("emu-openai", "gpt-big")
			r.Tools = []*penguinv1.ToolDefinition{{Name: "t", Parameters: "[1,2]"}}
			return r
		}(), "not a JSON Schema object"},
		{"negative max tokens", func() *penguinv1.StreamGenerateRequest {
			r := genRequest("emu-openai", "gpt-big")
			r.MaxTokens = -1
			return r
		}(), "max_tokens -1 is negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s, err := e.client.StreamGenerate(ctx, tc.req)
			if err == nil {
				_, err = s.Recv()
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, tc.want)
			}
		})
	}
	if n := len(e.emu.Requests()); n != 0 {
		t.Errorf("invalid requests reached the provider %d times", n)
	}
}

// TestThinkingNeverFails checks that a level the model does not list
// lands on the nearest one it does, and that a model that does not reason
// gets no reasoning parameter at any level.
func TestThinkingNeverFails(t *testing.T) {
	e := start(t, emulator.Script{Turns: []emulator.Turn{{Text: "ok"}, {Text: "ok"}}}, options{})
	req := genRequest("emu-openai", "gpt-small")
	req.ThinkingLevel = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
	if o := e.call(t, req).Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("outcome = %v", o)
	}
	if got := e.emu.Requests()[0].Body["reasoning_effort"]; got != "low" {
		t.Errorf("high on a model listing only low sent %v", got)
	}
	req = genRequest("emu-openai", "gpt-big")
	req.ThinkingLevel = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
	e.call(t, req)
	if got, ok := e.emu.Requests()[1].Body["reasoning_effort"]; ok {
		t.Errorf("a model with no thinking levels was sent reasoning_effort %v", got)
	}
}

func TestOutputCapAndThinkingOnTheWire(t *testing.T) {
	e := start(t, emulator.Script{Turns: []emulator.Turn{{Text: "ok"}, {Text: "ok"}, {Text: "ok"}}}, options{})
	// gpt-small: window 8192, listed max_tokens 2048; the input leaves less.
	text := strings.Repeat("word ", 5000) // ~6250 tokens
	req := genRequest("emu-openai", "gpt-small", omni.UserText(text))
	req.MaxTokens = 4000
	req.ThinkingLevel = penguinv1.ThinkingLevel_THINKING_LEVEL_LOW
	e.call(t, req)
	b := e.emu.Requests()[0].Body
	got := int64(b["max_tokens"].(float64))
	if got >= 2048 || got < 256 {
		t.Errorf("max_tokens = %d, want the window's room (below the listed 2048)", got)
	}
	if b["reasoning_effort"] != "low" {
		t.Errorf("reasoning_effort = %v", b["reasoning_effort"])
	}
	// The caller's own window wins over the table.
	req = genRequest("emu-openai", "gpt-big")
	req.MaxTokens = 50000
	req.ContextWindow = 20000
	e.call(t, req)
	if got := e.emu.Requests()[1].Body["max_tokens"].(float64); got > 20000-1024 || got < 18000 {
		t.Errorf("max_tokens = %v with a 20000 window", got)
	}
	// Anthropic: the listed level's budget, max_tokens from the table.
	req = genRequest("emu-anthropic", "claude-test")
	req.ThinkingLevel = penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH
	e.call(t, req)
	b = e.emu.Requests()[2].Body
	if b["max_tokens"] != float64(16000) || b["thinking"].(map[string]any)["budget_tokens"] != float64(12000) {
		t.Errorf("max_tokens %v thinking %v", b["max_tokens"], b["thinking"])
	}
}

func TestRequestTimeoutOverRPC(t *testing.T) {
	e := start(t, emulator.Script{Turns: []emulator.Turn{
		{Text: "This answer stalls after a few words.", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 3}},
	}}, options{})
	req := genRequest("emu-anthropic", "claude-test")
	ms := int64(300)
	req.RequestTimeoutMs = &ms
	r := e.call(t, req)
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TIMEOUT ||
		!strings.Contains(o.GetMessage(), "request timeout") {
		t.Fatalf("outcome = %v", o)
	}
}

func TestListProvidersAndModels(t *testing.T) {
	e := start(t, emulator.Script{}, options{})
	ctx := t.Context()
	ps, err := e.client.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.GetProviders()) != 2 || ps.GetProviders()[0].GetName() != "emu-anthropic" || ps.GetProviders()[1].GetType() != "openai" ||
		!ps.GetProviders()[1].GetHasCredential() || ps.GetProviders()[1].GetBaseUrl() != e.emu.URL+"/v1" {
		t.Errorf("providers = %v", ps)
	}
	if strings.Contains(ps.String(), apiKey) {
		t.Error("ListProviders leaks the key")
	}
	ms, err := e.client.ListModels(ctx, &penguinv1.ListModelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms.GetModels() {
		got = append(got, fmt.Sprintf("%s/%s:%d:%d:%v:%v", m.GetModel().GetProvider(), m.GetModel().GetModelId(),
			m.GetContextWindow(), m.GetMaxTokens(), m.GetVision(), m.GetThinkingLevels()))
	}
	want := "emu-anthropic/claude-test:200000:16000:true:[THINKING_LEVEL_LOW THINKING_LEVEL_HIGH] " +
		"emu-openai/gpt-big:200000:0:true:[] emu-openai/gpt-chat:8192:0:true:[] emu-openai/gpt-small:8192:2048:false:[THINKING_LEVEL_LOW]"
	if strings.Join(got, " ") != want {
		t.Errorf("models = %v\nwant %s", got, want)
	}
	one, err := e.client.ListModels(ctx, &penguinv1.ListModelsRequest{Provider: "emu-anthropic"})
	if err != nil || len(one.GetModels()) != 1 {
		t.Errorf("filtered models = %v, %v", one, err)
	}
	_, err = e.client.ListModels(ctx, &penguinv1.ListModelsRequest{Provider: "nope"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown provider filter: %v", err)
	}
}

// TestUnlistedModelIsServed checks that the model list is for discovery,
// not a whitelist.
func TestUnlistedModelIsServed(t *testing.T) {
	e := start(t, emulator.Script{Turns: []emulator.Turn{{Text: "hi"}}}, options{})
	r := e.call(t, genRequest("emu-openai", "some-unlisted-model"))
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || e.emu.Requests()[0].Body["model"] != "some-unlisted-model" {
		t.Fatalf("outcome = %v", r.Outcome)
	}
}

// TestMiddlewareObservesWithoutContent checks metering, logging and tracing
// on a completed and a failed call, and that neither the key nor the prompt
// reaches a log line or a span.
func TestMiddlewareObservesWithoutContent(t *testing.T) {
	e := start(t, emulator.Script{Turns: []emulator.Turn{
		{Text: "Sure.", Usage: emulator.Usage{Input: 100, Output: 5, CacheRead: 40, CacheWrite: 60}},
		{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "3"}},
	}}, options{})
	const prompt = "my secret prompt text"
	e.call(t, genRequest("emu-anthropic", "claude-test", omni.UserText(prompt)))
	e.call(t, genRequest("emu-anthropic", "claude-test", omni.UserText(prompt)))

	req := func(status, code string) map[string]string {
		return map[string]string{"provider": "emu-anthropic", "model": "claude-test", "status": status, "code": code}
	}
	if v := metrictest.Get(t, e.metrics, "penguin_llm_requests_total", req("completed", "")); v != 1 {
		t.Errorf("completed requests = %v", v)
	}
	if v := metrictest.Get(t, e.metrics, "penguin_llm_requests_total", req("timeout", "RATE_LIMIT")); v != 1 {
		t.Errorf("rate-limited requests = %v", v)
	}
	for kind, want := range map[string]float64{"input": 100, "output": 5, "cache_read": 40, "cache_write": 60} {
		if v := metrictest.Get(t, e.metrics, "penguin_llm_tokens_total", map[string]string{"provider": "emu-anthropic", "model": "claude-test", "kind": kind}); v != want {
			t.Errorf("%s tokens = %v, want %v", kind, v, want)
		}
	}
	if n := metricCount(t, e.metrics, "penguin_llm_streams_active"); n != 1 {
		t.Errorf("penguin_llm_streams_active has %d series, want 1 (the route used)", n)
	}
	if v, ok := metrictest.Value(t, e.metrics, "penguin_llm_streams_active", map[string]string{"provider": "emu-anthropic", "model": "claude-test"}); !ok || v != 0 {
		t.Errorf("streams in progress after both ended = %v", v)
	}

	ended := e.logs.Find("llm request ended")
	if len(ended) != 2 || ended[1].Level != slog.LevelWarn {
		t.Fatalf("log lines = %v", e.logs.All())
	}
	if v, _ := llmtest.Attr(ended[1], "retry_after_ms"); v.Int64() != 3000 {
		t.Errorf("retry_after_ms logged = %v", v)
	}
	all := e.logs.All()
	if strings.Contains(all, prompt) || strings.Contains(all, apiKey) || strings.Contains(all, "Sure.") {
		t.Errorf("a log line carries content or the key:\n%s", all)
	}

	spans := e.spans.Ended()
	var attrs []string
	for _, s := range spans {
		if s.Name() != "llm.stream" {
			continue
		}
		var kv []string
		for _, a := range s.Attributes() {
			kv = append(kv, string(a.Key)+"="+a.Value.Emit())
		}
		attrs = append(attrs, strings.Join(kv, " "))
	}
	if len(attrs) != 2 || !strings.Contains(attrs[0], "penguin.llm.status=completed") || !strings.Contains(attrs[1], "penguin.llm.code=RATE_LIMIT") ||
		!strings.Contains(attrs[0], "penguin.llm.provider=emu-anthropic") || !strings.Contains(attrs[0], "penguin.llm.model=claude-test") {
		t.Errorf("spans = %v", attrs)
	}
	if strings.Contains(strings.Join(attrs, " "), prompt) {
		t.Error("a span carries the prompt")
	}
}

// metricCount returns how many series the metric name has.
func metricCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// TestFaultInjection cuts a real stream after some frames and answers
// another call without the provider, through the middleware chain.
func TestFaultInjection(t *testing.T) {
	cut := &failure.Error{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Code: penguinv1.FailureCode_FAILURE_CODE_TRANSPORT, Message: "injected cut"}
	fi := middleware.FaultInjection(
		middleware.Fault{Match: func(r *stream.Request) bool { return r.Model == "gpt-big" }, Times: 1, AfterFrames: 3, Err: cut},
		middleware.Fault{Match: func(r *stream.Request) bool { return r.Model == "scripted" },
			Reply: []*penguinv1.OmniMessage{omni.AssistantText("canned")}},
	)
	e := start(t, emulator.Script{Turns: []emulator.Turn{
		{Text: "A fairly long answer that will be cut by the middleware."},
		{Text: "Second try works."},
	}}, options{extra: []stream.Middleware{fi}})
	r := e.call(t, genRequest("emu-openai", "gpt-big"))
	if o := r.Outcome; o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetMessage() != "injected cut" {
		t.Fatalf("outcome = %v\n%s", o, llmtest.Dump(r.Frames))
	}
	if r2 := e.call(t, genRequest("emu-openai", "gpt-big")); r2.Texts() != "Second try works." {
		t.Errorf("second call = %q", r2.Texts())
	}
	r3 := e.call(t, genRequest("emu-openai", "scripted"))
	if r3.Texts() != "canned" || r3.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || len(e.emu.Requests()) != 2 {
		t.Errorf("short circuit = %v", llmtest.Dump(r3.Frames))
	}
}
