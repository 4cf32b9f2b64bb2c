package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	"github.com/penguin-agent/penguin/internal/transcript"
)

// TestRunEmbedded runs `penguin run` without --engine, so each run starts
// its own server in-process over the same data directory, and checks the
// exit statuses scripts rely on: 0 for a completed task (with --json
// output), 130 for a task aborted by Ctrl-C, 1 for a failed one; then
// `penguin sessions` reads the same data directory.
func TestRunEmbedded(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "run", filepath.Join("testdata", "run.yaml"))
	providers := writeProviders(t, route{"scripted", mock})
	env := []string{"TERM=dumb", "PENGUIN_HOME=" + t.TempDir(), "MOCK_API_KEY=unused", "PENGUIN_PROVIDERS=" + providers}
	ws := t.TempDir()

	// Completed, as JSON lines: run events and trace-format messages.
	run := start(t, "penguin run --json", env, "run", "--provider", "scripted", "--model", "m", "--workspace", ws, "--json", "-m", "say hello")
	if code := run.Wait(60 * time.Second); code != 0 {
		t.Fatalf("penguin run --json exited %d:\n%s", code, run.Output())
	}
	var messages, states int
	var sawOutput bool
	for _, line := range strings.Split(strings.TrimSpace(run.Stdout()), "\n") {
		if m, err := transcript.Unmarshal([]byte(line)); err == nil {
			messages++
			sawOutput = sawOutput || strings.Contains(m.GetToolCallOutput().GetOutput(), "from-the-json-run")
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["sequence"] == nil {
			t.Fatalf("--json printed a line that is neither a trace line nor a run event: %q", line)
		}
		states++
	}
	if messages < 10 || states < 2 || !sawOutput {
		t.Errorf("--json printed %d messages and %d other events (command output seen: %v):\n%s", messages, states, sawOutput, run.Output())
	}

	// Ctrl-C (SIGINT) aborts the task: exit status 130.
	run = start(t, "penguin run (interrupted)", env, "run", "--provider", "scripted", "--model", "m", "--workspace", ws, "wait for it")
	run.WaitOutput("│ waiting", 30*time.Second)
	if err := run.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := run.Wait(30 * time.Second); code != 130 {
		t.Fatalf("an interrupted penguin run exited %d, want 130:\n%s", code, run.Output())
	}
	if out := run.Output(); !strings.Contains(out, "⏹ Aborted: You interrupted it.") || strings.Contains(out, "│ finished") {
		t.Errorf("the interrupted run's output:\n%s", out)
	}

	// A task that fails: exit status 1.
	run = start(t, "penguin run (failing)", env, "run", "--provider", "nobody", "--model", "m", "--workspace", ws, "fail")
	if code := run.Wait(30 * time.Second); code != 1 {
		t.Fatalf("a failing penguin run exited %d, want 1:\n%s", code, run.Output())
	}
	if out := run.Output(); !strings.Contains(out, `unknown provider "nobody"`) {
		t.Errorf("the failing run does not say why:\n%s", out)
	}

	// The three sessions are in the data directory.
	list := start(t, "penguin sessions list", env, "sessions", "list")
	if code := list.Wait(30 * time.Second); code != 0 {
		t.Fatalf("penguin sessions list exited %d:\n%s", code, list.Output())
	}
	rows := 0
	var first string
	for _, line := range strings.Split(list.Output(), "\n") {
		if strings.HasPrefix(line, "session-") {
			rows++
			first = strings.Fields(line)[0]
		}
	}
	if rows != 3 {
		t.Fatalf("sessions list shows %d sessions, want 3:\n%s", rows, list.Output())
	}
	// Renamed, pinned, then archived (which unpins): the list says so.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"rename", first, "My", "notes"}, "renamed " + first + ` to "My notes"`},
		{[]string{"pin", first}, "pinned " + first},
		{[]string{"archive", first}, "archived " + first},
	} {
		cmd := start(t, "penguin sessions "+c.args[0], env, append([]string{"sessions"}, c.args...)...)
		if code := cmd.Wait(30 * time.Second); code != 0 || !strings.Contains(cmd.Output(), c.says) {
			t.Fatalf("penguin sessions %s exited %d, want it to say %q:\n%s", c.args[0], code, c.says, cmd.Output())
		}
	}
	list = start(t, "penguin sessions list", env, "sessions", "list")
	if code := list.Wait(30 * time.Second); code != 0 || !strings.Contains(list.Output(), "[archived] My notes") {
		t.Fatalf("the list after rename, pin and archive (exit %d):\n%s", code, list.Output())
	}
	bad := start(t, "penguin sessions rename (empty)", env, "sessions", "rename", first, " ")
	if code := bad.Wait(30 * time.Second); code != 1 || !strings.Contains(bad.Output(), "title must not be empty") {
		t.Fatalf("an empty title: exit %d:\n%s", code, bad.Output())
	}
	del := start(t, "penguin sessions delete", env, "sessions", "delete", first)
	if code := del.Wait(30 * time.Second); code != 0 || !strings.Contains(del.Output(), "deleted "+first) {
		t.Fatalf("penguin sessions delete exited %d:\n%s", code, del.Output())
	}
	show := start(t, "penguin sessions show", env, "sessions", "show", first)
	if code := show.Wait(30 * time.Second); code != 1 || !strings.Contains(show.Output(), "NotFound") {
		t.Errorf("showing a deleted session exited %d:\n%s", code, show.Output())
	}
}

// TestRunCommandLine runs `penguin run` as scripts call it: flags after
// the prompt, the prompt on standard input, and a usage error's exit
// status 2.
func TestRunCommandLine(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "run-args", filepath.Join("testdata", "run-args.yaml"))
	// A second route names a key variable that is not set: a warning, not
	// a failure of the route in use.
	providers := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(providers, []byte("providers:\n"+
		"  - {name: scripted, type: openai, base_url: "+mock.url+"/v1, api_key_env: MOCK_API_KEY}\n"+
		"  - {name: typo, type: openai, base_url: "+mock.url+"/v1, api_key_env: TYPO_API_KEY_NOT_SET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"TERM=dumb", "PENGUIN_HOME=" + t.TempDir(), "MOCK_API_KEY=unused", "PENGUIN_PROVIDERS=" + providers}
	ws := t.TempDir()

	run := start(t, "penguin run (flags after the prompt)", env, "run", "flags after the prompt", "--provider", "scripted", "--model", "m", "--workspace", ws)
	if code := run.Wait(60 * time.Second); code != 0 || !strings.Contains(run.Stdout(), "The flags after the prompt were read.") {
		t.Fatalf("penguin run PROMPT --provider … exited %d:\n%s", code, run.Output())
	}
	if !strings.Contains(run.Output(), "warning: provider typo takes its key from TYPO_API_KEY_NOT_SET, which is not set") {
		t.Errorf("no warning about the unset key variable:\n%s", run.Output())
	}

	cmd := exec.Command(bin.penguin, "run", "--provider", "scripted", "--model", "m", "--workspace", ws)
	cmd.Env = append(e2etest.BaseEnv(t), env...)
	cmd.Stdin = strings.NewReader("line one\nline two from stdin\n")
	run = netns.Start(t, "penguin run (stdin)", cmd)
	if code := run.Wait(60 * time.Second); code != 0 || !strings.Contains(run.Stdout(), "Both lines from standard input arrived.") {
		t.Fatalf("echo … | penguin run exited %d:\n%s", code, run.Output())
	}

	// A model the provider does not know fails at once, not after the
	// reconnect ladder's minute, said once with what to do, and the
	// embedded server's log lines stay off the terminal.
	began := time.Now()
	run = start(t, "penguin run (unknown model)", env, "run", "a typo in the model", "--provider", "scripted", "--model", "gpt-4oo", "--workspace", ws)
	if code := run.Wait(60 * time.Second); code != 1 {
		t.Fatalf("a run with an unknown model exited %d:\n%s", code, run.Output())
	}
	out := run.Output()
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the unknown model took %s to fail: it was retried", took)
	}
	if strings.Count(out, "does not exist") != 1 || !strings.Contains(out, "Check the model id") || strings.Contains(out, "level=WARN") {
		t.Errorf("the unknown model's failure, said once with its fix and no log lines:\n%s", out)
	}

	run = start(t, "penguin run (usage error)", env, "run", "hi", "--approval", "sometimes")
	if code := run.Wait(30 * time.Second); code != 2 || !strings.Contains(run.Output(), `approval mode "sometimes"`) {
		t.Fatalf("a usage error exited %d, want 2:\n%s", code, run.Output())
	}
}
