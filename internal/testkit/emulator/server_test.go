package emulator_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	openai "github.com/sashabaranov/go-openai"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	s, err := emulator.ParseScript([]byte(`
on_exhausted: repeat_last
turns:
  - name: first
    thinking: "hm"
    signature: sig
    text: hello
    tool_calls: [{id: c1, name: f, arguments: '{"a":1}'}]
    usage: {input: 1, output: 2, cache_read: 3, cache_write: 4, reasoning: 1}
    chunk_size: 2
    first_delay: 1s
    delay: 20ms
  - fault: {kind: http_error, status: 429, retry_after: 2}
  - fault: {kind: stall, after: 3, duration: 1.5s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.OnExhausted != emulator.ExhaustedRepeatLast || len(s.Turns) != 3 {
		t.Fatalf("script %+v", s)
	}
	first := s.Turns[0]
	if first.Delay != 20*time.Millisecond || first.FirstDelay != time.Second || first.ChunkSize != 2 ||
		first.Usage != (emulator.Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4, Reasoning: 1}) ||
		first.ToolCalls[0] != (emulator.ToolCall{ID: "c1", Name: "f", Arguments: `{"a":1}`}) {
		t.Errorf("first turn %+v", first)
	}
	if s.Turns[1].Fault.RetryAfter != "2" {
		t.Errorf("retry_after %q, want the number as text", s.Turns[1].Fault.RetryAfter)
	}
	if s.Turns[2].Fault.Duration != 1500*time.Millisecond {
		t.Errorf("stall duration %v", s.Turns[2].Fault.Duration)
	}
}

func TestParseScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"empty", "", "script is empty"},
		{"unknown key", "turns:\n  - txt: hi\n", "field txt not found"},
		{"unknown fault", "turns:\n  - fault: {kind: explode}\n", `turns[0]: fault: kind "explode"`},
		{"fault without kind", "turns:\n  - fault: {status: 500}\n", "kind is empty"},
		{"bad status", "turns:\n  - fault: {kind: http_error, status: 200}\n", "status 200"},
		{"blocks and text", "turns:\n  - text: a\n    blocks: [{type: text, text: b}]\n", "blocks cannot be combined"},
		{"bad block type", "turns:\n  - blocks: [{type: image}]\n", `blocks[0]: type "image"`},
		{"tool without name", "turns:\n  - name: t\n    tool_calls: [{id: x}]\n", "turns[0] (t): tool_calls[0]: name is empty"},
		{"negative chunk", "turns:\n  - chunk_size: -1\n", "chunk_size -1"},
		{"bad duration", "turns:\n  - delay: 20\n", "into time.Duration"},
		{"bad reasoning field", "turns:\n  - reasoning_field: thoughts\n", "reasoning_field"},
		{"bad exhausted", "on_exhausted: loop\n", "on_exhausted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := emulator.ParseScript([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestExampleScriptsLoad(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example scripts: %v", err)
	}
	for _, f := range files {
		s, err := emulator.LoadScript(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(s.Turns) == 0 {
			t.Errorf("%s has no turns", f)
		}
	}
	if _, err := emulator.LoadScript("testdata/missing.yaml"); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestAgentLoopScriptOverBothProtocols plays the documented example script
// through both client libraries.
func TestAgentLoopScriptOverBothProtocols(t *testing.T) {
	t.Parallel()
	script, err := emulator.LoadScript("testdata/agent-loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, script)
		first := streamOpenAI(t, srv, userTurn("list files"))
		if first.err != nil || len(first.tools) != 1 || first.tools[0].Args != `{"command":"ls -la"}` || first.usage.PromptTokensDetails.CachedTokens != 1024 {
			t.Fatalf("first turn %+v", first)
		}
		second := streamOpenAI(t, srv, userTurn("tool output"))
		if second.err != nil || second.content != "The workspace holds README.md and main.go." {
			t.Fatalf("second turn %+v", second)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, script)
		ctx := testkit.Context(t, testTimeout)
		first := streamAnthropic(t, ctx, srv, newHeaderTap(t), anthropicTurn("list files"))
		if first.err != nil || blocksOf(first.msg)[0].Signature != "sig-plan-1" || first.msg.StopReason != "tool_use" {
			t.Fatalf("first turn %+v", first)
		}
		second := streamAnthropic(t, ctx, srv, newHeaderTap(t), anthropicTurn("tool output"))
		if second.err != nil || blocksOf(second.msg)[1].Text != "The workspace holds README.md and main.go." {
			t.Fatalf("second turn %+v", second)
		}
	})
}

func TestExhausted(t *testing.T) {
	t.Parallel()
	t.Run("error", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "only"}}})
		if got := streamOpenAI(t, srv, userTurn("1")); got.content != "only" {
			t.Fatalf("first: %+v", got)
		}
		_, err := openAIClient(srv, "k", newHeaderTap(t)).CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("2"))
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || !strings.Contains(apiErr.Message, "script exhausted") {
			t.Fatalf("error %v, want 500 script exhausted", err)
		}
		got := streamAnthropic(t, testkit.Context(t, testTimeout), srv, newHeaderTap(t), anthropicTurn("3"))
		var antErr *anthropic.Error
		if !errors.As(got.err, &antErr) || antErr.StatusCode != 500 || !strings.Contains(antErr.RawJSON(), "script exhausted") {
			t.Fatalf("anthropic error %v, want 500 script exhausted", got.err)
		}
	})
	t.Run("repeat last", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, emulator.Script{OnExhausted: emulator.ExhaustedRepeatLast, Turns: []emulator.Turn{{Text: "a"}, {Text: "b"}}})
		for i, want := range []string{"a", "b", "b", "b"} {
			if got := streamOpenAI(t, srv, userTurn("x")); got.err != nil || got.content != want {
				t.Errorf("request %d: %q %v, want %q", i, got.content, got.err, want)
			}
		}
		if srv.Remaining() != 0 {
			t.Errorf("remaining %d", srv.Remaining())
		}
	})
}

func TestMatchPicksTurnsByLastMessage(t *testing.T) {
	t.Parallel()
	script, err := emulator.LoadScript("testdata/multi-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, script)
	ctx := testkit.Context(t, testTimeout)
	client := openAIClient(srv, "k", newHeaderTap(t))
	ask := func(req openai.ChatCompletionRequest) openAIResult {
		stream, err := client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Error(err)
			return openAIResult{}
		}
		defer stream.Close()
		return readOpenAI(stream)
	}
	if got := ask(userTurn("count files")); len(got.tools) != 2 {
		t.Fatalf("parent: %+v", got)
	}
	// The subagents ask at once, in either order.
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, task := range []string{"TASK-B: count the test files", "TASK-A: count the Go files"} {
		wg.Go(func() { results[i] = ask(userTurn(task)).content })
	}
	wg.Wait()
	if results[0] != "RESULT-B: 5 test files." || results[1] != "RESULT-A: 12 Go files." {
		t.Fatalf("subagents got %q", results)
	}
	// The parent's next request ends with tool results.
	req := userTurn("count files")
	req.Messages = append(req.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{{ID: "call_b", Type: "function", Function: openai.FunctionCall{Name: "subagent", Arguments: "{}"}}}},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: "call_b", Content: "RESULT-B: 5 test files."},
	)
	if got := ask(req); got.content != "12 Go files, 5 of them tests." {
		t.Fatalf("parent conclusion %q", got.content)
	}
	// Anthropic tool_result blocks are matched too: nothing is left, so the
	// error message quotes the last message.
	params := anthropicTurn("x")
	params.Messages = append(params.Messages,
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "subagent")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "RESULT-Z", false)))
	got := streamAnthropic(t, ctx, srv, newHeaderTap(t), params)
	if got.err == nil || !strings.Contains(got.err.Error(), "RESULT-Z") {
		t.Errorf("error %v, want the exhausted message quoting RESULT-Z", got.err)
	}
}

// A turn with repeat answers every request that matches it; the others
// are still played once.
func TestRepeatedTurnsAnswerEveryMatch(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{
		{Match: "again", Repeat: true, Text: "same answer"},
		{Match: "once", Text: "only once"},
	}})
	ctx := testkit.Context(t, testTimeout)
	client := openAIClient(srv, "k", newHeaderTap(t))
	ask := func(text string) (string, error) {
		stream, err := client.CreateChatCompletionStream(ctx, userTurn(text))
		if err != nil {
			return "", err
		}
		defer stream.Close()
		got := readOpenAI(stream)
		return got.content, got.err
	}
	for i := range 3 {
		if got, err := ask("say it again"); err != nil || got != "same answer" {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
	}
	if got, err := ask("once"); err != nil || got != "only once" {
		t.Fatalf("first once: %q, %v", got, err)
	}
	if _, err := ask("once"); err == nil {
		t.Fatal("a turn without repeat answered twice")
	}
	if _, err := emulator.ParseScript([]byte("turns:\n  - repeat: true\n    text: x\n")); err == nil || !strings.Contains(err.Error(), "repeat needs match") {
		t.Fatalf("repeat without match: %v", err)
	}
}

// TestMatchSeesImages: a turn that matches an image's URL answers only a
// request whose last message carries that image, in Chat Completions'
// image_url part and in Anthropic's inline base64 source.
func TestMatchSeesImages(t *testing.T) {
	t.Parallel()
	const png = "iVBORw0KGgoAAAANSUhEUg"
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{
		{Match: "[image data:image/png;base64," + png, Text: "a PNG"},
		{Match: "[image data:image/png;base64," + png, Text: "a PNG again"},
		{Text: "no image"},
	}})
	ctx := testkit.Context(t, testTimeout)
	if got := streamOpenAI(t, srv, userTurn("what is this?")); got.content != "no image" {
		t.Fatalf("text alone got %q", got.content)
	}
	req := userTurn("")
	req.Messages = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
		{Type: openai.ChatMessagePartTypeText, Text: "what is this?"},
		{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64," + png + "AAA"}},
	}}}
	if got := streamOpenAI(t, srv, req); got.content != "a PNG" {
		t.Fatalf("Chat Completions image got %q", got.content)
	}
	params := anthropicTurn("x")
	params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewImageBlockBase64("image/png", png+"AAA"))}
	if got := streamAnthropic(t, ctx, srv, newHeaderTap(t), params); got.err != nil || len(got.msg.Content) == 0 || got.msg.Content[0].Text != "a PNG again" {
		t.Fatalf("Anthropic image got %+v", got)
	}
}

func TestRecordsRequests(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "seen"}, {Text: "seen too"}}})
	ctx := testkit.Context(t, testTimeout)
	req := userTurn("")
	req.Messages = []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: "be brief"},
		{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "what is this?"},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,iVBORw0KGgo="}},
		}},
	}
	if got := streamOpenAI(t, srv, req); got.content != "seen" {
		t.Fatal(got)
	}
	params := anthropicTurn("x")
	params.Messages = append(params.Messages,
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig-verbatim", "thought"), anthropic.NewTextBlock("y")),
		anthropic.NewUserMessage(anthropic.NewTextBlock("z")))
	if got := streamAnthropic(t, ctx, srv, newHeaderTap(t), params); got.err != nil {
		t.Fatal(got.err)
	}
	reqs, err := srv.WaitRequests(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	r := reqs[0]
	if r.Seq != 1 || r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Provider != "openai" || r.Turn != 0 || r.Status != 200 {
		t.Errorf("request 1 %+v", r)
	}
	if r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("authorization %q", r.Header.Get("Authorization"))
	}
	msgs := r.Body["messages"].([]any)
	parts := msgs[1].(map[string]any)["content"].([]any)
	image := parts[1].(map[string]any)["image_url"].(map[string]any)["url"]
	if image != "data:image/png;base64,iVBORw0KGgo=" {
		t.Errorf("image part %v", parts[1])
	}
	if r.Body["stream"] != true || r.Body["stream_options"].(map[string]any)["include_usage"] != true {
		t.Errorf("stream flags %v", r.Body)
	}
	thinking := reqs[1].Body["messages"].([]any)[1].(map[string]any)["content"].([]any)[0].(map[string]any)
	if thinking["signature"] != "sig-verbatim" || thinking["type"] != "thinking" {
		t.Errorf("thinking block sent back %v", thinking)
	}
	// Requests returns fresh copies.
	reqs[0].Body["model"] = "changed"
	if srv.Requests()[0].Body["model"] != "gpt-test" {
		t.Error("Requests shares its maps between calls")
	}

	ctxShort, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := srv.WaitRequests(ctxShort, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitRequests for a request that never comes: %v", err)
	}
}

func TestWithoutRecording(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "x"}}}, emulator.WithoutRecording())
	if got := streamOpenAI(t, srv, userTurn("x")); got.content != "x" {
		t.Fatal(got)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests recorded", n)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "kept for a good request"}}}, emulator.WithMaxBodyBytes(1024))
	ctx := testkit.Context(t, testTimeout)
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := newHeaderTap(t).client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	tests := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/embeddings", `{}`, 404, "no route"},
		{"GET", "/v1/chat/completions", ``, 405, "not allowed"},
		{"POST", "/v1/chat/completions", `{not json`, 400, "could not parse"},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
		{"POST", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400, "messages"},
		{"POST", "/v1/messages", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "max_tokens"},
		{"POST", "/v1/messages", `{"model":"m","max_tokens":5}`, 400, "messages"},
		{"POST", "/v1/chat/completions", `{"model":"` + strings.Repeat("m", 2000) + `"}`, 413, "exceeds"},
	}
	for _, tt := range tests {
		status, body := do(tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.want) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s %s %.40s: %d %s, want %d mentioning %q", tt.method, tt.path, tt.body, status, body, tt.status, tt.want)
		}
	}
	if srv.Remaining() != 1 {
		t.Errorf("bad requests used up turns: %d left", srv.Remaining())
	}
	if n := len(srv.Requests()); n != len(tests) {
		t.Errorf("%d requests recorded, want %d", n, len(tests))
	}
}

func TestInvalidScript(t *testing.T) {
	t.Parallel()
	bad := emulator.Script{Turns: []emulator.Turn{{Fault: &emulator.Fault{Kind: "boom"}}}}
	if err := emulator.New(bad).Start(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Start: %v, want the validation error", err)
	}
	// Mounted in-process, the same error answers every request.
	hs := httptest.NewServer(emulator.New(bad).Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "boom") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// TestHandlerInProcess mounts the handler on a server of the test's own.
func TestHandlerInProcess(t *testing.T) {
	t.Parallel()
	em := emulator.New(emulator.Script{Turns: []emulator.Turn{{Text: "in process"}}})
	hs := httptest.NewServer(em.Handler())
	t.Cleanup(func() { hs.Close(); em.Close() })
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = hs.URL + "/v1"
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if got := readOpenAI(stream); got.content != "in process" || got.err != nil {
		t.Errorf("%+v", got)
	}
}

// TestConcurrentPacedStreams runs many paced streams at once. With no lock
// held while streaming they overlap; one lock per stream would serialize
// them and take streams times as long as one.
func TestConcurrentPacedStreams(t *testing.T) {
	t.Parallel()
	const (
		streams = 100
		deltas  = 5
		delay   = 100 * time.Millisecond
	)
	srv := startServer(t, emulator.Script{OnExhausted: emulator.ExhaustedRepeatLast, Turns: []emulator.Turn{{
		Text: strings.Repeat("x", deltas), ChunkSize: 1, Delay: delay, Usage: emulator.Usage{Input: 1, Output: deltas},
	}}}, emulator.WithoutRecording())
	tap := newHeaderTap(t)
	tap.base.MaxIdleConnsPerHost = streams
	client := openAIClient(srv, "k", tap)
	ctx := testkit.Context(t, testTimeout)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for range streams {
		wg.Go(func() {
			stream, err := client.CreateChatCompletionStream(ctx, userTurn("x"))
			if err != nil {
				errs <- err
				return
			}
			defer stream.Close()
			got := readOpenAI(stream)
			if got.err != nil || got.contentDeltas != deltas || got.usage == nil {
				errs <- fmt.Errorf("stream: err %v, %d deltas", got.err, got.contentDeltas)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// One stream takes (deltas-1)*delay = 400ms; serialized, all of them
	// would take 40s. Half of that leaves room for a loaded machine and the
	// race detector while still catching serialization.
	serialized := streams * (deltas - 1) * delay
	if el := time.Since(start); el > serialized/2 {
		t.Errorf("%d concurrent streams took %v; serialized they take %v", streams, el, serialized)
	}
}

// TestCloseEndsStalledStreams checks that Close does not wait for a stall
// to end by itself, and that the client sees its stream break.
func TestCloseEndsStalledStreams(t *testing.T) {
	t.Parallel()
	srv := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{{Text: "abc", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 1}}}})
	stream, err := openAIClient(srv, "k", newHeaderTap(t)).CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a stalled stream")
	}
	if got := readOpenAI(stream); got.err == nil && got.finish != "" {
		t.Errorf("the stalled stream finished normally after Close: %+v", got)
	}
	srv.Close() // twice is fine
}

func TestServeStopsOnCancel(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := emulator.New(emulator.Script{Turns: []emulator.Turn{{Text: "served"}, {Text: "stalls", Fault: &emulator.Fault{Kind: emulator.FaultStall, After: 1}}}})
	ctx, cancel := context.WithCancel(testkit.Context(t, testTimeout))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, 2*time.Second) }()
	// The listener already listens, so a request waits in its backlog
	// until Serve accepts it.
	base := "http://" + ln.Addr().String()
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = base + "/v1"
	client := openai.NewClientWithConfig(cfg)
	stream, err := client.CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readOpenAI(stream); got.content != "served" {
		t.Errorf("%+v", got)
	}
	stream.Close()
	stalled, err := client.CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("still accepting connections after Serve returned")
	}
}

// TestNoGoroutineLeaks plays every kind of stream, closes the server and
// checks that the goroutine count comes back down. It does not run in
// parallel, so that other tests do not move the count.
func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		turns := []emulator.Turn{{Text: "ok", Thinking: "t"}}
		for _, f := range []emulator.Fault{
			{Kind: emulator.FaultDrop, After: 2}, {Kind: emulator.FaultMalformed, After: 2},
			{Kind: emulator.FaultStreamError, After: 2}, {Kind: emulator.FaultTruncate, After: 2},
			{Kind: emulator.FaultHTTPError, Status: 429}, {Kind: emulator.FaultStall, After: 1},
		} {
			turns = append(turns, emulator.Turn{Text: "abcdef", ChunkSize: 1, Fault: &f})
		}
		script := emulator.Script{Turns: turns}
		for _, provider := range []string{"openai", "anthropic"} {
			srv := emulator.NewServer(script)
			tap := newHeaderTap(t)
			for range turns {
				ctx, cancel := context.WithTimeout(testkit.Context(t, testTimeout), 200*time.Millisecond)
				if provider == "openai" {
					if stream, err := openAIClient(srv, "k", tap).CreateChatCompletionStream(ctx, userTurn("x")); err == nil {
						readOpenAI(stream)
						stream.Close()
					}
				} else {
					client := anthropicClient(srv, "k", tap)
					stream := client.Messages.NewStreaming(ctx, anthropicTurn("x"))
					readAnthropic(stream)
					stream.Close()
				}
				cancel()
			}
			srv.Close()
			tap.base.CloseIdleConnections()
		}
	}()
	ctx, cancel := context.WithTimeout(testkit.Context(t, testTimeout), 5*time.Second)
	defer cancel()
	if eventually.Wait(ctx, func() bool { return runtime.NumGoroutine() <= before }) != nil {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
}

// TestFaultsScript walks testdata/faults.yaml with go-openai, one request
// per turn, and checks that each failure class surfaces as documented.
func TestFaultsScript(t *testing.T) {
	t.Parallel()
	script, err := emulator.LoadScript("testdata/faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, script)
	tap := newHeaderTap(t)
	client := openAIClient(srv, "k", tap)
	status := func(err error) int {
		var apiErr *openai.APIError
		if errors.As(err, &apiErr) {
			return apiErr.HTTPStatusCode
		}
		return 0
	}
	checks := []func(err error, got openAIResult) string{
		func(err error, _ openAIResult) string {
			_, h := tap.last()
			if status(err) != 429 || h.Get("Retry-After") != "2" {
				return fmt.Sprintf("%v retry-after %q", err, h.Get("Retry-After"))
			}
			return ""
		},
		func(err error, _ openAIResult) string {
			_, h := tap.last()
			if status(err) != 503 || h.Get("Retry-After") != "Wed, 21 Oct 2037 07:28:00 GMT" {
				return fmt.Sprintf("%v retry-after %q", err, h.Get("Retry-After"))
			}
			return ""
		},
		func(err error, _ openAIResult) string {
			if status(err) != 401 {
				return fmt.Sprint(err)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			if !errors.Is(got.err, io.ErrUnexpectedEOF) {
				return fmt.Sprint(got.err)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			if got.err == nil || !strings.Contains(got.err.Error(), "reset") {
				return fmt.Sprint(got.err)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			if got.err == nil || got.chunks != 3 {
				return fmt.Sprint(got.err, got.chunks)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			var apiErr *openai.APIError
			if !errors.As(got.err, &apiErr) || apiErr.Message != "Overloaded" {
				return fmt.Sprint(got.err)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			if got.err != nil || got.finish != "" {
				return fmt.Sprint(got.err, got.finish)
			}
			return ""
		},
		func(_ error, got openAIResult) string {
			if !errors.Is(got.err, context.DeadlineExceeded) {
				return fmt.Sprint(got.err)
			}
			return ""
		},
		func(err error, got openAIResult) string {
			if err != nil || got.err != nil || got.content != "" || got.finish != "stop" {
				return fmt.Sprintf("err %v content %q finish %q chunks %d", got.err, got.content, got.finish, got.chunks)
			}
			return ""
		},
	}
	if len(checks) != len(script.Turns) {
		t.Fatalf("%d checks for %d turns", len(checks), len(script.Turns))
	}
	for i, check := range checks {
		// Only the stall needs a short deadline: it waits for the client's.
		deadline := testTimeout
		if script.Turns[i].Fault.Kind == emulator.FaultStall {
			deadline = 500 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(testkit.Context(t, testTimeout), deadline)
		var got openAIResult
		stream, err := client.CreateChatCompletionStream(ctx, userTurn("x"))
		if err == nil {
			got = readOpenAI(stream)
			stream.Close()
		}
		cancel()
		if msg := check(err, got); msg != "" {
			t.Errorf("turn %d (%s): %s", i, script.Turns[i].Name, msg)
		}
	}
}
