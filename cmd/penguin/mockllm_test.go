package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// startMockLLM runs `penguin mockllm` on a free port with the given extra
// environment and returns the process and its base URL, read from the
// "mockllm listening" log line.
func startMockLLM(t *testing.T, ctx context.Context, env []string, args ...string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, append([]string{"mockllm", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = proctest.Env(t, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	urlRE := regexp.MustCompile(`msg="mockllm listening" url=(\S+)`)
	lines := bufio.NewScanner(stderr)
	log := &strings.Builder{}
	for lines.Scan() {
		log.WriteString(lines.Text() + "\n")
		if m := urlRE.FindStringSubmatch(lines.Text()); m != nil {
			// Keep draining the log so the process never blocks on it.
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return cmd, m[1], log
		}
	}
	t.Fatalf("mockllm exited before listening:\n%s", log)
	return nil, "", nil
}

func TestMockLLMServesScriptAndStopsOnSignal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := filepath.Join("..", "..", "internal", "testkit", "emulator", "testdata", "agent-loop.yaml")
	cmd, url, _ := startMockLLM(t, ctx, []string{"MOCK_KEY=sk-mock"}, "--script", script, "--api-key-env", "MOCK_KEY")

	cfg := openai.DefaultConfig("sk-wrong")
	cfg.BaseURL = url + "/v1"
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Fatalf("wrong key: %v, want 401", err)
	}

	cfg = openai.DefaultConfig("sk-mock")
	cfg.BaseURL = url + "/v1"
	stream, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "list files"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var content, args string
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			content += c.Delta.Content
			for _, tc := range c.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
		}
	}
	stream.Close()
	if content != "Let me look at the workspace." || args != `{"command":"ls -la"}` {
		t.Errorf("content %q args %q", content, args)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("mockllm after SIGTERM: %v, want exit 0", err)
	}
}

func TestMockLLMBadInvocations(t *testing.T) {
	t.Parallel()
	script := filepath.Join("..", "..", "internal", "testkit", "emulator", "testdata", "agent-loop.yaml")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("turns:\n  - fault: {kind: explode}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mockllm"}, 2, "--script is required"},
		{[]string{"mockllm", "--script", "/nonexistent.yaml"}, 1, "no such file"},
		{[]string{"mockllm", "--script", bad}, 1, `kind "explode"`},
		{[]string{"mockllm", "--script", script, "--api-key-env", "PENGUIN_TEST_UNSET_KEY"}, 1, "PENGUIN_TEST_UNSET_KEY, which is not set"},
		{[]string{"mockllm", "--script", script, "--listen", "256.0.0.1:1"}, 1, "mockllm:"},
	} {
		r := penguin(t, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("penguin %v: exit %d stderr %q, want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
}
