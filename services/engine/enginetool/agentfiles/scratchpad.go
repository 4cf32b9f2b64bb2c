package agentfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
)

// WithScratchpad returns the agent-file tool called name with the
// session's scratchpad added: a call whose file_path lies under
// scratchpad/ reaches pad, any other goes to inner (the agent's own files;
// nil when the session does not offer them, and then such a call is
// refused).
func WithScratchpad(name string, inner enginetool.Tool, pad *scratchpad.Pad) enginetool.Tool {
	return enginetool.Func(func(ctx context.Context, call *penguinv1.ToolCall, forward func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
		var probe struct {
			FilePath *string `json:"file_path"`
		}
		_ = json.Unmarshal([]byte(call.GetArguments()), &probe)
		file, inPad := "", false
		if probe.FilePath != nil {
			file, inPad = scratchpad.Name(*probe.FilePath)
		}
		if !inPad {
			if inner == nil {
				return enginetool.Failed(call, "%s reaches only scratchpad/ in this session (for example %s)", name, scratchpad.Path("PLAN.md"))
			}
			return inner.Execute(ctx, call, forward)
		}
		switch name {
		case agentconfig.ToolReadAgentFile:
			text, image, err := pad.Read(file)
			if err != nil {
				return padFailure(call, err)
			}
			out := enginetool.Output(call, text)
			if image != "" {
				out.GetToolCallOutput().Images = []string{image}
			}
			return out
		case agentconfig.ToolWriteAgentFile:
			var args struct {
				FilePath string  `json:"file_path"`
				Content  *string `json:"content"`
			}
			if failed := parse(call, &args, `{"file_path": "scratchpad/<name>", "content": "<text>"}`); failed != nil {
				return failed
			}
			if args.Content == nil {
				return enginetool.Failed(call, `write_agent_file takes {"file_path": "scratchpad/<name>", "content": "<text>"}; content is missing.`)
			}
			if err := pad.Write(file, *args.Content); err != nil {
				return padFailure(call, err)
			}
			return enginetool.Output(call, fmt.Sprintf("Wrote %s (%d bytes).", scratchpad.Path(file), len(*args.Content)))
		case agentconfig.ToolDeleteAgentFile:
			if err := pad.Delete(file); err != nil {
				return padFailure(call, err)
			}
			return enginetool.Output(call, "Deleted "+scratchpad.Path(file)+".")
		}
		return omni.ToolCallOutput(call.GetToolCallId(), fmt.Sprintf("There is no tool named %q.", name), penguinv1.StopReason_STOP_REASON_FAILED)
	})
}

func padFailure(call *penguinv1.ToolCall, err error) *penguinv1.OmniMessage {
	if errors.Is(err, scratchpad.ErrRefused) {
		return enginetool.Failed(call, "%s", strings.TrimPrefix(err.Error(), scratchpad.ErrRefused.Error()+": "))
	}
	return enginetool.Failed(call, "The engine could not reach the scratchpad: %v", err)
}
