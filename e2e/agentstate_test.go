package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// agentStateScript is the scripted model of TestAgentStateDistributed: the
// first session reads a skill, then keeps what it learnt in workspace
// memory; the second only answers.
const agentStateScript = `
turns:
  - name: read-skill
    tool_calls:
      - name: read_agent_file
        arguments: '{"file_path":"skills/deploy/SKILL.md"}'
  - name: remember
    match: "Ship with make ship-it"
    tool_calls:
      - name: write_agent_file
        arguments: '{"file_path":"memory/workspace/deploy.md","content":"---\nname: deploy\ndescription: how this service ships\nupdated_at: 2026-12-01\n---\nShip with make ship-it, never by hand.\n"}'
      - name: write_agent_file
        arguments: '{"file_path":"memory/workspace/MEMORY.md","content":"- [Deploy](deploy.md) — ships with make ship-it\n"}'
  - name: done
    text: "Deployed, and noted how."
  - name: second-session
    text: "I remember how this ships."
`

// systemPrompt returns the system message of a recorded Chat Completions
// request.
func systemPrompt(t *testing.T, r emulator.Request) string {
	t.Helper()
	msgs, _ := r.Body["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "system" || mm["role"] == "developer" {
			s, _ := mm["content"].(string)
			return s
		}
	}
	t.Fatalf("request %d has no system message: %s", r.Seq, r.RawBody)
	return ""
}

// TestAgentStateDistributed runs the three services as three processes,
// the environment with a root the engine's data directory is not under
// (as on two hosts), and checks that agent state works where the
// environment cannot see it: the workspace's AGENTS.md files, read
// through the environment, reach the model's request in order; the model
// reads a skill and writes a memory through the engine's tools; and a
// later session has that memory in its prompt.
func TestAgentStateDistributed(t *testing.T) {
	t.Parallel()
	script, err := emulator.ParseScript([]byte(agentStateScript))
	if err != nil {
		t.Fatal(err)
	}
	model := emulator.NewServer(script)
	t.Cleanup(model.Close)
	providers := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(providers, []byte(fmt.Sprintf("providers:\n  - name: scripted\n    type: openai\n    base_url: %s\n    api_key_env: MOCK_API_KEY\n", model.OpenAIBaseURL())), 0o600); err != nil {
		t.Fatal(err)
	}

	// The environment's root and the engine's home are apart.
	root, home := t.TempDir(), t.TempDir()
	agent := filepath.Join(home, "agents", "default")
	writeTestFile(t, filepath.Join(agent, "skills", "deploy", "SKILL.md"),
		"---\nname: deploy\ndescription: Ship this service to production.\n---\nShip with make ship-it; never copy binaries by hand.\n")
	repo := filepath.Join(root, "repo")
	ws := filepath.Join(repo, "svc")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(root, "AGENTS.md"), "Above the project: never shown.\n")
	writeTestFile(t, filepath.Join(repo, "AGENTS.md"), "Repo rule: indent with tabs.\n")
	writeTestFile(t, filepath.Join(ws, "AGENTS.md"), "Service rule: run make check before you finish.\n")

	llm := start(t, "serve llm", []string{"MOCK_API_KEY=unused"}, "serve", "llm", "--listen", "127.0.0.1:0", "--providers", providers)
	env := start(t, "serve environment", nil, "serve", "environment", "--listen", "127.0.0.1:0", "--root", root)
	engine := start(t, "serve engine", nil, "serve", "engine", "--listen", "127.0.0.1:0",
		"--llm", grpcAddr(llm, "llm"), "--environment", grpcAddr(env, "environment"), "--home", home)
	engineAddr := grpcAddr(engine, "engine")

	run := func(prompt string) string {
		t.Helper()
		p := start(t, "penguin run", nil, "run", "--engine", engineAddr, "--provider", "scripted", "--model", "demo",
			"--workspace", ws, "--approval", "allow-all", prompt)
		if code := p.Wait(90 * time.Second); code != 0 {
			t.Fatalf("penguin run exited %d:\n%s", code, p.Output())
		}
		return p.Output()
	}
	out := run("deploy the service")
	for _, want := range []string{"read_agent_file", "write_agent_file", "Deployed, and noted how."} {
		if !strings.Contains(out, want) {
			t.Errorf("the first run's output lacks %q:\n%s", want, out)
		}
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the first session made %d model requests, want 3", len(reqs))
	}
	// The workspace's AGENTS.md files, root to working directory, named,
	// and nothing from above the project root.
	first := systemPrompt(t, reqs[0])
	repoRule := "## " + filepath.Join(repo, "AGENTS.md") + "\nRepo rule: indent with tabs."
	svcRule := "## " + filepath.Join(ws, "AGENTS.md") + "\nService rule: run make check before you finish."
	i, j := strings.Index(first, repoRule), strings.Index(first, svcRule)
	if i < 0 || j < 0 || i > j {
		t.Errorf("the system prompt lacks the workspace's AGENTS.md files in order (repo at %d, svc at %d):\n%s", i, j, first)
	}
	if strings.Contains(first, "Above the project") {
		t.Error("an AGENTS.md above the project root reached the prompt")
	}
	// Skills and memory are named by agent paths, never by the engine's
	// disk, which the environment cannot see.
	if !strings.Contains(first, "- deploy: Ship this service to production. (skills/deploy/SKILL.md)") || strings.Contains(first, home) {
		t.Errorf("the skills section names the engine's disk or lacks the skill:\n%s", first)
	}
	// The model got the skill's body back from read_agent_file.
	if !strings.Contains(string(reqs[1].RawBody), "Ship with make ship-it; never copy binaries by hand.") {
		t.Errorf("the skill's body did not reach the model:\n%s", reqs[1].RawBody)
	}

	// The memory is on the engine's side, in this workspace's scope, and
	// nowhere under the environment's root.
	index, err := filepath.Glob(filepath.Join(agent, "memory", "svc-*", "MEMORY.md"))
	if err != nil || len(index) != 1 {
		t.Fatalf("workspace memory index on the engine's disk: %v, %v", index, err)
	}
	if data, _ := os.ReadFile(filepath.Join(filepath.Dir(index[0]), "deploy.md")); !strings.Contains(string(data), "never by hand") {
		t.Errorf("deploy.md = %q", data)
	}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.Name() == "MEMORY.md" || d.Name() == "deploy.md") {
			t.Errorf("memory landed in the environment's root: %s", p)
		}
		return nil
	})

	// A later session in the same workspace sees the memory in its prompt.
	if out := run("how does this ship?"); !strings.Contains(out, "I remember how this ships.") {
		t.Errorf("the second run's output:\n%s", out)
	}
	reqs = model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	if second := systemPrompt(t, reqs[3]); !strings.Contains(second, "- [Deploy](deploy.md) — ships with make ship-it") {
		t.Errorf("the second session's prompt lacks the memory:\n%s", second)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
