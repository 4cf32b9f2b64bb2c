package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/proctest"
)

// penguinIn runs the binary in a clean environment of its own, so an
// embedded server never touches the user's data directory.
func penguinIn(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = proctest.Env(t, append([]string{"PENGUIN_HOME=" + t.TempDir()}, env...)...)
	cmd.Stdin = strings.NewReader("")
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
// explain a wrong command line instead of starting anything.
func TestClientCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run"}, nil, "run: no message: penguin run [flags] PROMPT"},
		{[]string{"run", "-m", "hi", "there"}, nil, "give the message either with -m or as arguments, not both"},
		{[]string{"run", "--provider", "openai", "hi"}, nil, "give --provider and --model together"},
		{[]string{"run", "--model", "gpt", "hi"}, nil, "give --provider and --model together"},
		{[]string{"run", "--approval", "maybe", "hi"}, nil, `approval mode "maybe": want allow-all, deny-all, read-only or always-ask`},
		{[]string{"run", "--thinking", "huge", "hi"}, nil, `thinking level "huge"`},
		{[]string{"run", "--sandbox", "strict", "hi"}, nil, `sandbox "strict": want none, workspace-write or read-only`},
		{[]string{"run", "--workspace", "/nonexistent/dir", "hi"}, nil, "workspace /nonexistent/dir is not a directory"},
		{[]string{"run", "--session", "s1", "--provider", "a", "--model", "b", "hi"}, nil, "a continued session keeps its model and workspace"},
		{[]string{"run", "--auth-token-file", "/tmp/x", "hi"}, nil, "--auth-token-file applies to --engine only"},
		{[]string{"run", "hi"}, []string{"PENGUIN_APPROVAL=sometimes"}, `approval mode "sometimes"`},
		{[]string{"run", "hi"}, []string{"PENGUIN_JSON=perhaps"}, `PENGUIN_JSON="perhaps": invalid value for -json`},
		// No --engine and no provider: the embedded server says what is missing.
		{[]string{"run", "--provider", "a", "--model", "b", "hi"}, nil, "no providers configured: pass a providers file, or set OPENAI_API_KEY or ANTHROPIC_API_KEY"},
		{[]string{"chat", "hello"}, nil, `chat: unexpected arguments ["hello"]`},
		{[]string{"chat", "--resume", "s1", "--provider", "a", "--model", "b"}, nil, "a resumed session keeps its model and workspace"},
		{[]string{"chat", "--resume", "--provider", "a", "--model", "b"}, nil, "a resumed session keeps its model and workspace"},
		{[]string{"sessions"}, nil, "sessions: name a command"},
		{[]string{"sessions", "frobnicate"}, nil, `sessions: unknown command "frobnicate"`},
		{[]string{"sessions", "show"}, nil, "usage: penguin sessions show ID"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := penguinIn(t, tc.env, tc.args...)
			if r.code != 1 && r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure saying %q", r.code, r.stderr, tc.want)
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
// directory with no model provider configured: reading sessions never
// calls a model.
func TestEmbeddedSessionsNeedNoProvider(t *testing.T) {
	t.Parallel()
	r := penguinIn(t, nil, "sessions", "list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SESSION") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
