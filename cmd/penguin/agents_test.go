package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// agentCLI runs the built binary against the embedded server over home,
// with stdin and extra environment.
func agentCLI(t *testing.T, home, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append(args, "--home", home)...)
	cmd.Env = proctest.Env(t, append([]string{"TERM=dumb"}, env...)...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("penguin %v timed out", args)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// TestAgentCommands drives the agent commands as a user would, each
// against an embedded server over one data directory.
func TestAgentCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ok := func(stdin string, env []string, args ...string) string {
		t.Helper()
		r := agentCLI(t, home, stdin, env, args...)
		if r.code != 0 {
			t.Fatalf("penguin %v exited %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	fails := func(stdin string, want string, args ...string) {
		t.Helper()
		r := agentCLI(t, home, stdin, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("penguin %v: exit %d, stderr %q; want a failure saying %q", args, r.code, r.stderr, want)
		}
	}
	ok("", nil, "agents", "create", "rev")
	if out := ok("", nil, "agents", "list"); !strings.Contains(out, "default") || !strings.Contains(out, "rev") {
		t.Fatalf("agents list:\n%s", out)
	}
	// The vault: the value from stdin, never shown.
	ok("tok-123\n", nil, "vault", "set", "GH_TOKEN", "--agent", "rev")
	if out := ok("", nil, "vault", "list", "--agent", "rev"); out != "GH_TOKEN\n" {
		t.Fatalf("vault list: %q", out)
	}
	fails("x", "invalid vault key", "vault", "set", "not a name", "--agent", "rev")
	ok("v\n", nil, "vault", "set", "OTHER", "--agent", "rev")
	ok("", nil, "vault", "delete", "OTHER", "--agent", "rev")
	if out := ok("", nil, "vault", "list", "--agent", "rev"); out != "GH_TOKEN\n" {
		t.Fatalf("vault list after delete: %q", out)
	}
	// config edit: a broken file reopens with the error on top; the
	// fixed one is saved.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	saw := filepath.Join(t.TempDir(), "saw")
	script := "#!/bin/sh\nn=$(cat \"$1.n\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$1.n\"\n" +
		"if [ $n = 1 ]; then printf 'max_turns: [\\n' > \"$1\"; else cp \"$1\" " + saw + "; printf '# mine\\nmax_turns: 9\\n' > \"$1\"; fi\n"
	if err := os.WriteFile(editor, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ok("", []string{"EDITOR=" + editor}, "config", "edit", "--agent", "rev")
	if got, _ := os.ReadFile(saw); !strings.Contains(string(got), "# penguin: content: system_config.yaml:1") {
		t.Fatalf("the second round did not show the error: %q", got)
	}
	if out := ok("", nil, "config", "show", "--agent", "rev"); out != "# mine\nmax_turns: 9\n" {
		t.Fatalf("config show: %q", out)
	}
	agentsMD := filepath.Join(t.TempDir(), "agents-md.sh")
	os.WriteFile(agentsMD, []byte("#!/bin/sh\nprintf 'Review only.\\n' > \"$1\"\n"), 0o755)
	ok("", []string{"EDITOR=" + agentsMD}, "config", "edit", "--file", "AGENTS.md", "--agent", "rev")
	if out := ok("", nil, "config", "show", "--file", "AGENTS.md", "--agent", "rev"); out != "Review only.\n" {
		t.Fatalf("config show --file AGENTS.md: %q", out)
	}
	// Skills from a directory; a link in it is refused.
	skill := filepath.Join(t.TempDir(), "pdf")
	os.MkdirAll(skill, 0o755)
	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: pdf\ndescription: Read PDFs.\n---\n"), 0o644)
	ok("", nil, "skills", "install", skill, "--agent", "rev")
	ok("", nil, "skills", "disable", "pdf", "--agent", "rev")
	if out := ok("", nil, "skills", "list", "--agent", "rev"); !strings.Contains(out, "pdf") || !strings.Contains(out, "false") {
		t.Fatalf("skills list:\n%s", out)
	}
	ok("", nil, "skills", "enable", "pdf", "--agent", "rev")
	if out := ok("", nil, "skills", "list", "--agent", "rev"); !strings.Contains(out, "true") {
		t.Fatalf("skills list after enable:\n%s", out)
	}
	ok("", nil, "skills", "uninstall", "pdf", "--agent", "rev")
	// From the engine's skill library (skills/ in the data directory).
	os.MkdirAll(filepath.Join(home, "skills", "lint"), 0o755)
	os.WriteFile(filepath.Join(home, "skills", "lint", "SKILL.md"), []byte("---\nname: lint\ndescription: Lint the code.\n---\n"), 0o644)
	ok("", nil, "skills", "install", "--server-dir", "lint", "--agent", "rev")
	if out := ok("", nil, "skills", "list", "--agent", "rev"); !strings.Contains(out, "Lint the code.") {
		t.Fatalf("skills list after a library install:\n%s", out)
	}
	fails("", "server_dir", "skills", "install", "--server-dir", "/etc", "--agent", "rev")
	ok("", nil, "skills", "uninstall", "lint", "--agent", "rev")
	os.Symlink("/etc/passwd", filepath.Join(skill, "passwd"))
	fails("", "not a regular file", "skills", "install", skill, "--agent", "rev")
	// Memory: import, list, show, export, delete; a malformed document
	// is refused.
	doc := filepath.Join(t.TempDir(), "mem.json")
	os.WriteFile(doc, []byte(`{"scope":"user","files":{"MEMORY.md":"- [a](a.md)\n","a.md":"---\ndescription: fact A\n---\nA\n"}}`), 0o644)
	ok("", nil, "memory", "import", "user", doc, "--agent", "rev")
	if out := ok("", nil, "memory", "list", "user", "--agent", "rev"); !strings.Contains(out, "fact A") {
		t.Fatalf("memory list:\n%s", out)
	}
	if out := ok("", nil, "memory", "show", "user", "a.md", "--agent", "rev"); !strings.Contains(out, "A\n") {
		t.Fatalf("memory show: %q", out)
	}
	if out := ok("", nil, "memory", "scopes", "--agent", "rev"); !strings.Contains(out, "user") || !strings.Contains(out, "2") {
		t.Fatalf("memory scopes:\n%s", out)
	}
	// A copy takes the configuration and vault, not the memory.
	ok("", nil, "agents", "create", "copy", "--from", "rev")
	if out := ok("", nil, "vault", "list", "--agent", "copy"); out != "GH_TOKEN\n" {
		t.Fatalf("the copy's vault: %q", out)
	}
	if out := ok("", nil, "memory", "list", "user", "--agent", "copy"); strings.Contains(out, "fact A") {
		t.Fatalf("the copy took the memory:\n%s", out)
	}
	ok("", nil, "memory", "delete", "user", "a.md", "--agent", "rev")
	var exported map[string]any
	if err := json.Unmarshal([]byte(ok("", nil, "memory", "export", "user", "--agent", "rev")), &exported); err != nil {
		t.Fatal(err)
	}
	if files := exported["files"].(map[string]any); files["MEMORY.md"] != "" || len(files) != 1 {
		t.Fatalf("after delete, the export: %v", exported)
	}
	os.WriteFile(doc, []byte(`{"files":`), 0o644)
	fails("", "document", "memory", "import", "user", doc, "--agent", "rev")
	os.WriteFile(doc, []byte(`{"files":{}}`), 0o644)
	fails("", "confirm", "memory", "import", "user", doc, "--mode", "replace", "--agent", "rev")
	// MCP: an http server; the header value never listed.
	ok("", nil, "mcp", "add", "gh", "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization=Bearer zzz", "--agent", "rev")
	if out := ok("", nil, "mcp", "list", "--agent", "rev"); !strings.Contains(out, "gh") || strings.Contains(out, "zzz") {
		t.Fatalf("mcp list:\n%s", out)
	}
	fails("", "does not connect", "mcp", "test", "gh", "--agent", "rev")
	ok("", nil, "mcp", "remove", "gh", "--agent", "rev")
	// Export, import under another name, delete.
	archive := filepath.Join(t.TempDir(), "rev.tar.gz")
	ok("", nil, "agents", "export", "rev", archive)
	ok("", nil, "agents", "import", "rev2", archive)
	if out := ok("", nil, "config", "show", "--agent", "rev2"); out != "# mine\nmax_turns: 9\n" {
		t.Fatalf("the imported agent's config: %q", out)
	}
	fails("", "exists", "agents", "import", "rev2", archive)
	ok("", nil, "agents", "rename", "rev2", "rev3")
	if out := ok("", nil, "agents", "list"); !strings.Contains(out, "rev3") || strings.Contains(out, "rev2") {
		t.Fatalf("agents list after rename:\n%s", out)
	}
	ok("", nil, "agents", "delete", "rev3")
	fails("", "NotFound", "agents", "delete", "rev3")
}

// TestAgentEditAndModelCommands: a memory file written and rewritten in
// $EDITOR, an agent's builtin tools switched off and on, and its default
// model checked against the project's routes, tested on penguin mockllm
// and set.
func TestAgentEditAndModelCommands(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	script := filepath.Join("..", "..", "internal", "testkit", "emulator", "testdata", "agent-loop.yaml")
	_, url, _ := startMockLLM(t, ctx, []string{"MOCK_KEY=sk-mock"}, "--script", script, "--api-key-env", "MOCK_KEY")
	home := t.TempDir()
	routes := []string{"OPENAI_API_KEY=sk-mock", "OPENAI_BASE_URL=" + url + "/v1"}
	ok := func(env []string, args ...string) string {
		t.Helper()
		r := agentCLI(t, home, "", append(routes, env...), args...)
		if r.code != 0 {
			t.Fatalf("penguin %v exited %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	fails := func(want string, args ...string) {
		t.Helper()
		r := agentCLI(t, home, "", routes, args...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("penguin %v: exit %d, stderr %q; want a failure saying %q", args, r.code, r.stderr, want)
		}
	}
	// memory edit: a new file, then an edit of it; a name the engine
	// refuses reopens the editor with the reason, and leaving it
	// unchanged writes nothing.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	os.WriteFile(editor, []byte("#!/bin/sh\nprintf '%s' \"$NEW_TEXT\" > \"$1\"\n"), 0o755)
	ok([]string{"EDITOR=" + editor, "NEW_TEXT=The user's build runs with make ci."}, "memory", "edit", "user", "build.md")
	ok([]string{"EDITOR=" + editor, "NEW_TEXT=Builds: make ci, then make lint."}, "memory", "edit", "user", "build.md")
	if out := ok(nil, "memory", "show", "user", "build.md"); out != "Builds: make ci, then make lint." {
		t.Fatalf("memory show after edit: %q", out)
	}
	if out := ok([]string{"EDITOR=true"}, "memory", "edit", "user", "build.md"); !strings.Contains(out, "unchanged") {
		t.Fatalf("an edit left as it was: %q", out)
	}
	fails("name", "memory", "edit", "user", "../escape.md", "--agent", "default")

	// tools: every builtin enabled; one switched off and on again.
	list := ok(nil, "tools", "list")
	for _, want := range []string{"exec_command", "builtin", "run_subagent", "engine"} {
		if !strings.Contains(list, want) {
			t.Fatalf("tools list lacks %q:\n%s", want, list)
		}
	}
	ok(nil, "tools", "disable", "exec_command")
	if line := lineOf(ok(nil, "tools", "list"), "exec_command"); !strings.Contains(line, "false") {
		t.Fatalf("exec_command after disable: %q", line)
	}
	if cfg := ok(nil, "config", "show"); !strings.Contains(cfg, "\n    - name: read_file\n") || strings.Contains(cfg, "\n    - name: exec_command\n") {
		t.Fatalf("the configuration after disable:\n%s", cfg)
	}
	ok(nil, "tools", "enable", "exec_command")
	if line := lineOf(ok(nil, "tools", "list"), "exec_command"); !strings.Contains(line, "true") {
		t.Fatalf("exec_command after enable: %q", line)
	}
	fails("no builtin tool", "tools", "disable", "nope")

	// config model: none yet; a provider the project has no route for is
	// refused; the mock answers the test, and the model is set.
	if out := ok(nil, "config", "model"); !strings.Contains(out, "none") {
		t.Fatalf("config model before any: %q", out)
	}
	fails(`"nowhere" is not a provider route`, "config", "model", "nowhere/x")
	fails("PROVIDER/MODEL", "config", "model", "gpt-5-mini")
	if out := ok(nil, "config", "model", "openai/gpt-5-mini", "--test"); !strings.Contains(out, "answered in") || !strings.Contains(out, "the default model is openai/gpt-5-mini") {
		t.Fatalf("config model --test and set: %q", out)
	}
	if out := ok(nil, "config", "model"); out != "openai/gpt-5-mini\n" {
		t.Fatalf("config model after set: %q", out)
	}

	// model-settings: a local model's window and price in the project; a
	// route the project lacks, a negative price and no setting at all
	// refused; cleared.
	ok(nil, "model-settings", "set", "openai/local-7b", "--context-window", "32768", "--input", "0.1", "--output", "0.2", "--cache-read", "0.05")
	if line := lineOf(ok(nil, "model-settings", "list"), "openai/local-7b"); !strings.Contains(line, "32768") || !strings.Contains(line, "0.2") || !strings.Contains(line, "0.05") {
		t.Fatalf("model-settings list: %q", line)
	}
	fails("settings.model.provider", "model-settings", "set", "nowhere/x", "--context-window", "8192")
	fails("settings.price.input", "model-settings", "set", "openai/local-7b", "--input", "-1")
	fails("settings.context_window", "model-settings", "set", "openai/local-7b", "--context-window", "10")
	fails("give --context-window", "model-settings", "set", "openai/local-7b")
	ok(nil, "model-settings", "clear", "openai/local-7b")
	if out := ok(nil, "model-settings", "list"); strings.Contains(out, "local-7b") {
		t.Fatalf("model-settings list after clear: %q", out)
	}
}

// lineOf returns the first line of out that holds word.
func lineOf(out, word string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, word) {
			return l
		}
	}
	return ""
}

// TestRunWithSkill: `penguin run --skill` sends the message behind the
// [use_skills] block (the mock answers only a request whose last message
// holds it), and a skill the agent does not have is refused, named.
func TestRunWithSkill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	script := filepath.Join(t.TempDir(), "skills.yaml")
	os.WriteFile(script, []byte("turns:\n  - match: \"[use_skills]\\nskills: pdf, lint\\n[/use_skills]\\n\\nread report.pdf\"\n    text: \"Read it with both skills.\"\n"), 0o644)
	_, url, _ := startMockLLM(t, ctx, []string{"MOCK_KEY=sk-mock"}, "--script", script, "--api-key-env", "MOCK_KEY")
	home := t.TempDir()
	routes := []string{"OPENAI_API_KEY=sk-mock", "OPENAI_BASE_URL=" + url + "/v1"}
	for _, name := range []string{"pdf", "lint"} {
		dir := filepath.Join(t.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: The "+name+" skill.\n---\n"), 0o644)
		if r := agentCLI(t, home, "", routes, "skills", "install", dir); r.code != 0 {
			t.Fatalf("skills install %s: %d %s", name, r.code, r.stderr)
		}
	}
	run := []string{"run", "--provider", "openai", "--model", "gpt-5-mini", "--approval", "deny-all"}
	r := agentCLI(t, home, "", routes, append(run, "--skill", "pdf", "--skill", "lint", "read report.pdf")...)
	if r.code != 0 || !strings.Contains(r.stdout, "Read it with both skills.") {
		t.Fatalf("run --skill: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r := agentCLI(t, home, "", routes, "skills", "disable", "lint"); r.code != 0 {
		t.Fatalf("skills disable: %s", r.stderr)
	}
	for skill, want := range map[string]string{
		"nope": `skills[0]: no skill "nope" is installed`,
		"lint": `skills[0]: skill "lint" is disabled`,
		"../x": `skills[0]: "../x" is not a skill name`,
	} {
		r := agentCLI(t, home, "", routes, append(run, "--skill", skill, "read report.pdf")...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("run --skill %s: exit %d, stderr %q; want %q", skill, r.code, r.stderr, want)
		}
	}
}
