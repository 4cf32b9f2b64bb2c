package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/internal/proctest"
)

// terminal is a tmux server on a private socket with one pane.
type terminal struct {
	t      *testing.T
	tmux   string
	sock   string
	target string   // the tmux session the keys and captures go to
	env    []string // the environment of tmux and the commands it runs
}

func (term *terminal) run(args ...string) string {
	term.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, term.tmux, append([]string{"-S", term.sock}, args...)...)
	cmd.Env = term.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen returns the pane's whole history and screen, wrapped lines joined.
func (term *terminal) screen() string {
	term.t.Helper()
	return term.run("capture-pane", "-p", "-J", "-S", "-", "-t", term.target)
}

// keys types into the pane, as tmux send-keys does: "Enter" and "C-c" are
// key names, anything else is typed literally with -l.
func (term *terminal) keys(keys ...string) {
	term.t.Helper()
	for _, k := range keys {
		if k == "Enter" || strings.HasPrefix(k, "C-") {
			term.run("send-keys", "-t", term.target, k)
		} else {
			term.run("send-keys", "-t", term.target, "-l", k)
		}
	}
}

// waitScreen polls the screen until it contains want n times in total.
func (term *terminal) waitScreen(want string, n int) string {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := term.screen()
		if strings.Count(s, want) >= n {
			return s
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the terminal did not show %q (%d times) within 30s; it shows:\n%s", want, n, s)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a screen scrape, not a wait for a condition
	}
}

// TestChatInTerminal drives `penguin chat` in a real terminal (tmux), with
// its embedded server and the scripted model: a prompt whose tool call is
// approved with Enter, a steering line typed while a task runs, Ctrl-C to
// abort a long command, and Ctrl-C twice to quit.
func TestChatInTerminal(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed; the terminal test of penguin chat needs it (.ci/run installs it)")
	}
	mock := startMock(t, "chat", filepath.Join("testdata", "chat.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	term := &terminal{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock"), target: "chat"}
	conf := filepath.Join(dir, "tmux.conf")
	// The pane stays after the chat quits, so its last words can be read.
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g history-limit 5000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused")
	term.env = env
	// The shell reports the exit status on the screen when the chat ends.
	chatCommand := func(args string) string {
		return "env -i " + strings.Join(env, " ") + " " + bin.penguin + " chat --providers " + providers + " " + args +
			"; echo penguin exited with status $?"
	}
	command := chatCommand("--provider chat --model scripted --workspace " + ws + " --approval always-ask")
	term.run("-f", conf, "new-session", "-d", "-s", "chat", "-x", "200", "-y", "50", command)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal %s:\n%s", term.target, term.screen())
		}
		kill := exec.Command(tmux, "-S", term.sock, "kill-server")
		kill.Env = env
		_ = kill.Run()
	})

	screen := term.waitScreen("› ", 1)
	id := regexp.MustCompile(`session (session-\S+) \(chat/scripted\)`).FindStringSubmatch(screen)
	if id == nil {
		t.Fatalf("no session line:\n%s", screen)
	}

	// A prompt; its tool call asks, and Enter allows it.
	term.keys("please create hello.txt", "Enter")
	term.waitScreen("Allow write_file", 1)
	term.keys("Enter")
	term.waitScreen("Created hello.txt.", 1)
	if got, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(got) != "hello from chat\n" {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}

	// A line typed while the task runs steers it.
	term.waitScreen("› ", 2)
	term.keys("run something slow", "Enter")
	term.waitScreen("Allow exec_command", 1)
	term.keys("y", "Enter", "also say banana", "Enter")
	term.waitScreen("» also say banana", 1)
	term.waitScreen("Done, and noted your steering.", 1)

	// Ctrl-C aborts a running task and returns to the prompt.
	term.waitScreen("› ", 3)
	term.keys("run something long", "Enter")
	term.waitScreen("Allow exec_command", 2)
	term.keys("y", "Enter")
	term.waitScreen("│ started", 1)
	term.keys("C-c")
	term.waitScreen("(aborting)", 1)
	screen = term.waitScreen("› ", 4)
	if !strings.Contains(screen, "aborted") || strings.Contains(screen, "│ never") {
		t.Fatalf("the long command was not aborted:\n%s", screen)
	}

	// Slash commands answer at the prompt without a task.
	term.keys("/thinking high", "Enter")
	term.waitScreen("thinking level set to high for this chat", 1)
	term.keys("/resume", "Enter")
	term.waitScreen("resume one with /resume ID", 1)

	// Ctrl-C twice at the prompt quits, printing how to resume.
	term.keys("C-c")
	term.waitScreen("press Ctrl-C again to quit", 1)
	term.keys("C-c")
	term.waitScreen("Resume this chat with: penguin chat --resume "+id[1], 1)
	term.waitScreen("penguin exited with status 0", 1)

	// --resume ID shows the conversation so far and carries on; /exit quits.
	term.run("new-session", "-d", "-s", "resumed", "-x", "200", "-y", "50", chatCommand("--resume "+id[1]+" --verbose"))
	term.target = "resumed"
	screen = term.waitScreen("— resumed session "+id[1]+" —", 1)
	for _, want := range []string{"› please create hello.txt", "Created hello.txt.", "› run something long"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the resumed chat does not show %q:\n%s", want, screen)
		}
	}
	term.keys("/exit", "Enter")
	term.waitScreen("penguin exited with status 0", 1)

	// The session on disk holds the steering and the abort.
	ctx := e2etest.Context(t, 30*time.Second)
	traces := t.TempDir()
	export := exec.CommandContext(ctx, bin.penguin, "sessions", "export", id[1], traces)
	export.Env = proctest.Env(t, "HOME="+dir, "PENGUIN_HOME="+home)
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("penguin sessions export: %v\n%s", err, out)
	}
	out, err := os.ReadFile(filepath.Join(traces, id[1]+"_001.jsonl"))
	if err != nil {
		t.Fatalf("penguin sessions export wrote no trace of the first context: %v", err)
	}
	for _, want := range []string{"also say banana", `"type":"abort"`, "please create hello.txt"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the exported trace lacks %s:\n%s", want, out)
		}
	}
}
