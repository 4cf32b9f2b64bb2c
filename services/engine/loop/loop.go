// Package loop drives one task of a session: model requests (turns) with
// their approvals and tool runs, reconnects with backoff, abort carry-over,
// steering delivery and compaction.
//
// The loop owns the order of the model context and nothing else: every
// message goes out through an Emitter, which records it before any client
// sees it, and everything about the session around the task (steering
// queues, retry waits, the head of a fresh context) is asked of a Host. The
// llm service is stateless, so each request carries the committed history.
package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/grpc"
)

// LLM is the part of the llm service the loop calls.
type LLM interface {
	StreamGenerate(ctx context.Context, in *penguinv1.StreamGenerateRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[penguinv1.StreamGenerateResponse], error)
}

// Tools runs approved tool calls.
type Tools interface {
	// Execute runs one approved call. It passes the tool's partial outputs
	// and any forwarded messages to forward as they come, and returns the
	// complete tool_call_output. It never fails: an error becomes an
	// output with a stop reason.
	Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage
}

// Approver decides on one tool call. It may wait for a person; it returns
// deny when it cannot decide, and any decision once ctx is done is ignored.
type Approver interface {
	Decide(ctx context.Context, call *penguinv1.ToolCall) penguinv1.Decision
}

// Emitter records a message in the session's log when it belongs there and
// then publishes it to the session's watchers, in that order. An error means
// the message could not be recorded and was not published.
type Emitter interface {
	Emit(ctx context.Context, m *penguinv1.OmniMessage) error
}

// Host is the session around a task.
type Host interface {
	// TakeInput returns the input queued for the next request (steering,
	// background completion reports) and empties the queue. The loop
	// records the messages before sending them.
	TakeInput() []*penguinv1.OmniMessage
	// SetState reports what the task is doing; retryIn is the time left
	// of the wait in retry_wait, which WaitRetry then waits. A host makes
	// the wait open to RetryNow before it reports it.
	SetState(state penguinv1.SessionState, retryIn time.Duration)
	// WaitRetry waits d before a reconnect, or less when RetryNow cuts the
	// wait short. It returns ctx's error when the task is aborted.
	WaitRetry(ctx context.Context, d time.Duration) error
	// StartContext records the head of a fresh model context after a
	// compaction: the session_meta and the tool list.
	StartContext(ctx context.Context) error
}

// Deps are the parts a task talks to.
type Deps struct {
	LLM      LLM
	Tools    Tools
	Approver Approver
	Emitter  Emitter
	Host     Host
	// Observer watches each turn; nil watches nothing.
	Observer TurnObserver
}

// TurnObserver watches the turns of a task, for traces and metrics.
type TurnObserver interface {
	// StartTurn is called before the first request of turn n (counted
	// from 1 in the current context). The turn runs in the returned
	// context, so what it calls (the model request, approvals, tool
	// calls) can carry the turn's trace; end is called once, when the
	// turn is over.
	StartTurn(ctx context.Context, n int) (context.Context, func(TurnEnd))
}

// TurnEnd is how a turn ended, for a TurnObserver.
type TurnEnd struct {
	// Status is completed when the model's output was committed, else
	// aborted or the failed request's status (failed when the log could
	// not be written).
	Status penguinv1.StopReason
	// Retried holds the status of each failed attempt that was retried.
	Retried []penguinv1.StopReason
	// ToolCalls counts the tool calls the model asked for.
	ToolCalls int
}

// Context is the model context of a session: what the next request sends
// as history, plus the counters compaction triggers on.
type Context struct {
	// History is the committed history, complete messages in order.
	History []*penguinv1.OmniMessage
	// Turns counts the committed requests in this context.
	Turns int
	// LastTotal is the token total of the last committed request.
	LastTotal int64
	// Usage is the session's cumulative token counts.
	Usage *penguinv1.TokenCounts
}

// Compaction configures when and how a context is compacted.
type Compaction struct {
	// ContextThreshold is the effective context-token threshold (already
	// capped by the model's window); zero or less disables the context
	// trigger.
	ContextThreshold int64
	// TurnsThreshold is the turn threshold; zero or less disables it.
	TurnsThreshold int
	// Mode is summarize or discard; unspecified means summarize.
	Mode penguinv1.CompactionMode
	// Prompt asks the model for the summary. Prompt, ExtractSummary and
	// WrapSummary are required in summarize mode: the loop has no texts of
	// its own (the agent state owns them and their defaults), and a
	// summarize compaction without them fails with a message saying so.
	Prompt string
	// RetryNote goes ahead of the prompt after an unusable reply; empty
	// sends none.
	RetryNote string
	// ExtractSummary picks the summary out of the model's reply.
	ExtractSummary func(reply string) (string, bool)
	// WrapSummary turns the summary into the text that opens the fresh
	// context.
	WrapSummary func(summary string) string
	// ThinkingLevel is used for compaction requests (the session default,
	// not the task's).
	ThinkingLevel penguinv1.ThinkingLevel
}

// Settings are the fixed parameters of one task.
type Settings struct {
	Model *penguinv1.ModelRef
	// Project is the session's project: the llm service lets its requests
	// use the project's provider routes beside the global ones.
	Project          string
	SystemPrompt     string
	Tools            []*penguinv1.ToolDefinition
	ThinkingLevel    penguinv1.ThinkingLevel
	MaxTokens        int64
	RequestTimeoutMs *int64
	ContextWindow    int64
	// Price is the model's price the gateway computes costs with (a
	// project's setting); nil leaves it to the gateway's table.
	Price *penguinv1.ModelPrice
	// MaxTurns caps the requests of one task; zero or less is unlimited.
	MaxTurns   int
	Retry      Retry
	Compaction Compaction
}

// Aborted is the cancellation cause a session gives when the user aborts a
// task; its reason is recorded in the abort event.
type Aborted struct{ Reason string }

func (a *Aborted) Error() string {
	if a.Reason == "" {
		return "aborted"
	}
	return "aborted: " + a.Reason
}

// Result is how a task ended.
type Result struct {
	// Status is completed, aborted, failed or auth.
	Status penguinv1.StopReason
	// Message says why, when the task did not simply complete.
	Message string
	// CarryOver is the input the next run must send first: tool results
	// and input the model has not seen yet, and Note.
	CarryOver []*penguinv1.OmniMessage
	// Note is the part of CarryOver that exists only in memory (never in
	// the log): the text block describing an interrupted or failed
	// request. The rest of the carry-over can be rebuilt from the log.
	Note string
	// Err is set when the log could not be written; the task stopped
	// because nothing more could be recorded.
	Err error
}

// Run runs one task: input is the first request's new messages (carry-over
// first, then the prompt), already recorded by the caller. mctx is updated
// as turns commit. Cancelling ctx aborts the task; a cause of type
// *Aborted gives the reason.
func Run(ctx context.Context, deps Deps, set Settings, mctx *Context, input []*penguinv1.OmniMessage) Result {
	r := &runner{deps: deps, set: set, mctx: mctx}
	return r.run(ctx, input)
}

// Resume runs a task that an engine stopped in the middle of. unasked are
// committed tool calls that were waiting for approval when it stopped:
// each is asked for again, in order, and run when allowed, and its output
// replaces the placeholder for it in input. The task then goes on as Run
// with input.
func Resume(ctx context.Context, deps Deps, set Settings, mctx *Context, unasked []*penguinv1.ToolCall, input []*penguinv1.OmniMessage) Result {
	r := &runner{deps: deps, set: set, mctx: mctx}
	if len(unasked) > 0 {
		a := newAttempt(ctx, r)
		for _, c := range unasked {
			a.schedule(c)
		}
		aborted := a.waitTools(ctx)
		a.cancel()
		if err := a.fatalErr(); err != nil {
			return r.fatal(err, input)
		}
		a.mu.Lock()
		for i, m := range input {
			if o, ok := a.outputs[m.GetToolCallOutput().GetToolCallId()]; ok && m.GetToolCallOutput() != nil {
				input[i] = o
			}
		}
		a.mu.Unlock()
		if aborted {
			return r.abort(ctx, input, "")
		}
	}
	return r.run(ctx, input)
}

type runner struct {
	deps Deps
	set  Settings
	mctx *Context
}

func (r *runner) run(ctx context.Context, input []*penguinv1.OmniMessage) Result {
	turns := 0
	for {
		if ctx.Err() != nil {
			return r.abort(ctx, input, "")
		}
		more, err := r.takeInput(ctx)
		if err != nil {
			return r.fatal(err, input)
		}
		input = append(input, more...)
		tr := r.turn(ctx, input)
		if tr.err != nil {
			return r.fatal(tr.err, input)
		}
		if !tr.committed {
			switch {
			case tr.aborted:
				return r.abort(ctx, input, abortedBlock(tr.produced))
			default:
				note := ""
				if tr.produced != "" {
					note = retriedBlock(tr.status, tr.message, tr.produced)
				}
				return Result{Status: tr.status, Message: tr.message, CarryOver: withNote(input, note), Note: note}
			}
		}
		turns++
		next := tr.orderedOutputs()
		if tr.aborted {
			return r.abort(ctx, next, "")
		}
		if len(tr.calls) == 0 {
			more, err := r.takeInput(ctx)
			if err != nil {
				return r.fatal(err, nil)
			}
			if len(more) > 0 {
				input = more
				continue
			}
			if reason := r.trigger(); reason != penguinv1.CompactionReason_COMPACTION_REASON_UNSPECIFIED {
				cr := r.compact(ctx, reason, r.set.Compaction.Mode, nil)
				switch {
				case cr.err != nil:
					return r.fatal(cr.err, nil)
				case cr.aborted:
					return r.abort(ctx, nil, "")
				case !cr.ok:
					return Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED, Message: "the task completed, but compacting the context failed: " + cr.message}
				}
				return Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED, CarryOver: cr.next}
			}
			return Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}
		}
		if r.set.MaxTurns > 0 && turns >= r.set.MaxTurns {
			return Result{
				Status:    penguinv1.StopReason_STOP_REASON_COMPLETED,
				Message:   fmt.Sprintf("the task reached max_turns (%d); the pending tool results go to the model with the next prompt", r.set.MaxTurns),
				CarryOver: next,
			}
		}
		input = next
		if reason := r.trigger(); reason != penguinv1.CompactionReason_COMPACTION_REASON_UNSPECIFIED {
			more, err := r.takeInput(ctx)
			if err != nil {
				return r.fatal(err, input)
			}
			input = append(input, more...)
			cr := r.compact(ctx, reason, r.set.Compaction.Mode, input)
			switch {
			case cr.err != nil:
				return r.fatal(cr.err, input)
			case cr.aborted:
				return r.abort(ctx, input, "")
			case !cr.ok:
				// An abandoned compaction is made up later, never patched
				// over: the run ends like an interruption and the next
				// run resends the pending input.
				msg := "compacting the context failed: " + cr.message
				if err := r.emitDetached(ctx, omni.Abort(msg)); err != nil {
					return r.fatal(err, input)
				}
				return Result{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: msg, CarryOver: input}
			}
			input = cr.next
		}
	}
}

// takeInput drains the host's queue at an input assembly and records it.
func (r *runner) takeInput(ctx context.Context) ([]*penguinv1.OmniMessage, error) {
	msgs := r.deps.Host.TakeInput()
	for _, m := range msgs {
		if err := r.emitDetached(ctx, m); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// abort records the abort event, the last message of an aborted run.
func (r *runner) abort(ctx context.Context, carry []*penguinv1.OmniMessage, note string) Result {
	reason := ""
	var a *Aborted
	if errors.As(context.Cause(ctx), &a) {
		reason = a.Reason
	}
	res := Result{Status: penguinv1.StopReason_STOP_REASON_ABORTED, Message: reason, CarryOver: withNote(carry, note), Note: note}
	if err := r.emitDetached(ctx, omni.Abort(reason)); err != nil {
		res.Err = err
	}
	return res
}

func (r *runner) fatal(err error, carry []*penguinv1.OmniMessage) Result {
	return Result{
		Status:    penguinv1.StopReason_STOP_REASON_FAILED,
		Message:   "the session log could not be written: " + err.Error(),
		CarryOver: carry,
		Err:       err,
	}
}

// emitDetached records a message even while the task is being aborted: the
// abort event and the end of an interrupted request must reach the log.
func (r *runner) emitDetached(ctx context.Context, m *penguinv1.OmniMessage) error {
	return r.deps.Emitter.Emit(context.WithoutCancel(ctx), m)
}

func (r *runner) trigger() penguinv1.CompactionReason {
	c := r.set.Compaction
	if c.ContextThreshold > 0 && r.mctx.LastTotal >= c.ContextThreshold {
		return penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT
	}
	if c.TurnsThreshold > 0 && r.mctx.Turns >= c.TurnsThreshold {
		return penguinv1.CompactionReason_COMPACTION_REASON_TURNS
	}
	return penguinv1.CompactionReason_COMPACTION_REASON_UNSPECIFIED
}

// request builds a model request from the context's history, the new
// messages and the task's settings. The request is sent shared
// (grpcserver.ShareRequest): in one process the llm service reads the
// loop's own messages, not copies, so the loop never changes a message
// once it is in a request, nor a slot of the slices sent. The history
// only grows by append, which writes past the length a request saw, and
// is replaced, never cut back and refilled, at a compaction; a message is
// complete (a tool output's id set, a segment closed) before it joins a
// request's input, and an input grows or changes only in a new slice or
// before it is sent (a retry's note goes into a copy); the settings'
// model, tools, price and timeout are made for the task and only read.
// TestRequestsUnchanged holds the loop to it.
func (r *runner) request(newMessages []*penguinv1.OmniMessage, thinking penguinv1.ThinkingLevel) *penguinv1.StreamGenerateRequest {
	return &penguinv1.StreamGenerateRequest{
		Model:            r.set.Model,
		Project:          r.set.Project,
		History:          r.mctx.History,
		NewMessages:      newMessages,
		Tools:            r.set.Tools,
		SystemPrompt:     r.set.SystemPrompt,
		ThinkingLevel:    thinking,
		MaxTokens:        r.set.MaxTokens,
		RequestTimeoutMs: r.set.RequestTimeoutMs,
		ContextWindow:    r.set.ContextWindow,
		Price:            r.set.Price,
	}
}

// usageEvent is the token_usage the engine emits for a request: the
// session's running totals (its cost included, see omni.AddTokenCounts)
// and the request's own counts, for the session's model.
func (r *runner) usageEvent(request *penguinv1.TokenCounts) *penguinv1.OmniMessage {
	m := omni.TokenUsage(r.mctx.Usage, request)
	tu := m.GetTokenUsage()
	tu.Provider, tu.ModelId = r.set.Model.GetProvider(), r.set.Model.GetModelId()
	return m
}

func withNote(carry []*penguinv1.OmniMessage, note string) []*penguinv1.OmniMessage {
	if note == "" {
		return carry
	}
	out := make([]*penguinv1.OmniMessage, 0, len(carry)+1)
	return append(append(out, carry...), HarnessText(note))
}

// ordinal is the attempt number stamped on request_end: absent on a clean
// first try.
func ordinal(n int, status penguinv1.StopReason) int32 {
	if n == 1 && status == penguinv1.StopReason_STOP_REASON_COMPLETED {
		return 0
	}
	return int32(n)
}
