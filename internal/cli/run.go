package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exit statuses of a task, as the shell sees them.
const (
	ExitCompleted = 0
	ExitFailed    = 1
	ExitAborted   = 130
)

// ReattachPause is how long RunTask waits before its first attach to a
// stream that dropped, and the step by which each later one waits more:
// a run a stopping engine replica handed over has a new owner within a
// moment, and attaching again at once can only reach the replica that
// is stopping.
const ReattachPause = 250 * time.Millisecond

// pause waits d, or less when ctx ends first; it reports whether the
// whole wait passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Approver answers approval requests that reach a person.
type Approver interface {
	// Decide returns allow or deny for the call; prompt is what the call
	// will do, as lines to show before asking.
	Decide(ctx context.Context, req *penguinv1.ApprovalRequest, prompt []string) (penguinv1.Decision, error)
}

// LineApprover asks on out and reads the answer from a line of in: Enter,
// y or yes allows, n or no denies.
type LineApprover struct {
	In  *bufio.Reader
	Out io.Writer
}

// Decide prompts for one call.
func (a *LineApprover) Decide(ctx context.Context, req *penguinv1.ApprovalRequest, prompt []string) (penguinv1.Decision, error) {
	for _, l := range prompt {
		fmt.Fprintln(a.Out, l)
	}
	fmt.Fprint(a.Out, "Allow? [Y/n] ")
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := a.In.ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		return penguinv1.Decision_DECISION_DENY, ctx.Err()
	case ans := <-got:
		if ans.err != nil && ans.line == "" {
			// No one is there to answer: the safe answer is deny, said
			// on the question's line so the output goes on below it.
			fmt.Fprintln(a.Out, "n (nobody to answer: denied)")
			return penguinv1.Decision_DECISION_DENY, nil
		}
		return parseAnswer(ans.line), nil
	}
}

// parseAnswer reads a person's answer to an approval prompt: Enter, y or
// yes allows; anything else denies.
func parseAnswer(line string) penguinv1.Decision {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "", "y", "yes":
		return penguinv1.Decision_DECISION_ALLOW
	default:
		return penguinv1.Decision_DECISION_DENY
	}
}

// TaskOptions describe one task for RunTask.
type TaskOptions struct {
	SessionID     string
	Prompt        string
	Images        []string
	ThinkingLevel penguinv1.ThinkingLevel
	ApprovalMode  penguinv1.ApprovalMode
	// Approver answers approval requests; nil denies them.
	Approver Approver
	// Reattach bounds how many times a dropped stream is attached again
	// from the last event seen before RunTask gives up; the nth attach
	// waits n × ReattachPause first.
	Reattach int
	// Status, when set, is the status line under the output (which the
	// renderer then writes through): a spinner, the activity, the elapsed
	// time and tokens, or the retry countdown.
	Status *StatusLine
	// Goal, when set, makes the prompt a goal loop's objective; the exit
	// status is then ExitCompleted only when the goal completes.
	Goal *penguinv1.GoalOptions
	// Skills are the skills the task pins (RunRequest.skills).
	Skills []string
}

// eventStream is what Run and Attach streams have in common.
type eventStream interface {
	Recv() (*penguinv1.RunEvent, error)
}

type runStream struct {
	s interface {
		Recv() (*penguinv1.RunResponse, error)
	}
}

func (r runStream) Recv() (*penguinv1.RunEvent, error) {
	resp, err := r.s.Recv()
	return resp.GetEvent(), err
}

type attachStream struct {
	s interface {
		Recv() (*penguinv1.AttachResponse, error)
	}
}

func (a attachStream) Recv() (*penguinv1.RunEvent, error) {
	resp, err := a.s.Recv()
	return resp.GetEvent(), err
}

// RunTask runs one task on a session and renders it. Cancelling ctx aborts
// the task (the engine is told, and the stream is read to its end so the
// abort is shown). A stream that drops is attached again from the last
// sequence number seen, so nothing is lost. It returns the exit status.
func RunTask(ctx context.Context, engine penguinv1.EngineServiceClient, opts TaskOptions, r *Renderer) (int, error) {
	// The stream must outlive ctx so the abort can be watched to its end.
	streamCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	run, err := engine.Run(streamCtx, &penguinv1.RunRequest{
		SessionId: opts.SessionID, Prompt: opts.Prompt, Images: opts.Images,
		ThinkingLevel: opts.ThinkingLevel, ApprovalMode: opts.ApprovalMode, Goal: opts.Goal,
		Skills: opts.Skills,
	})
	if err != nil {
		return ExitFailed, err
	}
	var outcome penguinv1.GoalOutcome
	aborted := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, _ = engine.Abort(actx, &penguinv1.AbortRequest{SessionId: opts.SessionID, Reason: "you interrupted it"})
			close(aborted)
		case <-streamCtx.Done():
		}
	}()

	r.StartTask()
	// The status line's ticker reads the activity from this snapshot, so
	// only this goroutine touches the renderer.
	var activity atomic.Pointer[Activity]
	publish := func() {
		a := r.Activity()
		activity.Store(&a)
	}
	publish()
	if st := opts.Status; st != nil {
		started, color := time.Now(), r.opts.Color
		frames := spinnerFrames.Frames
		st.start(func() string {
			frame := frames[int(time.Since(started)/spinnerFrames.FPS)%len(frames)]
			return statusText(*activity.Load(), started, frame, false, color)
		}, spinnerFrames.FPS)
		defer st.end()
	}
	var stream eventStream = runStream{run}
	var last int64
	reattach := opts.Reattach
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			if st, ok := status.FromError(err); ok && (st.Code() == codes.Unavailable || st.Code() == codes.Internal) && reattach > 0 && last > 0 {
				reattach--
				// The stream asks to attach again shortly: a run handed
				// over by a stopping replica waits for its next owner.
				if !pause(streamCtx, time.Duration(opts.Reattach-reattach)*ReattachPause) {
					return ExitFailed, err
				}
				att, aerr := engine.Attach(streamCtx, &penguinv1.AttachRequest{SessionId: opts.SessionID, AfterSequence: last, UntilIdle: true})
				if aerr == nil {
					stream = attachStream{att}
					continue
				}
			}
			return ExitFailed, err
		}
		last = max(last, ev.GetSequence())
		if g := ev.GetMessage().GetGoalFinished(); g != nil {
			outcome = g.GetOutcome()
		}
		r.Event(ev)
		publish()
		if req := ev.GetApprovalRequest(); req != nil {
			decision := penguinv1.Decision_DECISION_DENY
			if opts.Approver != nil {
				if opts.Status != nil {
					opts.Status.pause()
				}
				d, derr := opts.Approver.Decide(ctx, req, r.ApprovalPrompt(req))
				if derr == nil {
					decision = d
				}
				r.Answered(decision == penguinv1.Decision_DECISION_ALLOW)
				publish()
				if opts.Status != nil {
					opts.Status.resume()
				}
			}
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, aerr := engine.Approve(actx, &penguinv1.ApproveRequest{
				SessionId: opts.SessionID, ToolCallId: req.GetToolCall().GetToolCallId(), Decision: decision, Origin: req.GetOrigin(),
			})
			cancel()
			if aerr != nil && status.Code(aerr) != codes.NotFound {
				return ExitFailed, fmt.Errorf("answer approval: %w", aerr)
			}
		}
		if s := ev.GetState(); s != nil && s.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
			break
		}
	}
	select {
	case <-aborted:
		return ExitAborted, nil
	default:
	}
	if opts.Goal != nil {
		return goalExitStatus(outcome), nil
	}
	return exitStatus(r.LastState()), nil
}

// goalExitStatus maps how a goal ended to the shell's exit status: only a
// completed goal is a success.
func goalExitStatus(o penguinv1.GoalOutcome) int {
	switch o {
	case penguinv1.GoalOutcome_GOAL_OUTCOME_COMPLETE:
		return ExitCompleted
	case penguinv1.GoalOutcome_GOAL_OUTCOME_ABORTED:
		return ExitAborted
	default:
		return ExitFailed
	}
}

// exitStatus maps how a task ended to the shell's exit status.
func exitStatus(s *penguinv1.RunStateChange) int {
	switch s.GetStatus() {
	case penguinv1.StopReason_STOP_REASON_COMPLETED:
		return ExitCompleted
	case penguinv1.StopReason_STOP_REASON_ABORTED:
		return ExitAborted
	default:
		return ExitFailed
	}
}

// ParseApprovalMode reads the CLI spelling of an approval mode.
func ParseApprovalMode(s string) (penguinv1.ApprovalMode, error) {
	switch s {
	case "allow-all":
		return penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL, nil
	case "deny-all":
		return penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL, nil
	case "read-only":
		return penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, nil
	case "always-ask":
		return penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK, nil
	}
	return 0, fmt.Errorf("approval mode %q: want allow-all, deny-all, read-only or always-ask", s)
}

// ParseThinkingLevel reads the CLI spelling of a thinking level; the empty
// string means the session's default.
func ParseThinkingLevel(s string) (penguinv1.ThinkingLevel, error) {
	if s == "" {
		return penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, nil
	}
	v, ok := enumword.Parse[penguinv1.ThinkingLevel](strings.ToLower(s))
	if !ok {
		return 0, fmt.Errorf("thinking level %q: want none, low, medium, high, xhigh or max", s)
	}
	return v, nil
}
