// Package agentfiles is the agent-file engine tools: read_agent_file,
// write_agent_file and delete_agent_file. They give the model its skills,
// its AGENTS.md and its memory, which the engine keeps in the agent's
// state directory (agentstate.Files decides what each path reaches and
// bounds every write).
//
// They are engine tools because the agent state is the engine's: the
// environment that runs the workspace's file tools may be on another host
// and must not see it (it would also see the vault beside it), and a
// memory written through the workspace would end up in the workspace.
package agentfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
)

// For returns the agent-file tool called name over files, or nil when name
// is not one of them.
func For(name string, files *agentstate.Files) enginetool.Tool {
	switch name {
	case agentconfig.ToolReadAgentFile:
		return enginetool.Func(func(_ context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
			var args struct {
				FilePath *string `json:"file_path"`
			}
			if failed := parse(call, &args, `{"file_path": "<path>"}`); failed != nil {
				return failed
			}
			if args.FilePath == nil {
				return enginetool.Failed(call, `read_agent_file takes {"file_path": "<path>"}; file_path is missing. Use "" for the list of agent files.`)
			}
			text, err := files.Read(*args.FilePath)
			if err != nil {
				return failure(call, err)
			}
			return enginetool.Output(call, text)
		})
	case agentconfig.ToolWriteAgentFile:
		return enginetool.Func(func(_ context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
			var args struct {
				FilePath string  `json:"file_path"`
				Content  *string `json:"content"`
			}
			if failed := parse(call, &args, `{"file_path": "<memory file>", "content": "<text>"}`); failed != nil {
				return failed
			}
			if args.Content == nil {
				return enginetool.Failed(call, `write_agent_file takes {"file_path": "<memory file>", "content": "<text>"}; content is missing.`)
			}
			if err := files.Write(args.FilePath, *args.Content); err != nil {
				return failure(call, err)
			}
			return enginetool.Output(call, fmt.Sprintf("Wrote %s (%d bytes).", args.FilePath, len(*args.Content)))
		})
	case agentconfig.ToolDeleteAgentFile:
		return enginetool.Func(func(_ context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
			var args struct {
				FilePath string `json:"file_path"`
			}
			if failed := parse(call, &args, `{"file_path": "<memory file>"}`); failed != nil {
				return failed
			}
			if err := files.Delete(args.FilePath); err != nil {
				return failure(call, err)
			}
			return enginetool.Output(call, "Deleted "+args.FilePath+".")
		})
	}
	return nil
}

// parse reads a call's arguments strictly, as the environment reads its
// tools' (unknown keys are refused, so a misspelt key is not silently
// ignored); the output it returns, when not nil, tells the model the
// shape to use.
func parse(call *penguinv1.ToolCall, into any, shape string) *penguinv1.OmniMessage {
	dec := json.NewDecoder(bytes.NewReader([]byte(call.GetArguments())))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return enginetool.Failed(call, "%s takes %s: %v", call.GetName(), shape, err)
	}
	return nil
}

// failure turns an error into the call's output: a refusal as it is, for
// the model to correct the call, anything else (the engine's disk) as a
// failure of the engine.
func failure(call *penguinv1.ToolCall, err error) *penguinv1.OmniMessage {
	if errors.Is(err, agentstate.ErrAgentFile) {
		return enginetool.Failed(call, "%s", strings.TrimPrefix(err.Error(), agentstate.ErrAgentFile.Error()+": "))
	}
	return enginetool.Failed(call, "The engine could not reach the agent files: %v", err)
}
