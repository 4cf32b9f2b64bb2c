package agentfiles_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/enginetool/agentfiles"
)

func call(t *testing.T, files *agentstate.Files, name, args string) *penguinv1.ToolCallOutput {
	t.Helper()
	tool := agentfiles.For(name, files)
	if tool == nil {
		t.Fatalf("no tool %s", name)
	}
	out := tool.Execute(context.Background(), &penguinv1.ToolCall{ToolCallId: "c1", Name: name, Arguments: args}, func(*penguinv1.OmniMessage) {})
	return out.GetToolCallOutput()
}

func TestTools(t *testing.T) {
	t.Parallel()
	st, err := agentstate.Init(filepath.Join(t.TempDir(), "agent"))
	if err != nil {
		t.Fatal(err)
	}
	files := st.Files(t.TempDir())
	failed := penguinv1.StopReason_STOP_REASON_FAILED

	out := call(t, files, agentconfig.ToolWriteAgentFile, `{"file_path":"memory/user/a.md","content":"fact"}`)
	if out.GetStopReason() == failed || !strings.Contains(out.GetOutput(), "Wrote memory/user/a.md (4 bytes)") {
		t.Errorf("write = %v", out)
	}
	if data, _ := os.ReadFile(filepath.Join(st.UserMemoryDir(), "a.md")); string(data) != "fact" {
		t.Errorf("on disk: %q", data)
	}
	if out := call(t, files, agentconfig.ToolReadAgentFile, `{"file_path":"memory/user/a.md"}`); out.GetOutput() != "fact" {
		t.Errorf("read = %v", out)
	}
	if out := call(t, files, agentconfig.ToolReadAgentFile, `{"file_path":""}`); !strings.Contains(out.GetOutput(), "memory/") {
		t.Errorf("top listing = %v", out)
	}
	if out := call(t, files, agentconfig.ToolDeleteAgentFile, `{"file_path":"memory/user/a.md"}`); out.GetStopReason() == failed {
		t.Errorf("delete = %v", out)
	}

	// Bad calls fail with a message for the model, not the engine's
	// paths, and change nothing.
	for _, tc := range []struct{ name, args, want string }{
		{agentconfig.ToolReadAgentFile, `{}`, "file_path is missing"},
		{agentconfig.ToolReadAgentFile, `{"path":"AGENTS.md"}`, `unknown field "path"`},
		{agentconfig.ToolWriteAgentFile, `{"file_path":"memory/user/b.md"}`, "content is missing"},
		{agentconfig.ToolWriteAgentFile, `{"file_path":"AGENTS.md","content":"x"}`, "only memory and schedule files"},
		{agentconfig.ToolWriteAgentFile, `{"file_path":"memory/user/../../../x.md","content":"x"}`, `".." is not allowed`},
		{agentconfig.ToolDeleteAgentFile, `{"file_path":".vault.yaml"}`, "hidden"},
		{agentconfig.ToolReadAgentFile, `not json`, "read_agent_file takes"},
	} {
		out := call(t, files, tc.name, tc.args)
		if out.GetStopReason() != failed || !strings.Contains(out.GetOutput(), tc.want) || strings.Contains(out.GetOutput(), st.Dir) {
			t.Errorf("%s %s = %q (%v), want a failure saying %q", tc.name, tc.args, out.GetOutput(), out.GetStopReason(), tc.want)
		}
	}
	if agentfiles.For("read_file", files) != nil {
		t.Error("For returned a tool for a name that is not an agent-file tool")
	}
}
