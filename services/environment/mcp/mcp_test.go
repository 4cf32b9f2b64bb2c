package mcp

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/tool"
)

func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("building the test server: %v\n%s", err, out)
	}
	return bin
}

type sink struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *sink) WriteString(v string) (int, error) { return s.Write([]byte(v)) }

func find(tools []tool.Spec, name string) tool.Tool {
	for _, s := range tools {
		if s.Tool.Definition().GetName() == name {
			return s.Tool
		}
	}
	return nil
}

// serveHTTP starts the test server with flag (-http or -sse) on a free
// loopback port and returns its URL.
func serveHTTP(t *testing.T, ctx context.Context, flag string) string {
	t.Helper()
	srv := exec.CommandContext(ctx, buildServer(t), flag, "127.0.0.1:0")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(url)
}

func TestStreamableHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := serveHTTP(t, ctx, "-http")
	conns, tools, end := ConnectAll(ctx, []*penguinv1.McpServer{
		{Name: "web", Url: url, Headers: map[string]string{"Authorization": "Bearer x"}, TimeoutMs: 500},
		{Name: "nowhere", Transport: "http", Url: "http://127.0.0.1:1/mcp", ConnectTimeoutMs: 2000},
	}, Options{Limits: tool.Limits{Timeout: time.Minute}, ClientName: "penguin-test", ClientVersion: "1"})
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if len(conns) != 1 || end.GetResults()[0].GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED ||
		end.GetResults()[0].GetTransport() != "http" || end.GetResults()[1].GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED {
		t.Fatalf("connect: %v", end)
	}
	echo := find(tools, "mcp__web__echo")
	if echo == nil {
		t.Fatalf("no echo among %d tools", len(tools))
	}
	var out sink
	res, err := echo.Run(ctx, `{"text":"over http"}`, &out)
	if err != nil || out.b.String() != "echo: over http" || res.StopReason != 0 {
		t.Fatalf("echo: %q %v %v", out.b.String(), res, err)
	}
	for _, s := range tools {
		if s.Tool.Definition().GetName() == "mcp__web__hang" && s.Limits.Timeout != 500*time.Millisecond {
			t.Fatalf("per-server timeout not applied: %v", s.Limits)
		}
	}
}

// TestLegacySSE connects to a server that speaks only the HTTP+SSE
// transport of the 2024-11-05 protocol, lists its tools and calls one; a
// streamable HTTP client cannot talk to it.
func TestLegacySSE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := serveHTTP(t, ctx, "-sse")
	conns, tools, end := ConnectAll(ctx, []*penguinv1.McpServer{
		{Name: "old", Transport: "sse", Url: url},
		{Name: "nourl", Transport: "sse"},
	}, Options{Limits: tool.Limits{Timeout: time.Minute}, ClientName: "penguin-test", ClientVersion: "1"})
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if len(conns) != 1 || end.GetResults()[0].GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED ||
		end.GetResults()[0].GetTransport() != "sse" || end.GetResults()[1].GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED ||
		!strings.Contains(end.GetResults()[1].GetError(), "needs a url") {
		t.Fatalf("connect: %v", end)
	}
	echo := find(tools, "mcp__old__echo")
	if echo == nil {
		t.Fatalf("no echo among %d tools", len(tools))
	}
	var out sink
	res, err := echo.Run(ctx, `{"text":"over sse"}`, &out)
	if err != nil || out.b.String() != "echo: over sse" || res.StopReason != 0 {
		t.Fatalf("echo: %q %v %v", out.b.String(), res, err)
	}
}

func TestCloseEndsTheStdioServer(t *testing.T) {
	bin := buildServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conns, tools, end := ConnectAll(ctx, []*penguinv1.McpServer{{Name: "s", Command: bin, Env: map[string]string{"X": "1"}}},
		Options{Workspace: t.TempDir(), Limits: tool.Limits{Timeout: time.Minute}})
	if len(conns) != 1 || len(tools) != 5 {
		t.Fatalf("connect: %v", end)
	}
	pid := conns[0].tracker.(interface{ Pid() int }).Pid()
	if pid == 0 {
		t.Fatal("no server process")
	}
	// A call in flight when the connection closes fails instead of hanging.
	hang := find(tools, "mcp__s__hang")
	done := make(chan error, 1)
	go func() {
		_, err := hang.Run(ctx, `{}`, &sink{})
		done <- err
	}()
	conns[0].Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the hung call succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the hung call outlived its connection")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(data), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server process %d survived Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
