package environment_test

import (
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment"
	"google.golang.org/protobuf/proto"
)

func TestMCPServers(t *testing.T) {
	bin := buildMCPServer(t)
	h := start(t, environment.Options{})
	began := time.Now()
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Tools: &penguinv1.ToolConfig{
		Builtin: []*penguinv1.ToolSpec{{Name: "read_file"}},
		McpServers: []*penguinv1.McpServer{
			{Name: "t", Command: bin, TimeoutMs: 700},
			{Name: "missing", Command: "/nonexistent/mcp-server"},
			{Name: "mute", Command: "sleep", Args: []string{"1000"}, ConnectTimeoutMs: 500},
			{Name: "bad name!", Command: bin},
			{Name: "ro", Command: bin, Permission: penguinv1.Permission_PERMISSION_R},
		},
	}})
	if time.Since(began) > 30*time.Second {
		t.Fatalf("connecting took %s", time.Since(began))
	}
	env := resp.GetEnvironmentId()
	end := resp.GetMcp()
	if end.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED || len(end.GetResults()) != 5 {
		t.Fatalf("mcp end %v", end)
	}
	want := map[string]penguinv1.McpConnectStatus{
		"t": penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED, "missing": penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
		"mute": penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED, "bad name!": penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
		"ro": penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED,
	}
	for _, r := range end.GetResults() {
		if r.GetStatus() != want[r.GetServer()] || r.GetTransport() != "stdio" {
			t.Errorf("server %s: %v", r.GetServer(), r)
		}
		switch r.GetServer() {
		case "t":
			if r.GetTools() != 5 {
				t.Errorf("t has %d tools", r.GetTools())
			}
		case "mute":
			if !strings.Contains(r.GetError(), "connect budget of 500ms") {
				t.Errorf("mute: %q", r.GetError())
			}
		case "bad name!":
			if !strings.Contains(r.GetError(), "invalid server name") {
				t.Errorf("bad name: %q", r.GetError())
			}
		}
	}
	perms := map[string]penguinv1.Permission{}
	for _, ti := range resp.GetTools() {
		perms[ti.GetDefinition().GetName()] = ti.GetPermission()
	}
	for name, p := range map[string]penguinv1.Permission{
		"mcp__t__echo": penguinv1.Permission_PERMISSION_R, "mcp__t__hang": penguinv1.Permission_PERMISSION_RW,
		"mcp__ro__hang": penguinv1.Permission_PERMISSION_R, "read_file": penguinv1.Permission_PERMISSION_R,
	} {
		if perms[name] != p {
			t.Errorf("%s: permission %v, want %v (tools %v)", name, perms[name], p, perms)
		}
	}
	for _, ti := range resp.GetTools() {
		if ti.GetDefinition().GetName() == "mcp__t__echo" && !strings.Contains(ti.GetDefinition().GetParameters(), `"text"`) {
			t.Errorf("echo schema %s", ti.GetDefinition().GetParameters())
		}
	}

	wantStop(t, h.exec(env, "mcp__t__echo", `{"text":"hi there"}`), ok, "echo: hi there")
	r := h.exec(env, "mcp__t__picture", `{}`)
	wantStop(t, r, ok, "a pixel")
	if len(r.out.GetImages()) != 1 || !strings.HasPrefix(r.out.GetImages()[0], "data:image/png;base64,iVBORw0KGgo") {
		t.Fatalf("images %v", r.out.GetImages())
	}
	wantStop(t, h.exec(env, "mcp__t__fail", `{}`), failed, "the widget is broken")
	wantStop(t, h.exec(env, "mcp__t__structured", `{}`), ok, `{"answer":42}`)
	wantStop(t, h.exec(env, "mcp__t__echo", `{"text": 5}`), failed)
	wantStop(t, h.exec(env, "mcp__t__echo", `nope`), failed, "not valid JSON")
	began = time.Now()
	wantStop(t, h.exec(env, "mcp__t__hang", `{}`), timedOut, "[timed out after 700ms]")
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("the hung call took %s", d)
	}
	// The server survives a timed-out call.
	wantStop(t, h.exec(env, "mcp__t__echo", `{"text":"again"}`), ok, "echo: again")
}

// An MCP server's max_output_length caps the output of each of its tools;
// zero turns truncation off; unset keeps the environment's default.
func TestMCPServerOutputCap(t *testing.T) {
	bin := buildMCPServer(t)
	h := start(t, environment.Options{})
	long := strings.Repeat("abcdefghij", 10)
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Tools: &penguinv1.ToolConfig{
		NoBuiltins: true,
		McpServers: []*penguinv1.McpServer{
			{Name: "capped", Command: bin, MaxOutputLength: proto.Int64(20)},
			{Name: "open", Command: bin, MaxOutputLength: proto.Int64(0)},
		},
	}})
	env := resp.GetEnvironmentId()
	capped := h.exec(env, "mcp__capped__echo", `{"text":"`+long+`"}`)
	if strings.Contains(capped.text(), long) || !strings.Contains(capped.text(), "echo: abcdefghijabcd") {
		t.Fatalf("capped output:\n%s", capped.text())
	}
	wantStop(t, h.exec(env, "mcp__open__echo", `{"text":"`+long+`"}`), ok, "echo: "+long)
}
