package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// nodeClient runs clients/node/session.js, a Node.js client built on
// @grpc/grpc-js and @grpc/proto-loader from the .proto files alone: it
// creates a session with always-ask approval, runs a task, answers the
// approval request it reads from the stream, and checks the events.
func nodeClient(t *testing.T, s *allInOne) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; the Node.js client test needs Node.js 18 or later (.ci/run installs it)")
	}
	dir := filepath.Join(bin.repo, "clients", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js")); err != nil {
		t.Fatalf("the Node.js client's packages are not installed: run `npm ci` in %s (.ci/run does)", dir)
	}
	ctx := testkit.Context(t, 90*time.Second)
	ws := filepath.Join(s.root, "node-ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "session.js"),
		"--engine", s.grpcAddr, "--provider", "node", "--model", "scripted", "--workspace", ws,
		"--prompt", "write a greeting", "--timeout-ms", "60000")
	cmd.Env = proctest.Env(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node session.js: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	var summary struct {
		Client        string `json:"client"`
		Approvals     int    `json:"approvals"`
		ToolOutputs   int    `json:"tool_outputs"`
		Status        string `json:"status"`
		LastText      string `json:"last_text"`
		HistoryEvents int    `json:"history_events"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil || summary.Client != "summary" {
		t.Fatalf("no summary line from the Node.js client (%v):\n%s", err, stdout.String())
	}
	if summary.Approvals != 1 || summary.ToolOutputs != 1 || summary.Status != "STOP_REASON_COMPLETED" ||
		summary.LastText != "from-node.txt is written." || summary.HistoryEvents == 0 {
		t.Errorf("summary = %+v", summary)
	}
	if !strings.Contains(stdout.String(), `"client":"approved"`) {
		t.Errorf("the client did not report answering the approval:\n%s", stdout.String())
	}
	got, err := os.ReadFile(filepath.Join(ws, "from-node.txt"))
	if err != nil || string(got) != "hello from a Node.js client\n" {
		t.Errorf("from-node.txt = %q, %v", got, err)
	}
}
