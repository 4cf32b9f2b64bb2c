package session_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/session"
)

// The workspace's AGENTS.md files, as the environment reads them, are in
// the new session's system prompt; a failed read fails the creation,
// since the prompt is fixed from then on, and leaves no environment
// behind.
func TestCreatePutsWorkspaceInstructionsInThePrompt(t *testing.T) {
	r := newRig(t)
	var asked []string
	r.env.Describe = func(req *penguinv1.DescribeWorkspaceRequest) (*penguinv1.DescribeWorkspaceResponse, error) {
		asked = append(asked, req.GetWorkspace())
		switch req.GetWorkspace() {
		case "/fake/missing":
			return nil, status.Error(codes.NotFound, "no such workspace")
		case "/fake/down":
			return nil, status.Error(codes.Unavailable, "replica gone")
		}
		return &penguinv1.DescribeWorkspaceResponse{Workspace: req.GetWorkspace(), AgentsFiles: []*penguinv1.InstructionFile{
			{Path: "/fake/AGENTS.md", Content: "Root rule."}, {Path: "/fake/ws/AGENTS.md", Content: "Workspace rule."},
		}}, nil
	}
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	hist, _, err := r.mgr.History(t.Context(), s.GetSessionId(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	prompt := hist[0].GetMessage().GetSessionMeta().GetSystemPrompt()
	if !strings.Contains(prompt, "## /fake/AGENTS.md\nRoot rule.\n\n## /fake/ws/AGENTS.md\nWorkspace rule.") {
		t.Errorf("the prompt lacks the workspace's AGENTS.md files:\n%s", prompt)
	}
	if len(asked) != 1 || asked[0] != "/fake/ws" {
		t.Errorf("DescribeWorkspace asked for %v, want the environment's resolved workspace", asked)
	}
	// A workspace the environment does not have yet has no instructions.
	if _, err := r.mgr.Create(t.Context(), session.CreateSpec{Model: model, Workspace: "missing"}); err != nil {
		t.Errorf("a workspace with no AGENTS.md to find: %v", err)
	}
	created := len(r.env.Created())
	_, err = r.mgr.Create(t.Context(), session.CreateSpec{Model: model, Workspace: "down"})
	if !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("Create with the read failing = %v, want ErrUnavailable", err)
	}
	if len(r.env.Created()) != created+1 || len(r.env.Disposed()) != 1 {
		t.Errorf("the failed creation left its environment: %d created, %v disposed", len(r.env.Created())-created, r.env.Disposed())
	}
}
