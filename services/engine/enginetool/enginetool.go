// Package enginetool holds what the tools the engine runs itself share.
// Most tools run in the session's environment; a few need the engine's own
// reach instead (other sessions, the model gateway), and those live in the
// packages below this one, each behind Tool, so the session's tool set
// routes a call by name without knowing what any of them does.
package enginetool

import (
	"context"
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// Tool is a tool the engine runs itself instead of the environment. Like
// every tool, it never fails: what goes wrong becomes its output, with a
// stop reason.
type Tool interface {
	// Execute runs one approved call, passing partial output and any
	// forwarded messages to forward, and returns its tool_call_output.
	Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage
}

// Func adapts a function to Tool.
type Func func(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage

// Execute calls f.
func (f Func) Execute(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	return f(ctx, call, forward)
}

// Output is the successful output of call.
func Output(call *penguinv1.ToolCall, text string) *penguinv1.OmniMessage {
	return omni.ToolCallOutput(call.GetToolCallId(), text, penguinv1.StopReason_STOP_REASON_UNSPECIFIED)
}

// Failed is the output of a call that failed, with a message for the model.
func Failed(call *penguinv1.ToolCall, format string, args ...any) *penguinv1.OmniMessage {
	return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf(format, args...), penguinv1.StopReason_STOP_REASON_FAILED)
}

// Aborted is the output of a call whose run was interrupted.
func Aborted(call *penguinv1.ToolCall) *penguinv1.OmniMessage {
	return omni.ToolCallOutput(call.GetToolCallId(), loop.CallAborted, penguinv1.StopReason_STOP_REASON_ABORTED)
}
