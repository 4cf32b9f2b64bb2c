package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

type openAITool struct {
	ID, Type, Name, Args string
}

// openAIResult is what a client assembles from a chat.completion.chunk
// stream.
type openAIResult struct {
	ids           map[string]bool
	objects       map[string]bool
	model         string
	content       string
	contentDeltas int
	reasoning     string
	tools         []openAITool
	toolOrder     []int // the index of every tool delta, in arrival order
	finish        openai.FinishReason
	usage         *openai.Usage
	usageChoices  int
	chunks        int
	err           error // the error that ended the stream; nil at [DONE] or EOF
}

func readOpenAI(stream *openai.ChatCompletionStream) openAIResult {
	r := openAIResult{ids: map[string]bool{}, objects: map[string]bool{}}
	for {
		chunk, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			return r
		}
		r.chunks++
		r.ids[chunk.ID] = true
		r.objects[chunk.Object] = true
		r.model = chunk.Model
		if chunk.Usage != nil {
			r.usage = chunk.Usage
			r.usageChoices = len(chunk.Choices)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != "" {
				r.content += ch.Delta.Content
				r.contentDeltas++
			}
			r.reasoning += ch.Delta.ReasoningContent
			for _, tc := range ch.Delta.ToolCalls {
				i := *tc.Index
				r.toolOrder = append(r.toolOrder, i)
				for len(r.tools) <= i {
					r.tools = append(r.tools, openAITool{})
				}
				if tc.ID != "" {
					r.tools[i].ID = tc.ID
					r.tools[i].Type = string(tc.Type)
				}
				r.tools[i].Name += tc.Function.Name
				r.tools[i].Args += tc.Function.Arguments
			}
			if ch.FinishReason != "" {
				r.finish = ch.FinishReason
			}
		}
	}
}

func streamOpenAI(t *testing.T, srv *emulator.Server, req openai.ChatCompletionRequest) openAIResult {
	t.Helper()
	client := openAIClient(srv, "sk-test", newHeaderTap(t))
	stream, err := client.CreateChatCompletionStream(testkit.Context(t, testTimeout), req)
	if err != nil {
		t.Fatalf("CreateChatCompletionStream: %v", err)
	}
	defer stream.Close()
	return readOpenAI(stream)
}

func TestOpenAIStreamTextReasoningUsage(t *testing.T) {
	t.Parallel()
	text := "Hello, wörld! Ünïcode “quotes” and \"escapes\"\n\ttoo."
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{
		Thinking:  "The user greets me; answer kindly.",
		Text:      text,
		ChunkSize: 3,
		Usage:     emulator.Usage{Input: 100, CacheRead: 900, CacheWrite: 50, Output: 42, Reasoning: 12},
	}}})
	got := streamOpenAI(t, srv, userTurn("hi"))
	if got.err != nil {
		t.Fatalf("stream error: %v", got.err)
	}
	if got.content != text {
		t.Errorf("content = %q, want %q", got.content, text)
	}
	if want := (len([]rune(text)) + 2) / 3; got.contentDeltas != want {
		t.Errorf("%d content deltas, want %d (3 characters each)", got.contentDeltas, want)
	}
	if got.reasoning != "The user greets me; answer kindly." {
		t.Errorf("reasoning_content = %q", got.reasoning)
	}
	if got.finish != openai.FinishReasonStop {
		t.Errorf("finish_reason = %q, want stop", got.finish)
	}
	if len(got.ids) != 1 || len(got.objects) != 1 || !got.objects["chat.completion.chunk"] {
		t.Errorf("chunk ids %v objects %v: want one id and object chat.completion.chunk", got.ids, got.objects)
	}
	if got.model != "gpt-test" {
		t.Errorf("model = %q, want the requested gpt-test", got.model)
	}
	u := got.usage
	if u == nil {
		t.Fatal("no usage chunk although stream_options.include_usage was set")
	}
	if got.usageChoices != 0 {
		t.Errorf("usage chunk has %d choices, want none", got.usageChoices)
	}
	if u.PromptTokens != 1050 || u.CompletionTokens != 42 || u.TotalTokens != 1092 ||
		u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 900 ||
		u.CompletionTokensDetails == nil || u.CompletionTokensDetails.ReasoningTokens != 12 {
		t.Errorf("usage = %+v (details %+v %+v)", u, u.PromptTokensDetails, u.CompletionTokensDetails)
	}
}

func TestOpenAIStreamWithoutIncludeUsage(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "ok", Usage: emulator.Usage{Input: 1, Output: 1}}}})
	req := userTurn("hi")
	req.StreamOptions = nil
	got := streamOpenAI(t, srv, req)
	if got.err != nil || got.content != "ok" {
		t.Fatalf("content %q err %v", got.content, got.err)
	}
	if got.usage != nil {
		t.Errorf("usage %+v sent although include_usage was not set", got.usage)
	}
	// Without include_usage the chunks carry no "usage" key at all.
	raw := rawOpenAIStream(t, srv, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if strings.Contains(raw, `"usage"`) {
		t.Errorf("stream without include_usage mentions usage:\n%s", raw)
	}
}

// rawOpenAIStream posts body and returns the raw SSE text.
func rawOpenAIStream(t *testing.T, srv *emulator.Server, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t, testTimeout), http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := newHeaderTap(t).client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestOpenAIStreamWireShape(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "ab", ChunkSize: 1, Usage: emulator.Usage{Input: 3, Output: 2}}}})
	raw := rawOpenAIStream(t, srv, `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`)
	frames := strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n")
	if frames[len(frames)-1] != "data: [DONE]" {
		t.Fatalf("last frame %q, want data: [DONE]", frames[len(frames)-1])
	}
	// role, "a", "b", finish, usage, [DONE]
	if len(frames) != 6 {
		t.Fatalf("%d frames, want 6:\n%s", len(frames), raw)
	}
	for i, f := range frames[:len(frames)-1] {
		var chunk map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(f, "data: ")), &chunk); err != nil {
			t.Fatalf("frame %d %q: %v", i, f, err)
		}
		for _, key := range []string{"id", "object", "created", "model", "choices"} {
			if _, ok := chunk[key]; !ok {
				t.Errorf("frame %d lacks %q: %s", i, key, f)
			}
		}
		if u, ok := chunk["usage"]; !ok || (i < 4 && u != nil) {
			t.Errorf("frame %d: usage must be null before the usage chunk: %s", i, f)
		}
	}
	if !strings.Contains(frames[0], `"delta":{"role":"assistant","content":""}`) {
		t.Errorf("first frame does not announce the role: %s", frames[0])
	}
	if !strings.Contains(frames[3], `"delta":{},"logprobs":null,"finish_reason":"stop"`) {
		t.Errorf("finish frame: %s", frames[3])
	}
	if !strings.Contains(frames[4], `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5`) {
		t.Errorf("usage frame: %s", frames[4])
	}
}

func TestOpenAIReasoningField(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Thinking: "deep thought", ReasoningField: "reasoning", Text: "42"}}})
	client := openAIClient(srv, "k", newHeaderTap(t))
	stream, err := client.CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("q"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	// go-openai does not decode "reasoning", so read the raw chunks as an
	// adapter has to.
	var reasoning, content string
	for {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Reasoning        string `json:"reasoning"`
					ReasoningContent string `json:"reasoning_content"`
					Content          string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.ReasoningContent != "" {
				t.Errorf("reasoning_content sent although reasoning_field is reasoning")
			}
			reasoning += c.Delta.Reasoning
			content += c.Delta.Content
		}
	}
	if reasoning != "deep thought" || content != "42" {
		t.Errorf("reasoning %q content %q", reasoning, content)
	}
}

func TestOpenAIStreamToolCalls(t *testing.T) {
	t.Parallel()
	calls := []emulator.ToolCall{
		{ID: "call_weather", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
		{Name: "get_time", Arguments: `{"tz":"Europe/Paris"}`},
		{ID: "call_noargs", Name: "ping"},
	}
	for _, interleave := range []bool{false, true} {
		name := "sequential"
		if interleave {
			name = "interleaved"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{
				Text:                "Checking.",
				ToolCalls:           calls,
				InterleaveToolCalls: interleave,
				ChunkSize:           5,
			}}})
			got := streamOpenAI(t, srv, userTurn("weather?"))
			if got.err != nil {
				t.Fatal(got.err)
			}
			if got.content != "Checking." {
				t.Errorf("content %q", got.content)
			}
			if got.finish != openai.FinishReasonToolCalls {
				t.Errorf("finish_reason %q, want tool_calls", got.finish)
			}
			if len(got.tools) != 3 {
				t.Fatalf("%d tool calls, want 3: %+v", len(got.tools), got.tools)
			}
			want := []openAITool{
				{ID: "call_weather", Type: "function", Name: "get_weather", Args: calls[0].Arguments},
				{ID: got.tools[1].ID, Type: "function", Name: "get_time", Args: calls[1].Arguments},
				{ID: "call_noargs", Type: "function", Name: "ping", Args: "{}"},
			}
			if !slices.Equal(got.tools, want) {
				t.Errorf("tool calls\n got %+v\nwant %+v", got.tools, want)
			}
			if !strings.HasPrefix(got.tools[1].ID, "call_") || got.tools[1].ID == got.tools[0].ID {
				t.Errorf("made-up tool id %q", got.tools[1].ID)
			}
			sorted := slices.IsSorted(got.toolOrder)
			if interleave == sorted {
				t.Errorf("tool delta order %v: interleave=%v but sorted=%v", got.toolOrder, interleave, sorted)
			}
		})
	}
}

func TestOpenAINonStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{
		{Thinking: "hmm", Text: "Answer.", Usage: emulator.Usage{Input: 10, CacheRead: 5, Output: 7}},
		{ToolCalls: []emulator.ToolCall{{ID: "c1", Name: "ls", Arguments: `{"path":"."}`}}},
	}})
	client := openAIClient(srv, "k", newHeaderTap(t))
	ctx := testkit.Context(t, testTimeout)
	resp, err := client.CreateChatCompletion(ctx, userTurn("q"))
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if resp.Object != "chat.completion" || msg.Content != "Answer." || msg.ReasoningContent != "hmm" || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage.PromptTokens != 15 || resp.Usage.CompletionTokens != 7 || resp.Usage.PromptTokensDetails.CachedTokens != 5 {
		t.Errorf("usage %+v", resp.Usage)
	}
	resp, err = client.CreateChatCompletion(ctx, userTurn("q2"))
	if err != nil {
		t.Fatal(err)
	}
	msg = resp.Choices[0].Message
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "c1" || msg.ToolCalls[0].Function.Arguments != `{"path":"."}` || resp.Choices[0].FinishReason != openai.FinishReasonToolCalls {
		t.Errorf("tool call response %+v", resp)
	}
}

func TestOpenAIHTTPFaults(t *testing.T) {
	t.Parallel()
	date := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name       string
		fault      emulator.Fault
		status     int
		typ, code  string
		retryAfter string
	}{
		{"rate limit with seconds", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "2"}, 429, "requests", "rate_limit_exceeded", "2"},
		{"unavailable with a date", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 503, RetryAfter: date}, 503, "server_error", "", date},
		{"default server error", emulator.Fault{Kind: emulator.FaultHTTPError}, 500, "server_error", "", ""},
		{"scripted auth failure", emulator.Fault{Kind: emulator.FaultAuth}, 401, "invalid_request_error", "invalid_api_key", ""},
		{"custom type and code", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Message: "too long"}, 400, "invalid_request_error", "context_length_exceeded", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "never sent", Fault: &tt.fault}}})
			tap := newHeaderTap(t)
			_, err := openAIClient(srv, "k", tap).CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error %v (%T), want *openai.APIError", err, err)
			}
			if apiErr.HTTPStatusCode != tt.status || apiErr.Type != tt.typ {
				t.Errorf("status %d type %q, want %d %q", apiErr.HTTPStatusCode, apiErr.Type, tt.status, tt.typ)
			}
			code, _ := apiErr.Code.(string)
			if code != tt.code {
				t.Errorf("code %v, want %q", apiErr.Code, tt.code)
			}
			if tt.fault.Message != "" && apiErr.Message != tt.fault.Message {
				t.Errorf("message %q, want %q", apiErr.Message, tt.fault.Message)
			}
			_, h := tap.last()
			if got := h.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if !strings.HasPrefix(h.Get("x-request-id"), "req_") {
				t.Errorf("x-request-id %q", h.Get("x-request-id"))
			}
		})
	}
}

func TestOpenAIStreamFaults(t *testing.T) {
	t.Parallel()
	text := "one two three four five six seven eight"
	tests := []struct {
		name  string
		fault emulator.Fault
		// clientDeadline, when set, bounds the client's context.
		clientDeadline time.Duration
		check          func(t *testing.T, got openAIResult)
	}{
		{"dropped connection", emulator.Fault{Kind: emulator.FaultDrop, After: 3}, 0, func(t *testing.T, got openAIResult) {
			if !errors.Is(got.err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want unexpected EOF", got.err)
			}
			if got.chunks != 3 {
				t.Errorf("%d chunks before the drop, want 3", got.chunks)
			}
		}},
		{"reset connection", emulator.Fault{Kind: emulator.FaultDrop, After: 2, Reset: true}, 0, func(t *testing.T, got openAIResult) {
			if !errors.Is(got.err, syscall.ECONNRESET) {
				t.Errorf("error %v, want connection reset", got.err)
			}
		}},
		{"malformed chunk", emulator.Fault{Kind: emulator.FaultMalformed, After: 2}, 0, func(t *testing.T, got openAIResult) {
			var syntax *json.SyntaxError
			if !errors.As(got.err, &syntax) {
				t.Errorf("error %v (%T), want a JSON syntax error", got.err, got.err)
			}
			if got.chunks != 2 {
				t.Errorf("%d chunks before the bad one, want 2", got.chunks)
			}
		}},
		{"in-stream error", emulator.Fault{Kind: emulator.FaultStreamError, After: 2, Message: "overloaded mid-stream"}, 0, func(t *testing.T, got openAIResult) {
			var apiErr *openai.APIError
			if !errors.As(got.err, &apiErr) || apiErr.Message != "overloaded mid-stream" || apiErr.Type != "server_error" {
				t.Errorf("error %v, want the scripted APIError", got.err)
			}
		}},
		{"truncated stream", emulator.Fault{Kind: emulator.FaultTruncate, After: 3}, 0, func(t *testing.T, got openAIResult) {
			// A clean EOF without [DONE]: go-openai reports io.EOF, so
			// only the missing finish_reason tells an adapter.
			if got.err != nil || got.finish != "" || got.chunks != 3 {
				t.Errorf("err %v finish %q chunks %d, want clean end after 3 chunks without finish_reason", got.err, got.finish, got.chunks)
			}
		}},
		{"stall until the client's deadline", emulator.Fault{Kind: emulator.FaultStall, After: 2}, time.Second, func(t *testing.T, got openAIResult) {
			if !errors.Is(got.err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the client's deadline", got.err)
			}
			if got.chunks != 2 {
				t.Errorf("%d chunks before the stall, want 2", got.chunks)
			}
		}},
		{"stall that recovers", emulator.Fault{Kind: emulator.FaultStall, After: 2, Duration: 150 * time.Millisecond}, 0, func(t *testing.T, got openAIResult) {
			if got.err != nil || got.content != text || got.finish != openai.FinishReasonStop {
				t.Errorf("err %v content %q finish %q, want the whole answer", got.err, got.content, got.finish)
			}
		}},
		{"empty completion", emulator.Fault{Kind: emulator.FaultEmpty}, 0, func(t *testing.T, got openAIResult) {
			if got.err != nil || got.content != "" || got.finish != openai.FinishReasonStop || got.usage == nil {
				t.Errorf("err %v content %q finish %q usage %v, want an empty but complete answer", got.err, got.content, got.finish, got.usage)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			turn := emulator.Turn{Text: text, ChunkSize: 4, Fault: &tt.fault}
			if tt.fault.Kind == emulator.FaultEmpty {
				turn = emulator.Turn{Fault: &tt.fault}
			}
			srv := startServer(t, emulator.Script{Turns: []emulator.Turn{turn}})
			ctx := testkit.Context(t, testTimeout)
			if tt.clientDeadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.clientDeadline)
				defer cancel()
			}
			start := time.Now()
			stream, err := openAIClient(srv, "k", newHeaderTap(t)).CreateChatCompletionStream(ctx, userTurn("x"))
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			got := readOpenAI(stream)
			tt.check(t, got)
			if tt.fault.Kind == emulator.FaultStall {
				wait := tt.fault.Duration
				if wait == 0 {
					wait = tt.clientDeadline
				}
				if el := time.Since(start); el < wait {
					t.Errorf("stream ended after %v, before the %v stall", el, wait)
				}
			}
		})
	}
}

func TestOpenAIPacing(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Millisecond
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "abcde", ChunkSize: 1, FirstDelay: 100 * time.Millisecond, Delay: delay}}})
	client := openAIClient(srv, "k", newHeaderTap(t))
	start := time.Now()
	stream, err := client.CreateChatCompletionStream(testkit.Context(t, testTimeout), userTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var arrivals []time.Duration
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			arrivals = append(arrivals, time.Since(start))
		}
	}
	if len(arrivals) != 5 {
		t.Fatalf("%d deltas, want 5", len(arrivals))
	}
	if arrivals[0] < 100*time.Millisecond {
		t.Errorf("first delta after %v, want at least the 100ms first_delay", arrivals[0])
	}
	// The server sends delta i no earlier than first_delay + i*delay after
	// the request; single gaps seen by the client jitter, the sum cannot.
	for i, at := range arrivals {
		if min := 100*time.Millisecond + time.Duration(i)*delay; at < min {
			t.Errorf("delta %d arrived after %v, want at least %v", i, at, min)
		}
	}
}

func TestOpenAIAPIKey(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "welcome"}}}, emulator.WithAPIKey("sk-right"))
	ctx := testkit.Context(t, testTimeout)
	tap := newHeaderTap(t)
	_, err := openAIClient(srv, "sk-wrong", tap).CreateChatCompletionStream(ctx, userTurn("x"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("wrong key: error %v, want 401 invalid_api_key", err)
	}
	if strings.Contains(apiErr.Message, "sk-wrong") {
		t.Errorf("the error echoes the key: %q", apiErr.Message)
	}
	if _, err := openAIClient(srv, "", tap).CreateChatCompletionStream(ctx, userTurn("x")); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Fatalf("no key: error %v, want 401", err)
	}
	stream, err := openAIClient(srv, "sk-right", tap).CreateChatCompletionStream(ctx, userTurn("x"))
	if err != nil {
		t.Fatalf("right key: %v", err)
	}
	defer stream.Close()
	if got := readOpenAI(stream); got.err != nil || got.content != "welcome" {
		t.Errorf("right key: content %q err %v", got.content, got.err)
	}
	// Refused requests do not use up turns.
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Status != 401 || reqs[0].Turn != -1 || reqs[2].Status != 200 || reqs[2].Turn != 0 {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestOpenAINonStreamingFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fault emulator.Fault
		check func(err error, resp openai.ChatCompletionResponse) bool
	}{
		{"drop closes without an answer", emulator.Fault{Kind: emulator.FaultDrop}, func(err error, _ openai.ChatCompletionResponse) bool {
			// The transport reports a connection closed before any
			// response as EOF, not as an HTTP status.
			var reqErr *openai.RequestError
			return errors.Is(err, io.EOF) && !errors.As(err, &reqErr)
		}},
		{"malformed body", emulator.Fault{Kind: emulator.FaultMalformed}, func(err error, _ openai.ChatCompletionResponse) bool {
			return errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{"stream error becomes a 500", emulator.Fault{Kind: emulator.FaultStreamError}, func(err error, _ openai.ChatCompletionResponse) bool {
			var apiErr *openai.APIError
			return errors.As(err, &apiErr) && apiErr.HTTPStatusCode == 500
		}},
		{"stall delays the answer", emulator.Fault{Kind: emulator.FaultStall, Duration: 100 * time.Millisecond}, func(err error, resp openai.ChatCompletionResponse) bool {
			return err == nil && resp.Choices[0].Message.Content == "body"
		}},
		{"empty", emulator.Fault{Kind: emulator.FaultEmpty}, func(err error, resp openai.ChatCompletionResponse) bool {
			return err == nil && resp.Choices[0].Message.Content == "" && resp.Choices[0].FinishReason == "stop"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			turn := emulator.Turn{Text: "body", Fault: &tt.fault}
			if tt.fault.Kind == emulator.FaultEmpty {
				turn.Text = ""
			}
			srv := startServer(t, emulator.Script{Turns: []emulator.Turn{turn}})
			start := time.Now()
			resp, err := openAIClient(srv, "k", newHeaderTap(t)).CreateChatCompletion(testkit.Context(t, testTimeout), userTurn("x"))
			if !tt.check(err, resp) {
				t.Errorf("err %v resp %+v", err, resp)
			}
			if tt.fault.Duration > 0 && time.Since(start) < tt.fault.Duration {
				t.Errorf("answered after %v, before the stall ended", time.Since(start))
			}
		})
	}
}
