// Package framing runs one tool call inside the environment's single framing
// layer, so that every tool, builtin, custom or MCP, keeps the streaming
// discipline without knowing it: a partial_tool_call_output start, the
// tool's output as deltas, a stop, and exactly one tool_call_output whose
// output equals the joined deltas.
//
// Around the tool it applies, once for all tools: the per-call timeout,
// cancellation (the caller going away aborts the tool), the output cap (the
// head is kept and the overflow archived to a file whose path the output
// gives), vault redaction (also across chunk boundaries), "[no output]" for
// an empty result, the stop_reason priority abort > timeout > tool error >
// the tool's own verdict, and the conversion of a tool's error or panic into
// a failed output.
package framing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/tool"
)

// Sender delivers one frame to the caller. After it returns an error the
// caller is taken to be gone and later frames are dropped.
type Sender func(*penguinv1.OmniMessage) error

// Options configure one call.
type Options struct {
	// Limits are the tool's timeout and output cap.
	Limits tool.Limits
	// Ceiling caps the output, in characters, even when Limits.MaxOutput is
	// zero, so one runaway command cannot exhaust memory or exceed message
	// size limits. Zero means no ceiling.
	Ceiling int
	// Vault lists the values replaced by their names in every frame.
	Vault *redact.Vault
	// Archives receives the full text of truncated outputs; nil means
	// truncated text is not kept.
	Archives *Archives
	// Grace is how long a cancelled tool may take to return (and report
	// what it has) before the call is closed without it. Zero means
	// DefaultGrace.
	Grace time.Duration
	// Logger reports archive failures; nil discards them.
	Logger *slog.Logger
}

// DefaultGrace is the default of Options.Grace.
const DefaultGrace = 5 * time.Second

// errTimedOut is the cancellation cause of a call that ran out of time.
var errTimedOut = errors.New("tool call timed out")

// Run executes t with args as the call callID and streams the framed output
// through send. It returns the final tool_call_output, which has also been
// sent. Run never fails: every failure ends up in the output.
func Run(ctx context.Context, callID string, t tool.Tool, args string, opts Options, send Sender) *penguinv1.ToolCallOutput {
	e := newEmitter(callID, send, opts)
	e.start()

	var tctx context.Context
	var cancel context.CancelFunc
	if opts.Limits.Timeout > 0 {
		tctx, cancel = context.WithTimeoutCause(ctx, opts.Limits.Timeout, errTimedOut)
	} else {
		tctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("the tool failed unexpectedly: %v", p)}
			}
		}()
		res, err := t.Run(tctx, args, e)
		done <- outcome{res: res, err: err}
	}()

	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	var out outcome
	returned := false
	select {
	case out = <-done:
		returned = true
	case <-tctx.Done():
		timer := time.NewTimer(grace)
		select {
		case out = <-done:
			returned = true
		case <-timer.C:
		}
		timer.Stop()
	}

	f := finish{result: out.res}
	switch {
	case ctx.Err() != nil:
		f.stop = penguinv1.StopReason_STOP_REASON_ABORTED
		f.notes = append(f.notes, "[aborted]")
	case tctx.Err() != nil && errors.Is(context.Cause(tctx), errTimedOut):
		f.stop = penguinv1.StopReason_STOP_REASON_TIMEOUT
		f.notes = append(f.notes, fmt.Sprintf("[timed out after %s]", opts.Limits.Timeout))
	case out.err != nil:
		f.stop = penguinv1.StopReason_STOP_REASON_FAILED
	default:
		f.stop = out.res.StopReason
	}
	if out.err != nil && !isCancellation(out.err) {
		f.errText = out.err.Error()
	}
	if !returned {
		f.notes = append(f.notes, fmt.Sprintf("[the tool did not stop within %s of being cancelled; its further output is discarded]", grace))
	}
	return e.finish(f)
}

// isCancellation reports whether err only says that the call's context
// ended, which the abort or timeout note already says better.
func isCancellation(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errTimedOut)
}

// Reply frames a fixed answer, such as a refusal that happens before any
// tool runs, so that it keeps the same stream shape as a real call.
func Reply(ctx context.Context, callID, text string, stop penguinv1.StopReason, opts Options, send Sender) *penguinv1.ToolCallOutput {
	e := newEmitter(callID, send, opts)
	e.start()
	_, _ = e.WriteString(text)
	f := finish{stop: stop}
	if ctx.Err() != nil {
		f.stop = penguinv1.StopReason_STOP_REASON_ABORTED
	}
	return e.finish(f)
}

// finish is what the emitter needs to close a call.
type finish struct {
	stop    penguinv1.StopReason
	result  tool.Result
	errText string
	notes   []string
}

func partial(phase penguinv1.StreamEventType, callID, text string, images []string, stop penguinv1.StopReason) *penguinv1.OmniMessage {
	m := omni.PartialToolCallOutput(phase, callID, text, images...)
	m.GetPartialToolCallOutput().StopReason = stop
	return m
}

// joinNotes joins terminal markers, one per line.
func joinNotes(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		b.WriteByte('\n')
		b.WriteString(n)
	}
	return b.String()
}
