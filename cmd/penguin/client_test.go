package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// penguinIn runs the binary in a clean environment of its own, so an
// embedded server never touches the user's data directory.
func penguinIn(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return penguinStdin(t, "", env, args...)
}

// penguinStdin is penguinIn with stdin as standard input.
func penguinStdin(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = proctest.Env(t, append([]string{"TERM=dumb", "PENGUIN_HOME=" + t.TempDir()}, env...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || ctx.Err() != nil) {
		t.Fatalf("penguin %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// TestClientCommandsRefuseBadInput checks that run, chat and sessions
// explain a wrong command line with exit status 2 instead of starting
// anything.
func TestClientCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run"}, nil, "no message: penguin run [flags] PROMPT, or pipe it in"},
		{[]string{"run", "-m", "hi", "there"}, nil, "give the message either with -m or as arguments, not both"},
		{[]string{"run", "--provider", "openai", "hi"}, nil, "give --provider and --model together"},
		{[]string{"run", "hi", "--model", "gpt"}, nil, "give --provider and --model together"},
		{[]string{"run", "--approval", "maybe", "hi"}, nil, `approval mode "maybe": want allow-all, deny-all, read-only or always-ask`},
		{[]string{"run", "hi", "--thinking", "huge"}, nil, `thinking level "huge"`},
		{[]string{"run", "--sandbox", "strict", "hi"}, nil, `sandbox "strict": want none, workspace-write or read-only`},
		{[]string{"run", "--workspace", "/nonexistent/dir", "hi"}, nil, "workspace /nonexistent/dir is not a directory"},
		{[]string{"run", "--session", "s1", "--provider", "a", "--model", "b", "hi"}, nil, "a continued session keeps its model and workspace"},
		{[]string{"run", "--auth-token-file", "/tmp/x", "hi"}, nil, "--auth-token-file applies to --engine only"},
		{[]string{"run", "--nope", "hi"}, nil, "unknown flag: --nope"},
		{[]string{"run", "hi"}, []string{"PENGUIN_APPROVAL=sometimes"}, `approval mode "sometimes"`},
		{[]string{"run", "hi"}, []string{"PENGUIN_JSON=perhaps"}, `PENGUIN_JSON="perhaps": invalid value for --json`},
		{[]string{"chat", "hello"}, nil, `chat: unexpected arguments ["hello"]`},
		{[]string{"chat", "--resume", "s1", "--provider", "a", "--model", "b"}, nil, "a resumed session keeps its model and workspace"},
		{[]string{"chat", "--resume", "--provider", "a", "--model", "b"}, nil, "a resumed session keeps its model and workspace"},
		{[]string{"chat", "--provider", "a", "--model", "b"}, nil, "chat needs a terminal"},
		{[]string{"sessions", "show"}, nil, "usage: penguin sessions show ID"},
		{[]string{"sessions", "delete", "a", "b"}, nil, "usage: penguin sessions delete ID"},
		{[]string{"mockllm"}, nil, "--script is required"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := penguinIn(t, tc.env, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// TestRunReadsFlagsAnywhereAndStdin checks that flags after the prompt
// count and that a prompt can come on standard input: each command line
// gets past its checks to the embedded server, which has no provider to
// send the model request to and says so (exit 1, not a usage error).
func TestRunReadsFlagsAnywhereAndStdin(t *testing.T) {
	t.Parallel()
	const noProvider = "no model provider is configured"
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"flags after the prompt", "", []string{"run", "hi", "--provider", "a", "--model", "b"}},
		{"flags around the prompt", "", []string{"run", "--provider", "a", "hi", "there", "--model", "b"}},
		{"prompt on standard input", "explain this log\nline 2\n", []string{"run", "--provider", "a", "--model", "b"}},
		{"dash reads standard input", "explain", []string{"run", "-", "--provider", "a", "--model", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := penguinStdin(t, tc.stdin, nil, tc.args...)
			if out := r.stdout + r.stderr; r.code != 1 || !strings.Contains(out, noProvider) {
				t.Errorf("exit %d, output %q; want 1 and %q", r.code, out, noProvider)
			}
		})
	}
}

// TestRunReportsAnUnreachableEngine checks that --engine pointing at
// nothing fails at once with a message, not a hang.
func TestRunReportsAnUnreachableEngine(t *testing.T) {
	t.Parallel()
	r := penguinIn(t, nil, "run", "--engine", "127.0.0.1:1", "--provider", "a", "--model", "b", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "create session") || !strings.Contains(r.stderr, "(Unavailable)") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestEmbeddedSessionsNeedNoProvider lists the sessions of an empty data
// directory with no model provider configured (`sessions` alone lists):
// reading sessions never calls a model.
func TestEmbeddedSessionsNeedNoProvider(t *testing.T) {
	t.Parallel()
	r := penguinIn(t, nil, "sessions")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SESSION") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
