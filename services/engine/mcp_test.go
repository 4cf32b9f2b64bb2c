package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// buildMCPServer builds the environment's test MCP server (five tools,
// over stdio) into a temporary directory.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	cmd := exec.Command("go", "build", "-o", bin, "../environment/mcp/testdata/mcpserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the MCP server: %v\n%s", err, out)
	}
	return bin
}

// mcpAgent writes an agent config whose MCP servers are "t", the test
// server started through a shell that appends a line to mark each time it
// starts (first holding back for as long as hold names a file that
// exists), and "broken", whose program does not exist.
func mcpAgent(t *testing.T, dir, bin, mark, hold string) {
	t.Helper()
	script := `echo started >> "$MARK"; while [ -e "$HOLD" ]; do sleep 0.05; done; exec "$BIN"`
	writeConfig(t, dir, testConfig+fmt.Sprintf(`tools:
  mcp_servers:
    - name: t
      command: /bin/sh
      args: ["-c", %q]
      env: {MARK: %q, HOLD: %q, BIN: %q, PATH: "/usr/bin:/bin", HOME: %q}
      connect_timeout_ms: 20000
    - name: broken
      command: /nonexistent/mcp-server
`, script, mark, hold, bin, t.TempDir()))
}

// starts returns how many times the test server was started.
func starts(t *testing.T, mark string) int {
	t.Helper()
	data, err := os.ReadFile(mark)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "started\n")
}

// kind names a message's payload for order checks.
func kind(m *penguinv1.OmniMessage) string {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		return "text:" + strings.ToLower(p.Text.GetRole().String()[len("ROLE_"):])
	case *penguinv1.OmniMessage_McpConnectBegin:
		return "mcp_connect_begin"
	case *penguinv1.OmniMessage_McpConnectEnd:
		return "mcp_connect_end"
	case *penguinv1.OmniMessage_ToolListReady:
		return "tool_list_ready"
	case *penguinv1.OmniMessage_RequestBegin:
		return "request_begin"
	case *penguinv1.OmniMessage_ToolCall:
		return "tool_call"
	case *penguinv1.OmniMessage_ToolCallOutput:
		return "tool_call_output"
	case *penguinv1.OmniMessage_Abort:
		return "abort"
	}
	return ""
}

// kinds lists the kinds of the persisted messages among evs that kind
// names, in order.
func kinds(evs []*penguinv1.RunEvent) []string {
	var out []string
	for _, m := range enginetest.Messages(evs) {
		if k := kind(m); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// TestRealServicesMCPConnect runs a session whose agent has two MCP
// servers, one real and one that cannot start, against the real
// environment service and a scripted model: creating the session starts
// no server; the first run connects both after its prompt, recording one
// mcp_connect_begin / mcp_connect_end pair (the broken server's result
// carries its error) and then the tool list, before the first request;
// the model calls the real server's tool; a second run reuses the
// connection and records no pair.
func TestRealServicesMCPConnect(t *testing.T) {
	bin := buildMCPServer(t)
	s := newRealStack(t,
		emulator.Turn{ToolCalls: []emulator.ToolCall{{ID: "m1", Name: "mcp__t__echo", Arguments: `{"text":"hi there"}`}}},
		emulator.Turn{Text: "It echoed."},
		emulator.Turn{Text: "Still here."},
	)
	mark := filepath.Join(t.TempDir(), "starts")
	mcpAgent(t, s.agentDir, bin, mark, filepath.Join(t.TempDir(), "no-hold"))
	id := s.create(t, allowAll)
	if n := starts(t, mark); n != 0 {
		t.Fatalf("creating the session started the MCP server %d times", n)
	}

	evs := s.run(t, id, "echo hi there")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	want := []string{"text:user", "mcp_connect_begin", "mcp_connect_end", "tool_list_ready", "request_begin", "tool_call", "tool_call_output", "request_begin", "text:assistant"}
	// (The tool's output may come before or after the first request's
	// end, which kinds leaves out.)
	if got := kinds(evs); !slices.Equal(got, want) {
		t.Fatalf("the run's messages\n%v\nwant\n%v", got, want)
	}
	var begin *penguinv1.McpConnectBegin
	var endEv *penguinv1.McpConnectEnd
	var tools []string
	var begAt, endAt time.Time
	for _, m := range enginetest.Messages(evs) {
		switch {
		case m.GetMcpConnectBegin() != nil:
			begin, begAt = m.GetMcpConnectBegin(), m.GetTimestamp().AsTime()
		case m.GetMcpConnectEnd() != nil:
			endEv, endAt = m.GetMcpConnectEnd(), m.GetTimestamp().AsTime()
		case m.GetToolListReady() != nil:
			for _, d := range m.GetToolListReady().GetTools() {
				tools = append(tools, d.GetName())
			}
		case m.GetToolCallOutput() != nil:
			if o := m.GetToolCallOutput(); o.GetOutput() != "echo: hi there" || o.GetStopReason() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
				t.Errorf("the MCP tool's output: %v", o)
			}
		}
	}
	if !slices.Equal(begin.GetServers(), []string{"t", "broken"}) {
		t.Errorf("mcp_connect_begin servers %v", begin.GetServers())
	}
	if endEv.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED || len(endEv.GetResults()) != 2 {
		t.Fatalf("mcp_connect_end %v", endEv)
	}
	ok, broken := endEv.GetResults()[0], endEv.GetResults()[1]
	if ok.GetServer() != "t" || ok.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED || ok.GetTools() != 5 || ok.GetTransport() != "stdio" || ok.GetError() != "" {
		t.Errorf("t's result %v", ok)
	}
	if broken.GetServer() != "broken" || broken.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED || !strings.Contains(broken.GetError(), "/nonexistent/mcp-server") || broken.GetTools() != 0 {
		t.Errorf("broken's result %v", broken)
	}
	if wall := endAt.Sub(begAt); wall < time.Duration(ok.GetDurationMs())*time.Millisecond {
		t.Errorf("the pair spans %s, less than t's own %dms", wall, ok.GetDurationMs())
	}
	if !slices.Contains(tools, "mcp__t__echo") || !slices.Contains(tools, "exec_command") || slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "mcp__broken__") }) {
		t.Errorf("tool list %v", tools)
	}
	// The model was offered the server's tools in its first request.
	first := fmt.Sprint(s.emu.Requests()[0].Body["tools"])
	if !strings.Contains(first, "mcp__t__echo") {
		t.Errorf("the first request's tools lack mcp__t__echo: %s", first)
	}
	if n := starts(t, mark); n != 1 {
		t.Errorf("the MCP server started %d times in the first run", n)
	}

	// The log holds what the stream showed, in the same order.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hist, err := s.client.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(hist.GetEvents()); !slices.Equal(got, want) {
		t.Errorf("the log\n%v\nwant\n%v", got, want)
	}

	// The next run has its environment and its connections already.
	evs = s.run(t, id, "again")
	if got := kinds(evs); !slices.Equal(got, []string{"text:user", "request_begin", "text:assistant"}) {
		t.Errorf("the second run's messages %v", got)
	}
	if n := starts(t, mark); n != 1 {
		t.Errorf("the MCP server started %d times after two runs", n)
	}
}

// TestRealServicesMCPConnectAborted aborts a run while its MCP servers
// connect: the pair ends as aborted, the abort is recorded, the server
// process is ended, and the next run connects again from scratch.
func TestRealServicesMCPConnectAborted(t *testing.T) {
	bin := buildMCPServer(t)
	s := newRealStack(t, emulator.Turn{Text: "Connected this time."})
	mark := filepath.Join(t.TempDir(), "starts")
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAgent(t, s.agentDir, bin, mark, hold)
	id := s.create(t, allowAll)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := s.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "connect"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*penguinv1.RunEvent
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		evs = append(evs, r.GetEvent())
		if r.GetEvent().GetMessage().GetMcpConnectBegin() != nil {
			// Abort once the server is really starting (held by the
			// hold file), so it is a connect in flight that is aborted.
			eventually.True(t, "the MCP server started", func() bool { return starts(t, mark) == 1 })
			if _, err := s.client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id, Reason: "not now"}); err != nil {
				t.Fatalf("Abort: %v", err)
			}
		}
	}
	if st := end(t, evs); st.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	if got, want := kinds(evs), []string{"text:user", "mcp_connect_begin", "mcp_connect_end", "abort"}; !slices.Equal(got, want) {
		t.Fatalf("the aborted run's messages %v, want %v", got, want)
	}
	for _, m := range enginetest.Messages(evs) {
		if e := m.GetMcpConnectEnd(); e != nil && (e.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED || len(e.GetResults()) != 0) {
			t.Errorf("mcp_connect_end of an aborted connect: %v", e)
		}
	}
	if len(s.emu.Requests()) != 0 {
		t.Fatalf("%d model requests during an aborted connect", len(s.emu.Requests()))
	}

	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	evs = s.run(t, id, "connect again")
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	got := kinds(evs)
	if i := slices.Index(got, "mcp_connect_begin"); i < 0 || !slices.Equal(got[i:i+4], []string{"mcp_connect_begin", "mcp_connect_end", "tool_list_ready", "request_begin"}) {
		t.Fatalf("the second run's messages %v", got)
	}
	if n := starts(t, mark); n != 2 {
		t.Errorf("the MCP server started %d times, want once per run", n)
	}
}
