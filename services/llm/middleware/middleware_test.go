package middleware_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
	"github.com/penguin-agent/penguin/services/llm/middleware"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// provider answers "hi" in two deltas through the translator, as a real
// adapter does, and counts its calls.
type provider struct{ calls int }

func (p *provider) Stream(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
	p.calls++
	tr := translate.New(emit, translate.NewIDs(req.Messages))
	for _, piece := range []string{"h", "i"} {
		if fe := failure.Cancelled(ctx); fe != nil {
			return tr.Finish(fe)
		}
		tr.TextDelta(piece, nil)
		if err := tr.Err(); err != nil {
			return failure.ConsumerGone(err).Outcome()
		}
	}
	return tr.Finish(failure.Cancelled(ctx))
}

func TestChainOrder(t *testing.T) {
	var order []string
	mw := func(name string) stream.Middleware {
		return func(next stream.Streamer) stream.Streamer {
			return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
				order = append(order, name+">")
				out := next.Stream(ctx, req, emit)
				order = append(order, "<"+name)
				return out
			})
		}
	}
	s := stream.Chain(&provider{}, mw("a"), mw("b"))
	llmtest.Run(t, t.Context(), s, &stream.Request{})
	if got := order; len(got) != 4 || got[0] != "a>" || got[1] != "b>" || got[2] != "<b" || got[3] != "<a" {
		t.Errorf("order = %v", got)
	}
}

func TestFaultInjection(t *testing.T) {
	p := &provider{}
	s := stream.Chain(p, middleware.FaultInjection(
		middleware.Fault{Times: 1, Err: failure.New(penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH, "injected")},
		middleware.Fault{Match: func(r *stream.Request) bool { return r.Model == "cut" }, AfterFrames: 2},
	))
	// First call: short-circuited before the provider.
	r := llmtest.Run(t, t.Context(), s, &stream.Request{Model: "m"})
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_AUTH || p.calls != 0 {
		t.Fatalf("outcome %v after %d provider calls", r.Outcome, p.calls)
	}
	// Times is used up: the next call reaches the provider.
	if r := llmtest.Run(t, t.Context(), s, &stream.Request{Model: "m"}); r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || p.calls != 1 {
		t.Fatalf("outcome %v after %d provider calls", r.Outcome, p.calls)
	}
	// A cut lets two frames through, then the provider sees its context
	// end with the injected cause (the default transport failure).
	r = llmtest.Run(t, t.Context(), s, &stream.Request{Model: "cut"})
	if r.Outcome.GetCode() != penguinv1.FailureCode_FAILURE_CODE_TRANSPORT || r.Texts() != "h" ||
		r.Complete()[0].GetText().GetStopReason() != penguinv1.StopReason_STOP_REASON_TIMEOUT {
		t.Errorf("cut = %v\n%s", r.Outcome, llmtest.Dump(r.Frames))
	}
}

func TestLoggingLevels(t *testing.T) {
	logs := &llmtest.LogRecorder{}
	s := stream.Chain(&provider{}, middleware.Logging(slog.New(logs)), middleware.FaultInjection(
		middleware.Fault{Match: func(r *stream.Request) bool { return r.Model == "bad" },
			Err: failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, "nope")},
	))
	llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "good"})
	llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "bad"})
	ended := logs.Find("llm request ended")
	if len(ended) != 2 || ended[0].Level != slog.LevelInfo || ended[1].Level != slog.LevelWarn {
		t.Fatalf("logs:\n%s", logs.All())
	}
	if v, _ := llmtest.Attr(ended[1], "code"); v.String() != "INVALID_REQUEST" {
		t.Errorf("code = %v", v)
	}
}

// TestLoggingCompletedNote checks that a completed call's note, such as
// the output token limit's, is logged at Info as "note", and that a
// completed call without one logs neither a note nor an error.
func TestLoggingCompletedNote(t *testing.T) {
	cut := translate.OutputLimit("finish_reason length")
	logs := &llmtest.LogRecorder{}
	s := stream.Chain(stream.StreamerFunc(func(_ context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
		tr := translate.New(emit, translate.NewIDs(req.Messages))
		tr.TextDelta("so far", nil)
		if req.Model == "cut" {
			return tr.FinishCut(cut)
		}
		return tr.Finish(nil)
	}), middleware.Logging(slog.New(logs)))
	llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "cut"})
	llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "whole"})
	ended := logs.Find("llm request ended")
	if len(ended) != 2 || ended[0].Level != slog.LevelInfo || ended[1].Level != slog.LevelInfo {
		t.Fatalf("logs:\n%s", logs.All())
	}
	if v, ok := llmtest.Attr(ended[0], "note"); !ok || v.String() != cut.Note {
		t.Errorf("note = %v, want %q", v, cut.Note)
	}
	for _, key := range []string{"note", "error"} {
		if v, ok := llmtest.Attr(ended[1], key); ok {
			t.Errorf("a whole answer logged %s = %v", key, v)
		}
	}
}

// TestLoggingAtOtherLevels checks the lines of a logger at Warn (a failed
// call's line only) and at Debug (the request's line too, with its
// attributes).
func TestLoggingAtOtherLevels(t *testing.T) {
	var warn, debug bytes.Buffer
	failing := middleware.FaultInjection(middleware.Fault{Match: func(r *stream.Request) bool { return r.Model == "bad" },
		Err: failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, "nope")})
	for _, c := range []struct {
		buf   *bytes.Buffer
		level slog.Level
	}{{&warn, slog.LevelWarn}, {&debug, slog.LevelDebug}} {
		log := slog.New(slog.NewTextHandler(c.buf, &slog.HandlerOptions{Level: c.level,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey || a.Value.Kind() == slog.KindDuration {
					return slog.Attr{}
				}
				return a
			}}))
		s := stream.Chain(&provider{}, middleware.Logging(log), failing)
		llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "good", MaxTokens: 7, InputEstimate: 3})
		llmtest.Run(t, t.Context(), s, &stream.Request{Provider: "p", Model: "bad"})
	}
	const failed = `level=WARN msg="llm request ended" provider=p model=bad status=failed frames=0 code=INVALID_REQUEST error=nope permanent=false` + "\n"
	if warn.String() != failed {
		t.Errorf("at Warn:\n%s\nwant:\n%s", warn.String(), failed)
	}
	want := `level=DEBUG msg="llm request" provider=p model=good messages=0 tools=0 thinking=unspecified max_tokens=7 input_estimate=3` + "\n" +
		`level=INFO msg="llm request ended" provider=p model=good status=completed frames=6 tokens_total=0 tokens_output=0 tokens_cache_read=0 tokens_cache_write=0` + "\n" +
		`level=DEBUG msg="llm request" provider=p model=bad messages=0 tools=0 thinking=unspecified max_tokens=0 input_estimate=0` + "\n" + failed
	if debug.String() != want {
		t.Errorf("at Debug:\n%s\nwant:\n%s", debug.String(), want)
	}
}

// TestLoggingSilentCostsNothing checks that a logger that writes neither
// line (its level above Warn) costs a call no allocation: nothing is
// observed and no attribute built for lines that are dropped.
func TestLoggingSilentCostsNothing(t *testing.T) {
	out := failure.Completed()
	bare := stream.StreamerFunc(func(context.Context, *stream.Request, stream.Emit) *penguinv1.LLMOutcome { return out })
	logged := middleware.Logging(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})))(bare)
	req := &stream.Request{Provider: "p", Model: "m"}
	emit := func(*penguinv1.OmniMessage) error { return nil }
	ctx := t.Context()
	if n := testing.AllocsPerRun(100, func() { logged.Stream(ctx, req, emit) }); n != 0 {
		t.Errorf("%v allocations a call", n)
	}
}
