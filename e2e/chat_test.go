package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
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

// firstTrace exports session id with `penguin sessions export` in env and
// returns the trace of its first context.
func firstTrace(t *testing.T, id string, env []string) []byte {
	t.Helper()
	traces := t.TempDir()
	export := exec.CommandContext(testkit.Context(t, 30*time.Second), bin.penguin, "sessions", "export", id, traces)
	export.Env = env
	if out, err := export.CombinedOutput(); err != nil {
		t.Fatalf("penguin sessions export: %v\n%s", err, out)
	}
	out, err := os.ReadFile(filepath.Join(traces, id+"_001.jsonl"))
	if err != nil {
		t.Fatalf("penguin sessions export wrote no trace of the first context: %v", err)
	}
	return out
}

// newTerminal starts a tmux server of the test's own running command in
// a first pane called name, 200x50 unless sized, with env as the
// environment of tmux and the commands it runs. The pane stays after the
// command ends, so its last words can be read; the screen is logged when
// the test fails.
func newTerminal(t *testing.T, env []string, name, command string) *terminal {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed; the terminal tests of penguin chat need it (.ci/run installs it)")
	}
	dir := t.TempDir()
	term := &terminal{t: t, tmux: tmux, sock: filepath.Join(dir, "tmux.sock"), target: name, env: env}
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g history-limit 5000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	term.run("-f", conf, "new-session", "-d", "-s", name, "-x", "200", "-y", "50", command)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal %s:\n%s", term.target, term.screen())
		}
		kill := exec.Command(tmux, "-S", term.sock, "kill-server")
		kill.Env = env
		_ = kill.Run()
	})
	return term
}

// open runs command in a new pane called name, which later keys go to.
func (term *terminal) open(name, command string) {
	term.t.Helper()
	term.run("new-session", "-d", "-s", name, "-x", "200", "-y", "50", command)
	term.target = name
}

// keyNames are the tmux key names keys sends as keys, not text.
var keyNames = map[string]bool{"Enter": true, "Escape": true, "Left": true, "Right": true, "Up": true, "Down": true, "BSpace": true, "Tab": true, "M-Up": true}

// keys types into the pane, as tmux send-keys does: "Enter", "Left",
// "C-c" and the other key names are keys, anything else is typed
// literally with -l.
func (term *terminal) keys(keys ...string) {
	term.t.Helper()
	for _, k := range keys {
		if keyNames[k] || strings.HasPrefix(k, "C-") {
			term.run("send-keys", "-t", term.target, k)
		} else {
			term.run("send-keys", "-t", term.target, "-l", k)
		}
	}
}

// paste pastes text into the pane as a terminal does: in one bracketed
// paste, since the program asked for bracketed pastes.
func (term *terminal) paste(text string) {
	term.t.Helper()
	term.run("set-buffer", "-b", "paste", text)
	term.run("paste-buffer", "-p", "-d", "-b", "paste", "-t", term.target)
}

// input returns the pane's input line: its last line that starts with the
// prompt.
func (term *terminal) input() string {
	term.t.Helper()
	lines := strings.Split(strings.TrimRight(term.run("capture-pane", "-p", "-J", "-t", term.target), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "› ") {
			return strings.TrimRight(lines[i], " ")
		}
	}
	return ""
}

// placeholder is the input line when nothing is typed.
const placeholder = "› Send a message (/help for commands)"

// waitInput polls the input line until it is want.
func (term *terminal) waitInput(want string) {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := term.input()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("the input line is %q, not %q, after 30s; the terminal shows:\n%s", got, want, term.screen())
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a screen scrape, not a wait for a condition
	}
}

// waitGone polls the screen until it no longer contains text.
func (term *terminal) waitGone(text string) {
	term.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Contains(term.screen(), text) {
		if time.Now().After(deadline) {
			term.t.Fatalf("the terminal still shows %q after 30s:\n%s", text, term.screen())
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a screen scrape, not a wait for a condition
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
	mock := startMock(t, "chat", filepath.Join("testdata", "chat.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused")
	// The shell reports the exit status on the screen when the chat ends.
	chatCommand := func(args string) string {
		return "env -i " + strings.Join(env, " ") + " " + bin.penguin + " chat --providers " + providers + " " + args +
			"; echo penguin exited with status $?"
	}
	term := newTerminal(t, env, "chat", chatCommand("--provider chat --model scripted --workspace "+ws+" --approval always-ask"))

	term.waitScreen("penguin chat · chat/scripted · ", 1)

	// A prompt starts the session; its tool call asks, showing what it
	// will write, and Enter allows it.
	term.keys("please create hello.txt", "Enter")
	screen := term.waitScreen("? allow write_file?", 1)
	id := regexp.MustCompile(`session (session-\S+) \(chat/scripted\)`).FindStringSubmatch(screen)
	if id == nil {
		t.Fatalf("no session line:\n%s", screen)
	}
	term.waitScreen("+hello from chat", 1)
	term.keys("Enter")
	term.waitScreen("Created hello.txt.", 1)
	if got, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(got) != "hello from chat\n" {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}

	// A line typed while the task runs steers it.
	term.keys("run something slow", "Enter")
	term.waitScreen("? allow exec_command?", 1)
	term.keys("y")
	// While it runs, the status line says what runs and for how long.
	term.waitScreen("running exec_command · ", 1)
	term.keys("also say banana", "Enter")
	term.waitScreen("» also say banana", 1)
	term.waitScreen("Done, and noted your steering.", 1)

	// Ctrl-C aborts a running task and returns to the prompt.
	term.keys("run something long", "Enter")
	term.waitScreen("? allow exec_command?", 2)
	term.keys("y")
	term.waitScreen("│ started", 1)
	term.keys("C-c")
	term.waitScreen("(aborting)", 1)
	screen = term.waitScreen("⏹ Aborted: You pressed Ctrl-C.", 1)
	if strings.Contains(screen, "│ never") {
		t.Fatalf("the long command was not aborted:\n%s", screen)
	}

	// Slash commands answer at the prompt without a task; /resume picks
	// among this workspace's sessions, with their workspace.
	term.keys("/thinking high", "Enter")
	term.waitScreen("thinking level set to high for this chat", 1)
	term.keys("/thinking", "Enter")
	term.waitScreen("thinking level for the next turn: high, set for this chat (the agent's default is medium)", 1)
	term.keys("/resume", "Enter")
	term.waitScreen(id[1]+"  "+ws+"  please create hello.txt", 1)
	term.keys("Escape")
	term.waitInput(placeholder)

	// Ctrl-C twice at the prompt quits, printing how to resume.
	term.keys("C-c")
	term.waitScreen("press Ctrl-C again to quit", 1)
	term.keys("C-c")
	term.waitScreen("Resume this chat with: penguin chat --resume "+id[1], 1)
	term.waitScreen("penguin exited with status 0", 1)

	// --resume ID shows the conversation so far and carries on; /exit quits.
	term.open("resumed", chatCommand("--resume "+id[1]+" --verbose"))
	screen = term.waitScreen("— resumed session "+id[1], 1)
	for _, want := range []string{"› please create hello.txt", "Created hello.txt.", "› run something long"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the resumed chat does not show %q:\n%s", want, screen)
		}
	}
	// The steering line is shown again as the person typed it, without
	// the engine's markup.
	if !strings.Contains(screen, "» also say banana") || strings.Contains(screen, "[user_steering]") {
		t.Errorf("the resumed chat shows the steering line with markup:\n%s", screen)
	}
	term.keys("/exit", "Enter")
	term.waitScreen("penguin exited with status 0", 1)

	// The session on disk holds the steering and the abort.
	out := firstTrace(t, id[1], proctest.Env(t, "HOME="+dir, "TERM=dumb", "PENGUIN_HOME="+home))
	for _, want := range []string{"also say banana", `"type":"abort"`, "please create hello.txt"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the exported trace lacks %s:\n%s", want, out)
		}
	}
}

// TestChatGoalInTerminal drives /goal in `penguin chat` in tmux against
// its embedded server and the scripted model: a budget that is not a
// number is refused at the prompt; /goal:50k OBJECTIVE runs rounds, each
// shown as "Goal · round N" with the tokens used, until the model claims
// the goal complete in round two.
func TestChatGoalInTerminal(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "goal", filepath.Join("testdata", "goal.yaml"))
	providers := writeProviders(t, route{"goal", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused")
	term := newTerminal(t, env, "goal", "env -i "+strings.Join(env, " ")+" "+bin.penguin+" chat --providers "+providers+
		" --provider goal --model scripted --workspace "+ws+" --approval allow-all; echo penguin exited with status $?")
	term.waitScreen("penguin chat · goal/scripted · ", 1)

	term.keys("/goal:lots TERMINAL-GOAL: make the tests pass", "Enter")
	term.waitScreen("is not a token count", 1)
	term.keys("/goal:50k TERMINAL-GOAL: make the tests pass", "Enter")
	term.waitScreen("◎ Goal · round 1 (0 of 50000 tokens used)", 1)
	term.waitScreen("Round one: two tests still fail.", 1)
	term.waitScreen("◎ Goal · round 2 (330 of 50000 tokens used)", 1)
	term.waitScreen("◎ Goal complete after 2 round(s), 990 tokens", 1)
	term.keys("/exit", "Enter")
	term.waitScreen("penguin exited with status 0", 1)
}

// TestChatTerminalEditing drives `penguin chat` in tmux as a person edits
// and pastes, with NO_COLOR set: a line edited with the arrow keys, a
// half-typed line cleared with Ctrl-C, a three-line paste sent as one
// message, an edit whose approval shows its diff, a six-line output shown
// whole, thinking set apart from the answer, and the history recalled with
// Up after a restart. Every turn of the scripted model matches the message
// it answers, so a message sent wrong is never answered.
func TestChatTerminalEditing(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "terminal", filepath.Join("testdata", "terminal.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Debug logging on: the embedded server's lines must still stay off
	// the chat.
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused", "PENGUIN_LOG_LEVEL=debug")
	// A skill of the default agent, for /skill.
	skill := filepath.Join(dir, "lint")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: lint\ndescription: Lint the notes.\n---\nCount the lines.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	install := exec.CommandContext(testkit.Context(t, 30*time.Second), bin.penguin, "skills", "install", skill)
	install.Env = env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("penguin skills install: %v\n%s", err, out)
	}
	command := "env -i " + strings.Join(env, " ") + " " + bin.penguin + " chat --providers " + providers +
		" --provider chat --model scripted --workspace " + ws + " --approval always-ask; echo penguin exited with status $?"
	term := newTerminal(t, env, "first", command)
	term.waitScreen("penguin chat · chat/scripted · ", 1)

	// "helo", Left, "l": the line is edited in place, not sent as escapes.
	term.keys("helo", "Left", "l")
	term.waitInput("› hello")
	term.keys("Enter")
	term.waitScreen("You said hello.", 1)

	// Ctrl-C clears a half-typed line; a three-line paste is one message.
	term.keys("discard me")
	term.waitInput("› discard me")
	term.keys("C-c")
	term.waitInput(placeholder)
	term.paste("error: one\n  at two\n  at three")
	term.keys("Enter")
	term.waitScreen("Got the whole error.", 1)

	// An edit's approval shows the diff it will apply.
	term.keys("edit please", "Enter")
	screen := term.waitScreen("Allow? [Y/n]", 1)
	for _, want := range []string{"? allow edit_file?", "--- a/notes.txt", "+++ b/notes.txt", "-beta", "+BETA"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the approval does not show %q:\n%s", want, screen)
		}
	}
	term.keys("y")
	term.waitScreen("Edited it.", 1)
	notes := func(want string) {
		t.Helper()
		if got, err := os.ReadFile(filepath.Join(ws, "notes.txt")); err != nil || string(got) != want {
			t.Fatalf("notes.txt = %q, %v; want %q", got, err, want)
		}
	}
	notes("alpha\nBETA\ngamma\n")

	// The turn's change: shown as a diff, undone to the byte, redone.
	term.waitScreen("✎ 1 file(s) changed: M notes.txt", 1)
	term.keys("/diff", "Enter")
	screen = term.waitScreen("M notes.txt +1 -1", 1)
	if !strings.Contains(screen, `of "edit please":`) || strings.Count(screen, "+BETA") != 3 {
		t.Errorf("/diff does not show the change:\n%s", screen)
	}
	term.keys("/undo", "Enter")
	term.waitScreen("undid change #", 1)
	notes("alpha\nbeta\ngamma\n")
	term.keys("/redo", "Enter")
	term.waitScreen("redid change #", 1)
	notes("alpha\nBETA\ngamma\n")

	// /image attaches a picture to the next message, and only to it.
	png := filepath.Join(dir, "dot.png")
	if err := os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"), 0o644); err != nil {
		t.Fatal(err)
	}
	term.keys("/image "+png, "Enter")
	term.waitScreen("attached dot.png; they go with your next message", 1)
	term.keys("what is this", "Enter")
	term.waitScreen("I see your PNG.", 1)

	// While a task runs, /image attaches to the steering line typed next;
	// Tab queues a follow-up, shown under the status line, and Alt-Up
	// takes the last queued one back to edit (here sent as steering). The
	// model's next request carries the image and the recalled line (the
	// script answers nothing else), and the follow-up left in the queue
	// is the next task's prompt.
	term.keys("wait a bit", "Enter")
	term.waitScreen("? allow exec_command?", 1)
	term.keys("y")
	term.waitScreen("running exec_command · ", 1)
	term.keys("/image "+png, "Enter")
	term.waitScreen("attached dot.png; they go with your next message", 2)
	term.keys("steer with it", "Enter")
	term.waitScreen("» steer with it (with dot.png)", 1)
	term.keys("follow-up one", "Tab")
	term.waitScreen("⏵ queued: follow-up one (Alt-Up edits)", 1)
	term.keys("recalled one", "Tab")
	term.waitScreen("⏵ queued: recalled one (Alt-Up edits)", 1)
	term.keys("M-Up")
	term.waitInput("› recalled one")
	term.waitGone("⏵ queued: recalled one")
	term.keys(" now", "Enter")
	term.waitScreen("» recalled one now", 1)
	term.waitScreen("Steered with the PNG and the recalled line.", 1)
	term.waitScreen("Answered the follow-up.", 1)
	term.waitGone("⏵ queued:")

	// /skill pins a skill for the next message, which the model gets
	// behind the [use_skills] block; a skill the agent lacks is refused.
	term.keys("/skill lint", "Enter")
	term.waitScreen("pinned lint; they go with your next message", 1)
	term.keys("tidy the notes", "Enter")
	term.waitScreen("Tidied with the lint skill.", 1)
	term.keys("/skill nope", "Enter")
	term.waitScreen("pinned nope; they go with your next message", 1)
	term.keys("tidy again", "Enter")
	term.waitScreen(`no skill "nope" is installed`, 1)

	// A six-line output is shown whole.
	term.keys("six lines", "Enter")
	term.waitScreen("? allow exec_command?", 2)
	term.keys("y")
	screen = term.waitScreen("Six lines printed.", 1)
	for i := 1; i <= 6; i++ {
		if !strings.Contains(screen, fmt.Sprintf("│ l%d\n", i)) {
			t.Errorf("the output does not show line l%d:\n%s", i, screen)
		}
	}

	// Without colour, thinking stands apart from the answer: a label, and
	// every line of it marked.
	term.keys("think first", "Enter")
	screen = term.waitScreen("The answer is 42.", 1)
	if !strings.Contains(screen, "✻ thinking\n  ┊ Let me consider.\n  ┊ The question is simple.\n") ||
		strings.Contains(screen, "┊ The answer is 42.") {
		t.Errorf("thinking and the answer are not apart:\n%s", screen)
	}
	// A failed request the engine retries is one countdown line in the
	// live area, gone once the retry answers; no log line reaches the chat.
	term.keys("flaky", "Enter")
	term.waitScreen("; retrying in ", 1)
	term.waitScreen("Recovered after one retry.", 1)
	term.waitGone("retrying in")
	if screen := term.screen(); strings.Contains(screen, "level=") || strings.Contains(screen, "msg=") {
		t.Errorf("log lines reached the chat:\n%s", screen)
	}
	term.keys("C-d")
	screen = term.waitScreen("penguin exited with status 0", 1)
	id := regexp.MustCompile(`Resume this chat with: penguin chat --resume (\S+)`).FindStringSubmatch(screen)
	if id == nil {
		t.Fatalf("no resume line:\n%s", screen)
	}

	// After a restart, Up recalls the last message.
	term.open("second", command)
	term.waitScreen("penguin chat · chat/scripted · ", 1)
	term.keys("Up")
	term.waitInput("› flaky")
	term.keys("C-c")
	term.waitInput(placeholder)
	term.keys("C-d")
	screen = term.waitScreen("penguin exited with status 0", 1)
	if strings.Contains(screen, "Resume this chat") {
		t.Errorf("a chat without a message left a session:\n%s", screen)
	}

	// The session holds the edited line and the paste as one message, and
	// not the cleared line.
	env = proctest.Env(t, "HOME="+dir, "TERM=dumb", "PENGUIN_HOME="+home)
	out := firstTrace(t, id[1], env)
	for _, want := range []string{`"hello"`, `"error: one\n  at two\n  at three"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the exported trace lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "discard me") {
		t.Errorf("the cleared line was sent:\n%s", out)
	}
	list := exec.CommandContext(testkit.Context(t, 30*time.Second), bin.penguin, "sessions")
	list.Env = env
	out, err := list.CombinedOutput()
	if err != nil || strings.Count(string(out), "session-") != 1 {
		t.Errorf("penguin sessions shows %d sessions, want 1: %v\n%s", strings.Count(string(out), "session-"), err, out)
	}
}

// TestRunAsksOnTheTerminal pipes a prompt into `penguin run` in a real
// terminal: standard input is used up by the prompt, so the approval is
// asked and answered on the terminal itself, showing what will be written.
func TestRunAsksOnTheTerminal(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "run-tty", filepath.Join("testdata", "chat.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused")
	command := "echo please create hello.txt | env -i " + strings.Join(env, " ") + " " + bin.penguin + " run --providers " + providers +
		" --provider chat --model scripted --workspace " + ws + " --approval always-ask; echo penguin exited with status $?"
	term := newTerminal(t, env, "run", command)
	screen := term.waitScreen("Allow? [Y/n]", 1)
	if !strings.Contains(screen, "? allow write_file?\n  +++ hello.txt (1 lines)\n  +hello from chat\n") {
		t.Errorf("the approval does not show what will be written:\n%s", screen)
	}
	term.keys("y", "Enter")
	term.waitScreen("Created hello.txt.", 1)
	term.waitScreen("penguin exited with status 0", 1)
	if got, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(got) != "hello from chat\n" {
		t.Fatalf("hello.txt = %q, %v", got, err)
	}
}

// TestChatEndsWhenItsTerminalCloses closes the terminal under a running
// chat (tmux's kill-server hangs its panes up, as closing a window does):
// the chat and its embedded server end instead of running on.
func TestChatEndsWhenItsTerminalCloses(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "hangup", filepath.Join("testdata", "chat.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	home, ws, dir := t.TempDir(), t.TempDir(), t.TempDir()
	env := proctest.Env(t, "HOME="+dir, "TERM=xterm-256color", "NO_COLOR=1", "PENGUIN_HOME="+home, "MOCK_API_KEY=unused")
	term := newTerminal(t, env, "hangup", "env -i "+strings.Join(env, " ")+" "+bin.penguin+" chat --providers "+providers+
		" --provider chat --model scripted --workspace "+ws)
	term.waitScreen("penguin chat · chat/scripted · ", 1)
	pid := processWith(t, ws)
	if pid == 0 {
		t.Fatal("no penguin chat process found")
	}
	term.run("kill-server")
	eventually.True(t, "the chat to end after its terminal closed", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
		return err != nil
	})
}

// processWith returns the pid of the penguin process whose command line
// holds text, or 0.
func processWith(t *testing.T, text string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(cmdline), bin.penguin+"\x00") && strings.Contains(string(cmdline), text) {
			return pid
		}
	}
	return 0
}
