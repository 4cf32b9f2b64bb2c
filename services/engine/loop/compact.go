package loop

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CompactResult is how a compaction ended.
type CompactResult struct {
	ok      bool
	aborted bool
	message string
	// next is the input of the first request of the fresh context.
	next []*penguinv1.OmniMessage
	err  error
}

// OK reports whether the context was replaced.
func (c CompactResult) OK() bool { return c.ok }

// Aborted reports whether the user interrupted the compaction.
func (c CompactResult) Aborted() bool { return c.aborted }

// Message says why a compaction failed.
func (c CompactResult) Message() string { return c.message }

// Err is set when the log could not be written.
func (c CompactResult) Err() error { return c.err }

// Compact compacts the context now, for a manual /compact: folded is the
// pending input (carry-over) that rides the compaction request. mode
// unspecified means the configured mode.
func Compact(ctx context.Context, deps Deps, set Settings, mctx *Context, mode penguinv1.CompactionMode, folded []*penguinv1.OmniMessage) CompactResult {
	r := &runner{deps: deps, set: set, mctx: mctx}
	if mode == penguinv1.CompactionMode_COMPACTION_MODE_UNSPECIFIED {
		mode = set.Compaction.Mode
	}
	cr := r.compact(ctx, penguinv1.CompactionReason_COMPACTION_REASON_MANUAL, mode, folded)
	if cr.aborted && cr.err == nil {
		res := r.abort(ctx, nil, "")
		cr.err = res.Err
	}
	return cr
}

// compact shrinks the context. The compaction request is an ordinary model
// request against the old context with the same tool set (so the provider's
// prompt cache stays valid), and it draws on the same reconnect budget; an
// unusable reply counts as a failed attempt. On failure the original context
// stands.
func (r *runner) compact(ctx context.Context, reason penguinv1.CompactionReason, mode penguinv1.CompactionMode, folded []*penguinv1.OmniMessage) CompactResult {
	if mode == penguinv1.CompactionMode_COMPACTION_MODE_UNSPECIFIED {
		mode = penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE
	}
	host := r.deps.Host
	begin := &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_CompactionBegin{CompactionBegin: &penguinv1.CompactionBegin{
		Reason: reason, Mode: mode, Context: r.mctx.LastTotal, Turns: int64(r.mctx.Turns),
	}}}
	if err := r.emitDetached(ctx, begin); err != nil {
		return CompactResult{err: err}
	}
	host.SetState(penguinv1.SessionState_SESSION_STATE_COMPACTING, 0)
	defer host.SetState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
	end := func(status penguinv1.StopReason, msg string, attempt int) error {
		return r.emitDetached(ctx, compactionEnd(reason, mode, status, msg, attempt))
	}

	if mode == penguinv1.CompactionMode_COMPACTION_MODE_DISCARD {
		if err := end(penguinv1.StopReason_STOP_REASON_COMPLETED, "", 0); err != nil {
			return CompactResult{err: err}
		}
		note := HarnessText(Block("context_discarded", "The earlier context was dropped to free room. Continue the task from what you can see now; read files again as needed."))
		return r.freshContext(ctx, note)
	}

	// The texts and the summary format are the agent's (agentstate owns
	// their defaults); the loop has none of its own, so what the model
	// reads never depends on which layer filled a field in.
	set := r.set.Compaction
	if set.Prompt == "" || set.ExtractSummary == nil || set.WrapSummary == nil {
		const msg = "summarize compaction is not configured: it needs a prompt, a summary reader and a summary wrapper"
		if err := end(penguinv1.StopReason_STOP_REASON_FAILED, msg, 0); err != nil {
			return CompactResult{err: err}
		}
		return CompactResult{message: msg}
	}
	// History is only ever appended to, so the provider's prompt cache
	// stays valid from one attempt to the next: a rejected reply stays in
	// the retry's history after the request that produced it, its tool
	// calls answered, followed by the corrective note and the prompt again.
	// A transport failure commits nothing, and its retry resends the same
	// request. The session's own context is left as it was until a summary
	// is adopted.
	history := r.mctx.History
	input := make([]*penguinv1.OmniMessage, 0, len(folded)+1)
	input = append(append(input, folded...), HarnessText(set.Prompt))
	lastMsg := ""
	for n := 1; ; n++ {
		reply, outcome, err := r.compactionRequest(ctx, history, input)
		if err != nil {
			return CompactResult{err: err}
		}
		// Tools never run during a compaction: each call of the reply is
		// answered at once, whatever the outcome, so every call in the
		// log has its output.
		answers := make([]*penguinv1.OmniMessage, 0, len(reply.calls))
		for _, c := range reply.calls {
			o := omni.ToolCallOutput(c.GetToolCallId(), NotRunCompacting, penguinv1.StopReason_STOP_REASON_FAILED)
			if err := r.emitDetached(ctx, o); err != nil {
				return CompactResult{err: err}
			}
			answers = append(answers, o)
		}
		st := outcome.GetStatus()
		if ctx.Err() != nil || st == penguinv1.StopReason_STOP_REASON_ABORTED {
			if err := end(penguinv1.StopReason_STOP_REASON_ABORTED, "", n); err != nil {
				return CompactResult{err: err}
			}
			return CompactResult{aborted: true}
		}
		if st == penguinv1.StopReason_STOP_REASON_COMPLETED {
			summary, ok := set.ExtractSummary(reply.text)
			switch {
			case len(reply.calls) > 0:
				lastMsg = "the reply called a tool"
			case !ok || summary == "":
				lastMsg = "the reply held no summary"
			default:
				att := 0
				if n > 1 {
					att = n
				}
				if err := end(penguinv1.StopReason_STOP_REASON_COMPLETED, "", att); err != nil {
					return CompactResult{err: err}
				}
				return r.freshContext(ctx, HarnessText(set.WrapSummary(summary)))
			}
			history = slices.Concat(history, input, reply.messages)
			input = answers
			if set.RetryNote != "" {
				input = append(input, HarnessText(set.RetryNote))
			}
			input = append(input, HarnessText(set.Prompt))
			st = penguinv1.StopReason_STOP_REASON_FAILED
		} else {
			lastMsg = outcome.GetMessage()
			if lastMsg == "" {
				lastMsg = enumword.Word(st)
			}
		}
		// A reply without a usable summary is asked for again; a failed
		// request follows the ladder's rule.
		retry := outcome.GetStatus() == penguinv1.StopReason_STOP_REASON_COMPLETED || retryable(outcome)
		if !retry || n > r.set.Retry.MaxRetries {
			if err := end(penguinv1.StopReason_STOP_REASON_FAILED, lastMsg, n); err != nil {
				return CompactResult{err: err}
			}
			return CompactResult{message: lastMsg}
		}
		delay := r.set.Retry.Delay(n, time.Duration(outcome.GetRetryAfterMs())*time.Millisecond)
		host.SetState(penguinv1.SessionState_SESSION_STATE_RETRY_WAIT, delay)
		if err := host.WaitRetry(ctx, delay); err != nil || ctx.Err() != nil {
			if err := end(penguinv1.StopReason_STOP_REASON_ABORTED, "", n); err != nil {
				return CompactResult{err: err}
			}
			return CompactResult{aborted: true}
		}
		host.SetState(penguinv1.SessionState_SESSION_STATE_COMPACTING, 0)
	}
}

// freshContext starts a new model context whose first input is first.
func (r *runner) freshContext(ctx context.Context, first *penguinv1.OmniMessage) CompactResult {
	if err := r.deps.Host.StartContext(context.WithoutCancel(ctx)); err != nil {
		return CompactResult{err: err}
	}
	r.mctx.History = nil
	r.mctx.Turns = 0
	r.mctx.LastTotal = 0
	if err := r.emitDetached(ctx, first); err != nil {
		return CompactResult{err: err}
	}
	return CompactResult{ok: true, next: []*penguinv1.OmniMessage{first}}
}

// compactionReply is what one compaction request produced.
type compactionReply struct {
	// text is the reply's complete assistant text, where the summary is.
	text string
	// messages are the reply's complete messages, as the model wrote them.
	messages []*penguinv1.OmniMessage
	// calls are the tool calls among them.
	calls []*penguinv1.ToolCall
}

// compactionRequest sends one compaction request with history and input.
// The summary streams out as ordinary text between the compaction events;
// nothing of it joins the session's context. A segment the stream leaves
// open is closed with the request's status, so a watcher never sees one
// that does not end.
func (r *runner) compactionRequest(ctx context.Context, history, input []*penguinv1.OmniMessage) (compactionReply, *penguinv1.LLMOutcome, error) {
	var (
		reply compactionReply
		segs  segments
	)
	emit := func(m *penguinv1.OmniMessage) error {
		if err := r.emitDetached(ctx, m); err != nil {
			return err
		}
		segs.observe(m)
		if omni.KindOf(m) == omni.KindModel {
			reply.messages = append(reply.messages, m)
			if t := m.GetText(); t != nil {
				reply.text += t.GetText()
			}
			if c := m.GetToolCall(); c != nil {
				reply.calls = append(reply.calls, c)
			}
		}
		return nil
	}
	outcome, err := r.compactionStream(ctx, history, input, emit)
	if err != nil {
		return compactionReply{}, nil, err
	}
	status := outcome.GetStatus()
	if ctx.Err() != nil && status != penguinv1.StopReason_STOP_REASON_COMPLETED {
		status = penguinv1.StopReason_STOP_REASON_ABORTED
	}
	for _, m := range segs.closing(status, func(k segKey) bool { return k.origin == "" }) {
		if err := emit(m); err != nil {
			return compactionReply{}, nil, err
		}
	}
	return reply, outcome, nil
}

// compactionStream reads one compaction request's stream, passing its
// partials and complete messages to emit, and returns the outcome (never
// nil). An error means the log could not be written.
func (r *runner) compactionStream(ctx context.Context, history, input []*penguinv1.OmniMessage, emit func(*penguinv1.OmniMessage) error) (*penguinv1.LLMOutcome, error) {
	req := r.request(input, r.set.Compaction.ThinkingLevel)
	req.History = history
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, serr := r.deps.LLM.StreamGenerate(sctx, req, grpcserver.ShareRequest())
	if serr != nil {
		return outcomeFromError(serr), nil
	}
	for {
		frame, rerr := stream.Recv()
		if rerr != nil {
			if ctx.Err() != nil {
				return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_ABORTED}, nil
			}
			if errors.Is(rerr, io.EOF) {
				return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_MALFORMED, Message: "the model stream ended without an outcome"}, nil
			}
			return outcomeFromError(rerr), nil
		}
		if o := frame.GetOutcome(); o != nil {
			return o, nil
		}
		m := frame.GetMessage()
		if tu := m.GetTokenUsage(); tu != nil {
			r.mctx.Usage = omni.AddTokenCounts(r.mctx.Usage, tu.GetRequest())
			if err := r.emitDetached(ctx, r.usageEvent(tu.GetRequest())); err != nil {
				return nil, err
			}
			continue
		}
		if k := omni.KindOf(m); k != omni.KindPartial && k != omni.KindModel {
			continue
		}
		if err := emit(m); err != nil {
			return nil, err
		}
	}
}

func compactionEnd(reason penguinv1.CompactionReason, mode penguinv1.CompactionMode, status penguinv1.StopReason, msg string, attempt int) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
		Reason: reason, Mode: mode, Status: status, ErrorMessage: msg, Attempt: int32(attempt),
	}}}
}
