package loop

import (
	"context"
	"errors"
	"io"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
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
	var correction string
	lastMsg := ""
	for n := 1; ; n++ {
		msgs := make([]*penguinv1.OmniMessage, 0, len(folded)+2)
		msgs = append(msgs, folded...)
		if correction != "" {
			msgs = append(msgs, HarnessText(correction))
		}
		msgs = append(msgs, HarnessText(set.Prompt))

		reply, called, outcome, err := r.compactionRequest(ctx, msgs)
		if err != nil {
			return CompactResult{err: err}
		}
		st := outcome.GetStatus()
		if ctx.Err() != nil || st == penguinv1.StopReason_STOP_REASON_ABORTED {
			if err := end(penguinv1.StopReason_STOP_REASON_ABORTED, "", n); err != nil {
				return CompactResult{err: err}
			}
			return CompactResult{aborted: true}
		}
		if st == penguinv1.StopReason_STOP_REASON_COMPLETED {
			summary, ok := set.ExtractSummary(reply)
			switch {
			case called:
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
			correction = set.RetryNote
			st = penguinv1.StopReason_STOP_REASON_FAILED
		} else {
			lastMsg = outcome.GetMessage()
			if lastMsg == "" {
				lastMsg = enumword.Word(st)
			}
		}
		retryable := st != penguinv1.StopReason_STOP_REASON_AUTH && !outcome.GetPermanent()
		if !retryable || n > r.set.Retry.MaxRetries {
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

// compactionRequest sends one compaction request. The summary streams out
// as ordinary text between the compaction events; nothing of it joins the
// history.
func (r *runner) compactionRequest(ctx context.Context, msgs []*penguinv1.OmniMessage) (reply string, calledTool bool, outcome *penguinv1.LLMOutcome, err error) {
	req := r.request(msgs, r.set.Compaction.ThinkingLevel)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, serr := r.deps.LLM.StreamGenerate(sctx, req)
	if serr != nil {
		return "", false, outcomeFromError(serr), nil
	}
	var text string
	for {
		frame, rerr := stream.Recv()
		if rerr != nil {
			if ctx.Err() != nil {
				return text, calledTool, &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_ABORTED}, nil
			}
			o := outcomeFromError(rerr)
			if errors.Is(rerr, io.EOF) {
				o = &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_MALFORMED, Message: "the model stream ended without an outcome"}
			}
			return text, calledTool, o, nil
		}
		if o := frame.GetOutcome(); o != nil {
			return text, calledTool, o, nil
		}
		m := frame.GetMessage()
		if tu := m.GetTokenUsage(); tu != nil {
			r.mctx.Usage = omni.AddTokenCounts(r.mctx.Usage, tu.GetRequest())
			if err := r.emitDetached(ctx, r.usageEvent(tu.GetRequest())); err != nil {
				return "", false, nil, err
			}
			continue
		}
		if omni.KindOf(m) != omni.KindPartial && omni.KindOf(m) != omni.KindModel {
			continue
		}
		if t := m.GetText(); t != nil {
			text += t.GetText()
		}
		if m.GetToolCall() != nil {
			calledTool = true
		}
		if err := r.deps.Emitter.Emit(context.WithoutCancel(ctx), m); err != nil {
			return "", false, nil, err
		}
	}
}

func compactionEnd(reason penguinv1.CompactionReason, mode penguinv1.CompactionMode, status penguinv1.StopReason, msg string, attempt int) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_CompactionEnd{CompactionEnd: &penguinv1.CompactionEnd{
		Reason: reason, Mode: mode, Status: status, ErrorMessage: msg, Attempt: int32(attempt),
	}}}
}
