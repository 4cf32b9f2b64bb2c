// Package llmtest holds what the llm service's tests share: running a
// streamer and checking its frames against the contract's validator,
// picking frames out of a stream, reading what the provider emulator was
// sent, and capturing log records.
package llmtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// Result is one finished call: every frame, the outcome last.
type Result struct {
	Frames  []*penguinv1.StreamGenerateResponse
	Outcome *penguinv1.LLMOutcome
}

// Run calls s with req under a deadline, collects the frames, and fails the
// test unless they keep the streaming discipline.
func Run(t testing.TB, ctx context.Context, s stream.Streamer, req *stream.Request) Result {
	t.Helper()
	return RunObserving(t, ctx, s, req, nil)
}

// RunObserving is Run with observe, when not nil, seeing each message as it
// arrives, so that a test can act mid-stream (cancel the call at the first
// delta, say) and still get the whole stream checked.
func RunObserving(t testing.TB, ctx context.Context, s stream.Streamer, req *stream.Request, observe func(*penguinv1.OmniMessage)) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var r Result
	out := s.Stream(ctx, req, func(m *penguinv1.OmniMessage) error {
		r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
		if observe != nil {
			observe(m)
		}
		return nil
	})
	if out == nil {
		t.Fatal("streamer returned a nil outcome")
	}
	r.Outcome = out
	r.Frames = append(r.Frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: out}})
	Validate(t, r.Frames)
	return r
}

// Validate fails the test unless frames keep the streaming discipline.
func Validate(t testing.TB, frames []*penguinv1.StreamGenerateResponse) {
	t.Helper()
	if err := omni.ValidateLLMStream(frames); err != nil {
		t.Fatalf("stream breaks the contract: %v\n%s", err, Dump(frames))
	}
}

// Dump renders frames one per line, for failure messages.
func Dump(frames []*penguinv1.StreamGenerateResponse) string {
	var b strings.Builder
	for i, f := range frames {
		b.WriteString("  ")
		b.WriteString(strings.Repeat(" ", 3-len(itoa(i))))
		b.WriteString(itoa(i))
		b.WriteString(" ")
		if m := f.GetMessage(); m != nil {
			s := m.String()
			if j := strings.Index(s, "}"); j >= 0 && strings.HasPrefix(s, "timestamp:") {
				s = strings.TrimSpace(s[j+1:])
			}
			b.WriteString(s)
		} else {
			b.WriteString("OUTCOME " + f.GetOutcome().String())
		}
		b.WriteString("\n")
	}
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// Messages returns the message frames.
func (r Result) Messages() []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, f := range r.Frames {
		if m := f.GetMessage(); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// Complete returns the complete model messages, in order: what a session
// log would keep, and what the next request sends back as history.
func (r Result) Complete() []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, m := range r.Messages() {
		if omni.IsCompleteModelMessage(m) {
			out = append(out, m)
		}
	}
	return out
}

// Usage returns the last token_usage event, or nil.
func (r Result) Usage() *penguinv1.TokenUsage {
	var u *penguinv1.TokenUsage
	for _, m := range r.Messages() {
		if x := m.GetTokenUsage(); x != nil {
			u = x
		}
	}
	return u
}

// Texts joins the complete assistant texts.
func (r Result) Texts() string {
	var b strings.Builder
	for _, m := range r.Complete() {
		if t := m.GetText(); t != nil {
			b.WriteString(t.GetText())
		}
	}
	return b.String()
}

// ToolCalls returns the complete tool calls.
func (r Result) ToolCalls() []*penguinv1.ToolCall {
	var out []*penguinv1.ToolCall
	for _, m := range r.Complete() {
		if tc := m.GetToolCall(); tc != nil {
			out = append(out, tc)
		}
	}
	return out
}

// Thinking returns the complete thinking blocks.
func (r Result) Thinking() []*penguinv1.Thinking {
	var out []*penguinv1.Thinking
	for _, m := range r.Complete() {
		if th := m.GetThinking(); th != nil {
			out = append(out, th)
		}
	}
	return out
}

// Kinds lists the payload names of the message frames, for order checks.
func (r Result) Kinds() []string {
	var out []string
	for _, m := range r.Messages() {
		out = append(out, string(m.ProtoReflect().WhichOneof(m.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name()))
	}
	return out
}

// LogRecorder is a slog handler that keeps every record, for tests that
// assert on what a component logged.
type LogRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

// Enabled takes every level.
func (l *LogRecorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r.
func (l *LogRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	return nil
}

// WithAttrs ignores attrs: the tests look at record attributes only.
func (l *LogRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup ignores the group.
func (l *LogRecorder) WithGroup(string) slog.Handler { return l }

// Find returns the records whose message is msg.
func (l *LogRecorder) Find(msg string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

// All returns every record's message and attributes as text, for checks
// that nothing secret was logged.
func (l *LogRecorder) All() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.Key + "=" + a.Value.String())
			return true
		})
		b.WriteString("\n")
	}
	return b.String()
}

// Attr returns the value of key in r.
func Attr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
			return false
		}
		return true
	})
	return v, found
}

// LastBody returns the JSON body of the last request the emulator saw,
// failing the test when it saw none.
func LastBody(t testing.TB, srv *emulator.Server) map[string]any {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the emulator saw no request")
	}
	return reqs[len(reqs)-1].Body
}

// Client returns an HTTP client whose idle connections are closed when the
// test ends, so connection goroutines do not outlive it.
func Client(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return c
}

// CutCase is one scripted turn that its stop reason may have ended early,
// with what the adapter must make of it.
type CutCase struct {
	Name    string
	Turn    emulator.Turn
	Status  penguinv1.StopReason
	Code    penguinv1.FailureCode
	Message string                 // the outcome's message, exactly
	Calls   []penguinv1.StopReason // each tool call's stop reason, in order
}

// CheckCut checks the outcome of a stream that c's stop reason may have
// cut, and that its content came through as far as it went: the text whole
// and unmarked, each tool call with its arguments as streamed and marked
// with the stop reason c gives it.
func CheckCut(t testing.TB, r Result, c CutCase) {
	t.Helper()
	o := r.Outcome
	if o.GetStatus() != c.Status || o.GetCode() != c.Code || o.GetMessage() != c.Message {
		t.Fatalf("outcome = %v, want %v %v %q\n%s", o, c.Status, c.Code, c.Message, Dump(r.Frames))
	}
	if r.Texts() != c.Turn.Text {
		t.Errorf("text = %q, want %q", r.Texts(), c.Turn.Text)
	}
	for _, m := range r.Complete() {
		if s := m.GetText().GetStopReason(); s != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
			t.Errorf("text marked %v; it is whole as far as it goes", s)
		}
	}
	got := r.ToolCalls()
	if len(got) != len(c.Calls) {
		t.Fatalf("%d tool calls, want %d:\n%s", len(got), len(c.Calls), Dump(r.Frames))
	}
	for i, call := range got {
		if call.GetStopReason() != c.Calls[i] {
			t.Errorf("tool call %s marked %v, want %v", call.GetName(), call.GetStopReason(), c.Calls[i])
		}
		if call.GetArguments() != c.Turn.ToolCalls[i].Arguments {
			t.Errorf("tool call %s arguments = %q, want %q", call.GetName(), call.GetArguments(), c.Turn.ToolCalls[i].Arguments)
		}
	}
}

// FirstRequest is a first request as the engine sends it, for the
// adapters' benchmarks: a short history and twelve tools with schemas of
// a few hundred bytes each, the size of the engine's tool set.
func FirstRequest(model string) *stream.Request {
	req := &stream.Request{Model: model, System: "be brief", MaxTokens: 1000,
		Messages: []*penguinv1.OmniMessage{omni.UserText("Read hello.txt and tell me what it says")}}
	for i := range 12 {
		req.Tools = append(req.Tools, &penguinv1.ToolDefinition{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: "Does one thing to the workspace, and says what it did.",
			Parameters: `{"type": "object", "properties": {"path": {"type": "string", "description": "The file's path, relative to the workspace."},
				"offset": {"type": "integer", "description": "The first line."}, "limit": {"type": "integer"}}, "required": ["path"]}`,
		})
	}
	return req
}
