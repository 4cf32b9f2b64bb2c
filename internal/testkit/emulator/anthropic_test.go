package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// anthropicResult is what the official SDK assembles from a stream.
type anthropicResult struct {
	msg    anthropic.Message
	events []string
	err    error
}

func readAnthropic(stream interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) anthropicResult {
	var r anthropicResult
	for stream.Next() {
		ev := stream.Current()
		r.events = append(r.events, ev.Type)
		if err := r.msg.Accumulate(ev); err != nil {
			r.err = err
			return r
		}
	}
	r.err = stream.Err()
	return r
}

func streamAnthropic(t *testing.T, ctx context.Context, srv *emulator.Server, tap *headerTap, params anthropic.MessageNewParams) anthropicResult {
	t.Helper()
	client := anthropicClient(srv, "sk-ant-test", tap)
	stream := client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	return readAnthropic(stream)
}

// block is the comparable part of a content block.
type block struct {
	Type, Text, Thinking, Signature, Data, ID, Name, Input string
}

func blocksOf(m anthropic.Message) []block {
	var out []block
	for _, c := range m.Content {
		b := block{Type: c.Type, Text: c.Text, Thinking: c.Thinking, Signature: c.Signature, Data: c.Data, ID: c.ID, Name: c.Name}
		if c.Type == "tool_use" {
			b.Input = string(c.Input)
		}
		out = append(out, b)
	}
	return out
}

func equalBlocks(t *testing.T, got, want []block) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d blocks, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("block %d\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

func TestAnthropicStreamEverything(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{
		Thinking:         "Two tools at once will be faster. “Ünïcode” \"quoted\"",
		Signature:        "EqQBCkYIBRgCIkB0c2lnbmF0dXJl/+==",
		RedactedThinking: []string{"EmwKAhgBEgy3va3pzix/LafPsn4a"},
		Text:             "Let me check both.",
		ToolCalls: []emulator.ToolCall{
			{ID: "toolu_01A", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{Name: "get_time", Arguments: `{"tz":"Europe/Paris"}`},
		},
		ChunkSize: 5,
		Usage:     emulator.Usage{Input: 30, CacheRead: 1200, CacheWrite: 400, Output: 77},
	}}})
	tap := newHeaderTap(t)
	got := streamAnthropic(t, testkit.Context(t, testTimeout), srv, tap, anthropicTurn("weather and time in Paris?"))
	if got.err != nil {
		t.Fatalf("stream: %v", got.err)
	}
	blocks := blocksOf(got.msg)
	if len(blocks) == 4 {
		// The made-up id is unique per request; take it as it came.
		if !strings.HasPrefix(blocks[3].ID, "toolu_") {
			t.Errorf("made-up tool id %q", blocks[3].ID)
		}
	}
	want := []block{
		{Type: "thinking", Thinking: "Two tools at once will be faster. “Ünïcode” \"quoted\"", Signature: "EqQBCkYIBRgCIkB0c2lnbmF0dXJl/+=="},
		{Type: "redacted_thinking", Data: "EmwKAhgBEgy3va3pzix/LafPsn4a"},
		{Type: "text", Text: "Let me check both."},
		{Type: "tool_use", ID: "toolu_01A", Name: "get_weather", Input: `{"city":"Paris"}`},
		{Type: "tool_use", ID: idAt(blocks, 4), Name: "get_time", Input: `{"tz":"Europe/Paris"}`},
	}
	equalBlocks(t, blocks, want)
	if got.msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop_reason %q, want tool_use", got.msg.StopReason)
	}
	u := got.msg.Usage
	if u.InputTokens != 30 || u.CacheReadInputTokens != 1200 || u.CacheCreationInputTokens != 400 || u.OutputTokens != 77 {
		t.Errorf("usage %+v", u)
	}
	if got.msg.Model != "claude-test" || got.msg.Role != "assistant" || !strings.HasPrefix(got.msg.ID, "msg_") {
		t.Errorf("message envelope: model %q role %q id %q", got.msg.Model, got.msg.Role, got.msg.ID)
	}
	if got.events[0] != "message_start" || got.events[len(got.events)-1] != "message_stop" || got.events[len(got.events)-2] != "message_delta" {
		t.Errorf("event order %v", got.events)
	}
	_, h := tap.last()
	if !strings.HasPrefix(h.Get("request-id"), "req_") || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		t.Errorf("headers %v", h)
	}
}

func idAt(blocks []block, i int) string {
	if i < len(blocks) {
		return blocks[i].ID
	}
	return ""
}

func TestAnthropicExplicitBlocks(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{
		Blocks: []emulator.Block{
			{Type: emulator.BlockThinking, Text: "first thought", Signature: "sig-1"},
			{Type: emulator.BlockText, Text: "Looking."},
			{Type: emulator.BlockToolCall, ID: "toolu_x", Name: "read", Arguments: `{"path":"a"}`},
			{Type: emulator.BlockThinking, Text: "second thought", Signature: "sig-2"},
			{Type: emulator.BlockText, Text: "Done."},
		},
		StopReason: "stop",
	}}})
	got := streamAnthropic(t, testkit.Context(t, testTimeout), srv, newHeaderTap(t), anthropicTurn("go"))
	if got.err != nil {
		t.Fatal(got.err)
	}
	equalBlocks(t, blocksOf(got.msg), []block{
		{Type: "thinking", Thinking: "first thought", Signature: "sig-1"},
		{Type: "text", Text: "Looking."},
		{Type: "tool_use", ID: "toolu_x", Name: "read", Input: `{"path":"a"}`},
		{Type: "thinking", Thinking: "second thought", Signature: "sig-2"},
		{Type: "text", Text: "Done."},
	})
	if got.msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stop_reason %q, want end_turn (scripted as the portable stop)", got.msg.StopReason)
	}
}

func TestAnthropicNonStreaming(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{
		Thinking: "t", Signature: "s", Text: "hi",
		ToolCalls: []emulator.ToolCall{{ID: "toolu_1", Name: "f", Arguments: `{"a":1}`}},
		Usage:     emulator.Usage{Input: 5, CacheRead: 6, CacheWrite: 7, Output: 8},
	}}})
	client := anthropicClient(srv, "k", newHeaderTap(t))
	msg, err := client.Messages.New(testkit.Context(t, testTimeout), anthropicTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	equalBlocks(t, blocksOf(*msg), []block{
		{Type: "thinking", Thinking: "t", Signature: "s"},
		{Type: "text", Text: "hi"},
		{Type: "tool_use", ID: "toolu_1", Name: "f", Input: `{"a":1}`},
	})
	if msg.Usage.InputTokens != 5 || msg.Usage.CacheReadInputTokens != 6 || msg.Usage.CacheCreationInputTokens != 7 || msg.Usage.OutputTokens != 8 || msg.StopReason != "tool_use" {
		t.Errorf("usage %+v stop %q", msg.Usage, msg.StopReason)
	}
}

func TestAnthropicHTTPFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fault      emulator.Fault
		status     int
		typ        anthropic.ErrorType
		retryAfter string
	}{
		{"rate limit", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 429, RetryAfter: "7"}, 429, "rate_limit_error", "7"},
		{"overloaded", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 529}, 529, "overloaded_error", ""},
		{"scripted auth failure", emulator.Fault{Kind: emulator.FaultAuth}, 401, "authentication_error", ""},
		{"raw body", emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`}, 400, "invalid_request_error", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "never", Fault: &tt.fault}}})
			got := streamAnthropic(t, testkit.Context(t, testTimeout), srv, newHeaderTap(t), anthropicTurn("x"))
			var apiErr *anthropic.Error
			if !errors.As(got.err, &apiErr) {
				t.Fatalf("error %v (%T), want *anthropic.Error", got.err, got.err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Type() != tt.typ {
				t.Errorf("status %d type %q, want %d %q", apiErr.StatusCode, apiErr.Type(), tt.status, tt.typ)
			}
			if !strings.HasPrefix(apiErr.RequestID, "req_") {
				t.Errorf("request id %q", apiErr.RequestID)
			}
			if got := apiErr.Response.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

func TestAnthropicStreamFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		fault          emulator.Fault
		clientDeadline time.Duration
		check          func(t *testing.T, got anthropicResult)
	}{
		{"dropped connection", emulator.Fault{Kind: emulator.FaultDrop, After: 4}, 0, func(t *testing.T, got anthropicResult) {
			if !errors.Is(got.err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want unexpected EOF", got.err)
			}
			if len(got.events) != 3 { // message_start, content_block_start, (ping is skipped), a delta
				t.Errorf("events before the drop %v", got.events)
			}
		}},
		{"reset connection", emulator.Fault{Kind: emulator.FaultDrop, After: 4, Reset: true}, 0, func(t *testing.T, got anthropicResult) {
			if !errors.Is(got.err, syscall.ECONNRESET) {
				t.Errorf("error %v, want connection reset", got.err)
			}
		}},
		{"malformed chunk", emulator.Fault{Kind: emulator.FaultMalformed, After: 3}, 0, func(t *testing.T, got anthropicResult) {
			var syntax *json.SyntaxError
			if !errors.As(got.err, &syntax) {
				t.Errorf("error %v (%T), want a JSON syntax error", got.err, got.err)
			}
		}},
		{"in-stream overloaded error", emulator.Fault{Kind: emulator.FaultStreamError, After: 5}, 0, func(t *testing.T, got anthropicResult) {
			var apiErr *anthropic.Error
			if !errors.As(got.err, &apiErr) || apiErr.Type() != anthropic.ErrorTypeOverloadedError {
				t.Errorf("error %v, want an overloaded_error event", got.err)
			}
		}},
		{"truncated stream", emulator.Fault{Kind: emulator.FaultTruncate, After: 5}, 0, func(t *testing.T, got anthropicResult) {
			if got.err != nil || got.msg.StopReason != "" || got.events[len(got.events)-1] == "message_stop" {
				t.Errorf("err %v stop %q events %v, want a clean end without message_delta/message_stop", got.err, got.msg.StopReason, got.events)
			}
		}},
		{"stall until the client's deadline", emulator.Fault{Kind: emulator.FaultStall, After: 4}, time.Second, func(t *testing.T, got anthropicResult) {
			if !errors.Is(got.err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the client's deadline", got.err)
			}
		}},
		{"empty completion", emulator.Fault{Kind: emulator.FaultEmpty}, 0, func(t *testing.T, got anthropicResult) {
			if got.err != nil || len(got.msg.Content) != 0 || got.msg.StopReason != anthropic.StopReasonEndTurn {
				t.Errorf("err %v content %v stop %q", got.err, got.msg.Content, got.msg.StopReason)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			turn := emulator.Turn{Text: "a fairly long answer to cut", ChunkSize: 4, Fault: &tt.fault}
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
			got := streamAnthropic(t, ctx, srv, newHeaderTap(t), anthropicTurn("x"))
			tt.check(t, got)
			if tt.clientDeadline > 0 && time.Since(start) < tt.clientDeadline {
				t.Errorf("stream ended after %v, before the client's deadline", time.Since(start))
			}
		})
	}
}

func TestAnthropicAuthAndHeaders(t *testing.T) {
	t.Parallel()
	srv := startServer(t, emulator.Script{Turns: []emulator.Turn{{Text: "ok"}}}, emulator.WithAPIKey("sk-ant-right"))
	ctx := testkit.Context(t, testTimeout)
	got := streamAnthropic(t, ctx, srv, newHeaderTap(t), anthropicTurn("x")) // sends sk-ant-test
	var apiErr *anthropic.Error
	if !errors.As(got.err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Fatalf("wrong key: %v", got.err)
	}
	client := anthropicClient(srv, "sk-ant-right", newHeaderTap(t))
	stream := client.Messages.NewStreaming(ctx, anthropicTurn("x"))
	defer stream.Close()
	if got := readAnthropic(stream); got.err != nil || blocksOf(got.msg)[0].Text != "ok" {
		t.Fatalf("right key: %v %+v", got.err, got.msg)
	}
	reqs := srv.Requests()
	// SDK v2 sends the key as a bearer token; x-api-key is checked below.
	if len(reqs) != 2 || reqs[1].Header.Get("Authorization") != "Bearer sk-ant-right" || reqs[1].Header.Get("anthropic-version") == "" {
		t.Errorf("recorded headers %+v", reqs)
	}

	// The real API insists on anthropic-version and max_tokens.
	post := func(body string, header map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := newHeaderTap(t).client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	status, body := post(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, map[string]string{"x-api-key": "sk-ant-right"})
	if status != 400 || !strings.Contains(body, "anthropic-version") || !strings.Contains(body, `"type":"error"`) {
		t.Errorf("without anthropic-version: %d %s", status, body)
	}
	status, body = post(`{"model":"m","messages":[{"role":"user","content":"x"}]}`, map[string]string{"x-api-key": "sk-ant-right", "anthropic-version": "2023-06-01"})
	if status != 400 || !strings.Contains(body, "max_tokens") {
		t.Errorf("without max_tokens: %d %s", status, body)
	}
}
