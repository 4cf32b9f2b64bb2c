package loop

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// turnResult is how one turn (a request and its reconnects) ended.
type turnResult struct {
	// committed: the model's output completed and joined the history.
	committed bool
	// aborted: the user interrupted the turn.
	aborted bool
	status  penguinv1.StopReason
	message string
	// produced is the transcript of the last attempt, for carry-over.
	produced string
	calls    []*penguinv1.ToolCall
	outputs  map[string]*penguinv1.OmniMessage
	err      error
}

// orderedOutputs returns the outputs in call order, the next request's
// input. A call with no output gets the interrupted placeholder, so every
// committed call stays paired.
func (t *turnResult) orderedOutputs() []*penguinv1.OmniMessage {
	out := make([]*penguinv1.OmniMessage, 0, len(t.calls))
	for _, c := range t.calls {
		if o, ok := t.outputs[c.GetToolCallId()]; ok {
			out = append(out, o)
			continue
		}
		out = append(out, omni.ToolCallOutput(c.GetToolCallId(), Interrupted, penguinv1.StopReason_STOP_REASON_ABORTED))
	}
	return out
}

// turn sends one request and reconnects on retryable failures.
func (r *runner) turn(ctx context.Context, input []*penguinv1.OmniMessage) (res turnResult) {
	var retried []penguinv1.StopReason
	if o := r.deps.Observer; o != nil {
		var end func(TurnEnd)
		ctx, end = o.StartTurn(ctx, r.mctx.Turns+1)
		defer func() { end(TurnEnd{Status: res.endStatus(), Retried: retried, ToolCalls: len(res.calls)}) }()
	}
	return r.attempts(ctx, input, &retried)
}

// endStatus is how the turn ended, for a TurnObserver.
func (t *turnResult) endStatus() penguinv1.StopReason {
	switch {
	case t.err != nil:
		return penguinv1.StopReason_STOP_REASON_FAILED
	case t.aborted:
		return penguinv1.StopReason_STOP_REASON_ABORTED
	case t.committed:
		return penguinv1.StopReason_STOP_REASON_COMPLETED
	case t.status == penguinv1.StopReason_STOP_REASON_UNSPECIFIED:
		return penguinv1.StopReason_STOP_REASON_FAILED
	}
	return t.status
}

// attempts sends the turn's request until it commits, fails for good or
// is aborted, and records the status of each retried attempt in retried.
func (r *runner) attempts(ctx context.Context, input []*penguinv1.OmniMessage, retried *[]penguinv1.StopReason) turnResult {
	sent := input
	for n := 1; ; n++ {
		a := newAttempt(ctx, r)
		res, retryIn := a.run(sent, n, r.set.ThinkingLevel)
		if res.committed || res.aborted || res.err != nil || retryIn < 0 {
			a.cancel()
			return res
		}
		// A retry: the tools of the failed attempt finish first (they were
		// approved and are never run again), then the wait.
		deadline := time.Now().Add(retryIn)
		aborted := a.waitTools(ctx)
		a.cancel()
		if err := a.fatalErr(); err != nil {
			return turnResult{err: err}
		}
		if aborted {
			return turnResult{aborted: true, produced: a.produced()}
		}
		*retried = append(*retried, res.status)
		// The time left, not the whole backoff: the failed attempt's tools
		// may have taken some of it.
		r.deps.Host.SetState(penguinv1.SessionState_SESSION_STATE_RETRY_WAIT, max(time.Until(deadline), 0))
		err := r.deps.Host.WaitRetry(ctx, time.Until(deadline))
		if err != nil || ctx.Err() != nil {
			return turnResult{aborted: true, produced: a.produced()}
		}
		r.deps.Host.SetState(penguinv1.SessionState_SESSION_STATE_RUNNING, 0)
		sent = withNote(input, retriedBlock(res.status, res.message, a.produced()))
	}
}

// attempt is one model request and the approvals and tool runs it started.
type attempt struct {
	r *runner
	// runCtx is the run's context: its cancellation is the abort signal.
	runCtx context.Context
	// ctx ends when the attempt is over, the run aborts or the log fails.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// lastApproval closes when the previous call's approval is decided:
	// approvals are asked one at a time, in call order.
	lastApproval chan struct{}

	// heldStop is the model stream's last stop partial, emitted together
	// with the complete message that follows it, so no other producer's
	// message lands between the two. Touched by the stream reader only.
	heldStop *penguinv1.OmniMessage

	mu        sync.Mutex
	closed    bool // set on abort: late tool output is dropped
	segs      segments
	err       error
	tr        transcript
	assistant []*penguinv1.OmniMessage
	calls     []*penguinv1.ToolCall
	outputs   map[string]*penguinv1.OmniMessage
}

func newAttempt(ctx context.Context, r *runner) *attempt {
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	close(done)
	return &attempt{r: r, runCtx: ctx, ctx: actx, cancel: cancel, lastApproval: done, outputs: map[string]*penguinv1.OmniMessage{}}
}

// emit records and publishes m unless the attempt was closed by an abort.
func (a *attempt) emit(m *penguinv1.OmniMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.emitLocked(m)
}

func (a *attempt) emitLocked(m *penguinv1.OmniMessage) error {
	if a.closed {
		return nil
	}
	return a.rawEmitLocked(m)
}

// emitTool emits a message a tool produced. Once the run is aborted,
// nothing more of a tool's reaches the log or the stream: what it had
// streamed is closed by the abort itself.
func (a *attempt) emitTool(m *penguinv1.OmniMessage) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runCtx.Err() != nil {
		return nil
	}
	return a.emitLocked(m)
}

func (a *attempt) rawEmitLocked(m *penguinv1.OmniMessage) error {
	if a.err != nil {
		return a.err
	}
	if err := a.r.deps.Emitter.Emit(context.WithoutCancel(a.ctx), m); err != nil {
		a.err = err
		a.cancel()
		return err
	}
	a.segs.observe(m)
	return nil
}

// closeModelSegments closes what the model stream left open.
func (a *attempt) closeModelSegments(status penguinv1.StopReason) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.flushStopLocked()
	for _, m := range a.segs.closing(status, func(k segKey) bool { return k.origin == "" && k.kind != "tool_call_output" }) {
		if err := a.emitLocked(m); err != nil {
			return
		}
	}
}

func (a *attempt) fatalErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

func (a *attempt) produced() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tr.String()
}

// run sends the request and reads the model stream to its outcome. It
// returns the result and, for a retryable failure within the budget, the
// wait before the retry (negative when no retry follows).
func (a *attempt) run(input []*penguinv1.OmniMessage, n int, thinking penguinv1.ThinkingLevel) (turnResult, time.Duration) {
	r := a.r
	if err := a.emit(omni.RequestBegin()); err != nil {
		return turnResult{err: err}, -1
	}
	outcome, usage := a.stream(r.request(input, thinking))
	if st := outcome.GetStatus(); a.runCtx.Err() == nil || st == penguinv1.StopReason_STOP_REASON_COMPLETED {
		if st == penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
			st = penguinv1.StopReason_STOP_REASON_FAILED
		}
		a.closeModelSegments(st)
	}
	if err := a.fatalErr(); err != nil {
		a.close()
		return turnResult{err: err}, -1
	}
	runCtx := a.runCtx
	aborted := runCtx.Err() != nil && outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED
	if outcome.GetStatus() == penguinv1.StopReason_STOP_REASON_ABORTED {
		aborted = true
	}
	if usage != nil {
		r.mctx.Usage = omni.AddTokenCounts(r.mctx.Usage, usage)
		if err := a.emitEnd(r.usageEvent(usage)); err != nil {
			return turnResult{err: err}, -1
		}
	}
	st := outcome.GetStatus()
	switch {
	case aborted:
		a.close()
		if err := a.emitEnd(omni.RequestEnd(penguinv1.StopReason_STOP_REASON_ABORTED, "", int32(n), 0)); err != nil {
			return turnResult{err: err}, -1
		}
		return turnResult{aborted: true, produced: a.produced()}, -1

	case st == penguinv1.StopReason_STOP_REASON_COMPLETED:
		// A completed outcome's message is a note, such as that the output
		// stopped at the token limit; it goes out with the request's end so
		// the user can tell an answer cut short from a finished one.
		if err := a.emit(omni.RequestEnd(st, outcome.GetMessage(), ordinal(n, st), 0)); err != nil {
			return turnResult{err: err}, -1
		}
		a.mu.Lock()
		r.mctx.History = append(r.mctx.History, input...)
		r.mctx.History = append(r.mctx.History, a.assistant...)
		calls := a.calls
		a.mu.Unlock()
		r.mctx.Turns++
		if usage != nil {
			r.mctx.LastTotal = usage.GetTotal()
		}
		res := turnResult{committed: true, status: st, calls: calls}
		if a.waitTools(runCtx) {
			res.aborted = true
		}
		if err := a.fatalErr(); err != nil {
			return turnResult{err: err}, -1
		}
		a.mu.Lock()
		res.outputs = a.outputs
		a.mu.Unlock()
		return res, -1
	}

	msg := outcome.GetMessage()
	retry := retryable(outcome)
	if retry && n <= r.set.Retry.MaxRetries {
		delay := r.set.Retry.Delay(n, time.Duration(outcome.GetRetryAfterMs())*time.Millisecond)
		if err := a.emit(omni.RequestEnd(st, msg, int32(n), max(delay.Milliseconds(), 1))); err != nil {
			return turnResult{err: err}, -1
		}
		return turnResult{status: st, message: msg}, delay
	}
	if err := a.emit(omni.RequestEnd(st, msg, int32(n), 0)); err != nil {
		return turnResult{err: err}, -1
	}
	if a.waitTools(runCtx) {
		return turnResult{aborted: true, produced: a.produced()}, -1
	}
	if err := a.fatalErr(); err != nil {
		return turnResult{err: err}, -1
	}
	if st == penguinv1.StopReason_STOP_REASON_AUTH {
		msg = "the provider rejected the credentials: " + msg
	} else if retry {
		msg = "the model request kept failing after all reconnects: " + msg
	}
	return turnResult{status: st, message: msg, produced: a.produced()}, -1
}

// emitEnd records a message that closes a request even when the run is
// being aborted.
func (a *attempt) emitEnd(m *penguinv1.OmniMessage) error {
	if err := a.r.emitDetached(a.ctx, m); err != nil {
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		return err
	}
	return nil
}

// stream reads one model stream, forwarding and recording its messages and
// scheduling approvals for its tool calls. It returns the outcome (never
// nil) and the request's token counts (nil when the stream sent none).
func (a *attempt) stream(req *penguinv1.StreamGenerateRequest) (*penguinv1.LLMOutcome, *penguinv1.TokenCounts) {
	sctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	stream, err := a.r.deps.LLM.StreamGenerate(sctx, req, grpcserver.ShareRequest())
	if err != nil {
		return outcomeFromError(err), nil
	}
	var usage *penguinv1.TokenCounts
	for {
		frame, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_MALFORMED, Message: "the model stream ended without an outcome"}, usage
			}
			return outcomeFromError(err), usage
		}
		switch f := frame.GetFrame().(type) {
		case *penguinv1.StreamGenerateResponse_Outcome:
			return f.Outcome, usage
		case *penguinv1.StreamGenerateResponse_Message:
			m := f.Message
			if tu := m.GetTokenUsage(); tu != nil {
				usage = tu.GetRequest()
				continue
			}
			switch omni.KindOf(m) {
			case omni.KindPartial:
				if isStop(m) && len(m.GetOrigin()) == 0 {
					a.heldStop = m
					continue
				}
				a.mu.Lock()
				if pt := m.GetPartialText(); pt != nil {
					a.tr.partialText(pt.GetText())
				}
				err = a.emitLocked(m)
				a.mu.Unlock()
			case omni.KindModel:
				err = a.complete(m)
			}
			if err != nil {
				return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: err.Error()}, usage
			}
		}
	}
}

// complete records one complete assistant message and, for a tool call,
// queues its approval.
func (a *attempt) complete(m *penguinv1.OmniMessage) error {
	a.mu.Lock()
	if err := a.flushStopLocked(); err != nil {
		a.mu.Unlock()
		return err
	}
	if err := a.emitLocked(m); err != nil {
		a.mu.Unlock()
		return err
	}
	a.tr.complete(m)
	a.assistant = append(a.assistant, m)
	call := m.GetToolCall()
	if call == nil {
		a.mu.Unlock()
		return nil
	}
	a.calls = append(a.calls, call)
	a.mu.Unlock()
	a.schedule(call)
	return nil
}

// flushStopLocked emits a held stop partial.
func (a *attempt) flushStopLocked() error {
	if a.heldStop == nil {
		return nil
	}
	m := a.heldStop
	a.heldStop = nil
	return a.emitLocked(m)
}

func isStop(m *penguinv1.OmniMessage) bool {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_PartialText:
		return p.PartialText.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
	case *penguinv1.OmniMessage_PartialThinking:
		return p.PartialThinking.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
	case *penguinv1.OmniMessage_PartialToolCall:
		return p.PartialToolCall.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
	case *penguinv1.OmniMessage_PartialToolCallOutput:
		return p.PartialToolCallOutput.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP
	}
	return false
}

// schedule asks for the call's approval after the previous call's, and runs
// the call when it is allowed. Approvals never block the model stream.
func (a *attempt) schedule(call *penguinv1.ToolCall) {
	prev := a.lastApproval
	done := make(chan struct{})
	a.lastApproval = done
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(done)
		select {
		case <-prev:
		case <-a.ctx.Done():
			return
		}
		id := call.GetToolCallId()
		if s := call.GetStopReason(); s != penguinv1.StopReason_STOP_REASON_UNSPECIFIED && s != penguinv1.StopReason_STOP_REASON_COMPLETED {
			a.finish(omni.ToolCallOutput(id, NotRun, penguinv1.StopReason_STOP_REASON_FAILED))
			return
		}
		dec := a.r.deps.Approver.Decide(a.ctx, call)
		if a.ctx.Err() != nil {
			return
		}
		if err := a.emit(omni.ApprovalDecision(id, dec)); err != nil {
			return
		}
		switch dec {
		case penguinv1.Decision_DECISION_ALLOW:
			a.wg.Add(1)
			go a.runTool(call)
		case penguinv1.Decision_DECISION_FORBIDDEN:
			a.finish(omni.ToolCallOutput(id, DeniedByPolicy, penguinv1.StopReason_STOP_REASON_ABORTED))
		default:
			a.finish(omni.ToolCallOutput(id, DeniedByUser, penguinv1.StopReason_STOP_REASON_ABORTED))
		}
	}()
}

func (a *attempt) runTool(call *penguinv1.ToolCall) {
	defer a.wg.Done()
	// The tool's own stop partial is held back and emitted with its
	// complete output, so parallel tools never split the pair.
	var held *penguinv1.OmniMessage
	out := a.r.deps.Tools.Execute(a.ctx, call, func(m *penguinv1.OmniMessage) {
		if len(m.GetOrigin()) == 0 && m.GetPartialToolCallOutput() != nil && isStop(m) {
			held = m
			return
		}
		_ = a.emitTool(m)
	})
	if out.GetToolCallOutput() == nil {
		out = omni.ToolCallOutput(call.GetToolCallId(), "The tool returned no output.", penguinv1.StopReason_STOP_REASON_FAILED)
	}
	out.GetToolCallOutput().ToolCallId = call.GetToolCallId()
	a.finish(out, held)
}

// finish records a call's complete output, after its held stop partial.
func (a *attempt) finish(out *penguinv1.OmniMessage, held ...*penguinv1.OmniMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.runCtx.Err() != nil {
		return
	}
	for _, h := range held {
		if h == nil {
			continue
		}
		if err := a.emitLocked(h); err != nil {
			return
		}
	}
	if err := a.emitLocked(out); err != nil {
		return
	}
	a.outputs[out.GetToolCallOutput().GetToolCallId()] = out
	a.tr.complete(out)
}

// close stops recording: after an abort, nothing the tools still produce
// reaches the log or the stream.
func (a *attempt) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		a.heldStop = nil
		for _, m := range a.segs.closing(penguinv1.StopReason_STOP_REASON_ABORTED, func(segKey) bool { return true }) {
			if err := a.rawEmitLocked(m); err != nil {
				break
			}
			if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 {
				a.outputs[o.GetToolCallId()] = m
				a.tr.complete(m)
			}
		}
	}
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// waitTools waits until every approval and tool of the attempt is done. It
// reports true when the run was aborted meanwhile; the attempt is then
// closed and its goroutines have exited.
func (a *attempt) waitTools(runCtx context.Context) bool {
	done := make(chan struct{})
	go func() {
		a.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return false
	case <-runCtx.Done():
		a.close()
		<-done
		return true
	}
}

// outcomeFromError maps an RPC failure of the llm service to an outcome:
// an invalid request fails for good, the rest is a transport failure worth
// a reconnect.
func outcomeFromError(err error) *penguinv1.LLMOutcome {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Canceled:
		return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_ABORTED, Message: st.Message()}
	case codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied:
		return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_FAILED, Message: "the llm service refused the request: " + st.Message(), Permanent: true}
	case codes.Unauthenticated:
		return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_AUTH, Message: "the llm service refused the engine's credentials: " + st.Message()}
	default:
		return &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_TIMEOUT, Message: "the llm service could not be reached: " + st.Message()}
	}
}
