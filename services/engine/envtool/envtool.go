// Package envtool runs approved tool calls in an environment of the
// environment service and turns every way that can go wrong into a tool
// output, because the agent loop never sees a tool fail any other way.
package envtool

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client is the part of the environment service an Executor calls.
type Client interface {
	ExecuteTool(ctx context.Context, in *penguinv1.ExecuteToolRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[penguinv1.ExecuteToolResponse], error)
}

// Executor runs tool calls in one environment.
type Executor struct {
	// Target returns the client and environment id to use now.
	Target func() (Client, string)
	// Recreate, when set, creates a new environment for the session when
	// the old one, gone, is gone; calls that find the same environment
	// gone at once must make one new environment between them, so
	// Recreate does nothing when gone was replaced already. When the
	// environment service no longer knows the environment (it restarted,
	// or it was disposed of while idle), that happens at once and the call
	// is sent again, since it never ran. When the replica that held the
	// environment cannot be reached (its host is gone), the call that
	// found out fails, because whatever it did there is lost, and the new
	// environment is created before the next call.
	Recreate func(ctx context.Context, why Reason, gone string) error

	// lost is set when the environment's replica could not be reached:
	// the next call recreates the environment first.
	lost atomic.Bool
}

// Reason says why an environment is recreated.
type Reason string

const (
	// Missing: the environment service answered that it does not know
	// the environment.
	Missing Reason = "missing"
	// Unreachable: the replica that held the environment could not be
	// reached.
	Unreachable Reason = "unreachable"
)

// Execute runs one call, passing partial outputs to forward, and returns
// the complete tool_call_output. When the stream breaks in the middle of
// the output, the open segment is closed with a note saying so, and the
// complete output is what was streamed plus that note, so the streaming
// discipline holds for whoever watches.
func (e *Executor) Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	r := &reader{call: call, forward: forward}
	if e.Recreate != nil && e.lost.Swap(false) {
		_, lost := e.Target()
		if err := e.Recreate(ctx, Unreachable, lost); err != nil {
			e.lost.Store(true)
			return r.fail("the session's environment was lost with its host, and a new one could not be created: "+err.Error(), penguinv1.StopReason_STOP_REASON_FAILED)
		}
	}
	client, envID := e.Target()
	out, err := e.once(ctx, r, client, envID)
	if status.Code(err) == codes.NotFound && e.Recreate != nil && ctx.Err() == nil && !r.open && !r.stopped {
		if rerr := e.Recreate(ctx, Missing, envID); rerr != nil {
			return r.fail("the session's environment was gone and could not be created again: "+rerr.Error(), penguinv1.StopReason_STOP_REASON_FAILED)
		}
		client, envID = e.Target()
		out, err = e.once(ctx, r, client, envID)
	}
	if err != nil {
		if ctx.Err() != nil {
			return r.fail(loop.CallAborted, penguinv1.StopReason_STOP_REASON_ABORTED)
		}
		if status.Code(err) == codes.Unavailable {
			next := "The tool call did not finish there, and its effects may be lost."
			if e.Recreate != nil {
				e.lost.Store(true)
				next += " The next tool call runs in a fresh environment on another replica: files and processes of the old one may be gone."
			}
			return r.fail("the environment replica that held this session's environment cannot be reached ("+status.Convert(err).Message()+"). "+next, penguinv1.StopReason_STOP_REASON_FAILED)
		}
		return r.fail("the environment service failed: "+status.Convert(err).Message(), penguinv1.StopReason_STOP_REASON_FAILED)
	}
	return out
}

// reader follows one call's output stream.
type reader struct {
	call    *penguinv1.ToolCall
	forward func(*penguinv1.OmniMessage)
	open    bool // a partial segment was started and not stopped
	stopped bool // a segment was stopped and its complete output is due
	partial strings.Builder
}

// fail ends the call with msg, closing an open segment first.
func (r *reader) fail(msg string, st penguinv1.StopReason) *penguinv1.OmniMessage {
	id := r.call.GetToolCallId()
	if r.stopped {
		// The complete output must equal what was streamed.
		return omni.ToolCallOutput(id, r.partial.String(), st)
	}
	if !r.open {
		return omni.ToolCallOutput(id, msg, st)
	}
	note := "\n[" + msg + "]"
	r.forward(omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, id, note))
	r.forward(omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, id, ""))
	r.open = false
	return omni.ToolCallOutput(id, r.partial.String()+note, st)
}

// once sends the call to environment envID and reads its stream. A stream that ends without a
// complete output yields a failed output.
func (e *Executor) once(ctx context.Context, r *reader, client Client, envID string) (*penguinv1.OmniMessage, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.ExecuteTool(sctx, &penguinv1.ExecuteToolRequest{EnvironmentId: envID, ToolCall: r.call})
	if err != nil {
		return nil, err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r.fail("the tool's output ended without a result", penguinv1.StopReason_STOP_REASON_FAILED), nil
		}
		if err != nil {
			return nil, err
		}
		m := resp.GetMessage()
		if len(m.GetOrigin()) == 0 {
			if o := m.GetToolCallOutput(); o != nil && o.GetToolCallId() == r.call.GetToolCallId() {
				return m, nil
			}
			if p := m.GetPartialToolCallOutput(); p != nil && p.GetToolCallId() == r.call.GetToolCallId() {
				switch p.GetEventType() {
				case penguinv1.StreamEventType_STREAM_EVENT_TYPE_START:
					r.open, r.stopped = true, false
					r.partial.Reset()
				case penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA:
					r.partial.WriteString(p.GetOutput())
				case penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP:
					r.open, r.stopped = false, true
				}
			}
		}
		r.forward(m)
	}
}
