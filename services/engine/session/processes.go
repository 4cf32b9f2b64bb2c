package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Processes lists the commands of the session's environment, oldest
// first. A session without an environment now (none made yet, or an idle
// one's disposed of, its commands with it) has none.
func (m *Manager) Processes(ctx context.Context, id string) ([]*penguinv1.ProcessInfo, error) {
	client, envID, err := m.sessionEnvironment(ctx, id)
	if err != nil || client == nil {
		return nil, err
	}
	resp, err := client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: envID})
	switch status.Code(err) {
	case codes.OK:
		return resp.GetProcesses(), nil
	case codes.NotFound:
		return nil, nil
	}
	return nil, downstream("list the environment's commands", err)
}

// KillProcess stops one command of the session's environment through the
// kill_command tool, the way the model stops one, and returns what the
// tool answered. The call is the person's, not the model's: it is not
// recorded in the session's log.
func (m *Manager) KillProcess(ctx context.Context, id, processID string) (string, error) {
	if processID == "" {
		return "", fmt.Errorf("%w: process_id is required", ErrInvalid)
	}
	client, envID, err := m.sessionEnvironment(ctx, id)
	if err != nil {
		return "", err
	}
	if client == nil {
		return "", fmt.Errorf("%w: the session has no environment now, so no command runs", ErrNotFound)
	}
	args, _ := json.Marshal(map[string]string{"process_id": processID})
	stream, err := client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: envID, ToolCall: &penguinv1.ToolCall{
		Role: penguinv1.Role_ROLE_ASSISTANT, Name: "kill_command", Arguments: string(args), ToolCallId: "kill-" + processID,
	}})
	if err != nil {
		return "", downstream("kill the command", err)
	}
	var out *penguinv1.ToolCallOutput
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", downstream("kill the command", err)
		}
		if o := resp.GetMessage().GetToolCallOutput(); o != nil {
			out = o
		}
	}
	text := strings.TrimSpace(out.GetOutput())
	switch {
	case out == nil:
		return "", fmt.Errorf("%w: kill_command answered nothing", ErrUnavailable)
	case out.GetStopReason() == penguinv1.StopReason_STOP_REASON_FAILED && strings.Contains(text, "no command session has process_id"):
		return "", fmt.Errorf("%w: %s", ErrNotFound, text)
	case out.GetStopReason() == penguinv1.StopReason_STOP_REASON_FAILED:
		return "", fmt.Errorf("%w: %s", ErrPrecondition, text)
	}
	return text, nil
}

// sessionEnvironment returns the client and id of the session's
// environment, or a nil client when it has none recorded.
func (m *Manager) sessionEnvironment(ctx context.Context, id string) (penguinv1.EnvironmentServiceClient, string, error) {
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if row.EnvironmentID == "" {
		return nil, "", nil
	}
	client, err := m.envClient(row.EnvironmentAddr)
	if err != nil {
		return nil, "", err
	}
	return client, row.EnvironmentID, nil
}
