package scaleout

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// turnSpan is the name of the span the engine opens for each turn (one
// model request, its reconnects and the tool calls it asked for).
const turnSpan = "engine.turn"

// The service.name of each service's spans.
const (
	engineService = "penguin-engine"
	llmService    = "penguin-llm"
	envService    = "penguin-environment"
)

// tracesScript is the model of the traces test: a tool call, then an
// answer, so the task has two turns and only the first runs a tool.
const tracesScript = `turns:
  - name: call
    text: "Running it."
    tool_calls:
      - name: exec_command
        arguments: '{"description":"Say it","cmd":"echo traced-output"}'
    usage: {input: 100, output: 10}
  - name: answer
    text: "It printed traced-output."
    usage: {input: 120, output: 8}
`

// TestTraces runs the three services and the emulator as separate
// processes that export their spans over OTLP to a receiver inside the
// test, runs one task with a tool call, and checks that every turn is one
// trace: a root span of the engine's with the llm service's spans and, for
// the turn that ran a tool, the environment service's spans below it,
// joined through the trace context the gRPC calls carry.
func TestTraces(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 90*time.Second)
	recv := startReceiver(t)
	dir := t.TempDir()
	otel := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.endpoint(),
		// Export each span within a tenth of a second of its end.
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
	start := func(name string, env []string, args ...string) *netns.Proc {
		cmd := exec.Command(penguinBin, args...)
		cmd.Env = append(append(e2etest.BaseEnv(t), otel...), env...)
		return netns.Start(t, name, cmd)
	}
	mock := start("mockllm", nil, "mockllm", "--listen", "127.0.0.1:0", "--script", writeFile(t, dir, "script.yaml", tracesScript))
	mockURL := mock.WaitLog("mockllm listening", nil, "url", 30*time.Second)
	llm := start("llm", []string{"MOCK_API_KEY=unused"}, "serve", "llm", "--listen", "127.0.0.1:0", "--providers", providersFile(t, mockURL))
	root := t.TempDir()
	env := start("environment", nil, "serve", "environment", "--listen", "127.0.0.1:0", "--root", root)
	llmAddr := llm.WaitLog("gRPC server listening", map[string]string{"server": "llm"}, "addr", 30*time.Second)
	envAddr := env.WaitLog("gRPC server listening", map[string]string{"server": "environment"}, "addr", 30*time.Second)
	engine := start("engine", nil, "serve", "engine", "--listen", "127.0.0.1:0", "--llm", llmAddr, "--environment", envAddr,
		"--store", filepath.Join(dir, "penguin.db"), "--home", t.TempDir())
	engineAddr := engine.WaitLog("gRPC server listening", map[string]string{"server": "engine"}, "addr", 30*time.Second)
	if err := netns.WaitServing(ctx, engineAddr, ""); err != nil {
		t.Fatal(err)
	}

	client := e2etest.DialEngine(t, engineAddr, "")
	id := newSession(ctx, t, client, root)
	r := runToEnd(ctx, t, client, id, "Say it, please.")
	if !strings.Contains(r.text(), "traced-output") {
		t.Fatalf("the tool did not run; the run said:\n%s", r.text())
	}

	// Both turns, with their llm calls and the one tool call, arrive.
	spans := recv.waitFor(t, 30*time.Second, "two turns with their llm and environment spans", func(ss []span) bool {
		turns := filter(ss, func(s span) bool {
			return s.service == engineService && s.name == turnSpan && s.attrs["penguin.session_id"] == id
		})
		llms := filter(ss, func(s span) bool { return s.service == llmService && s.name == "penguin.v1.LLMService/StreamGenerate" })
		tools := filter(ss, func(s span) bool {
			return s.service == envService && s.name == "penguin.v1.EnvironmentService/ExecuteTool"
		})
		return len(turns) >= 2 && len(llms) >= 2 && len(tools) >= 1
	})

	turns := filter(spans, func(s span) bool {
		return s.service == engineService && s.name == turnSpan && s.attrs["penguin.session_id"] == id
	})
	if len(turns) != 2 {
		t.Fatalf("want 2 turn spans for session %s, got %d:\n%s", id, len(turns), describe(spans))
	}
	slices.SortFunc(turns, func(a, b span) int { return a.start.Compare(b.start) })
	if turns[0].trace == turns[1].trace {
		t.Fatalf("the two turns share trace %s; each turn must be its own trace", turns[0].trace)
	}
	byID := map[string]span{}
	for _, s := range spans {
		byID[s.id] = s
	}
	for i, turn := range turns {
		if turn.parent != "" {
			t.Errorf("turn %d: the turn span has a parent (%s); it must be the root of its trace", i+1, short(turn.parent))
		}
		tree := filter(spans, func(s span) bool { return s.trace == turn.trace })
		services := map[string]bool{}
		for _, s := range tree {
			services[s.service] = true
			// Every span of the trace hangs below the turn span.
			for cur := s; cur.id != turn.id; {
				p, ok := byID[cur.parent]
				if !ok || p.trace != turn.trace {
					t.Errorf("turn %d: span %v does not hang below the turn span:\n%s", i+1, s, describe(tree))
					break
				}
				cur = p
			}
		}
		want := []string{engineService, llmService}
		if i == 0 {
			want = append(want, envService)
		}
		for _, svc := range want {
			if !services[svc] {
				t.Errorf("turn %d: no span of %s in its trace:\n%s", i+1, svc, describe(tree))
			}
		}
		if i == 1 && services[envService] {
			t.Errorf("turn 2 ran no tool, but its trace has environment spans:\n%s", describe(tree))
		}
	}

	// No model call or tool call of the task lies outside a turn's trace.
	inTurn := map[string]bool{turns[0].trace: true, turns[1].trace: true}
	for _, s := range spans {
		if (s.service == llmService && s.name == "penguin.v1.LLMService/StreamGenerate") ||
			(s.service == envService && s.name == "penguin.v1.EnvironmentService/ExecuteTool") {
			if !inTurn[s.trace] {
				t.Errorf("span %v is outside the turns' traces", s)
			}
		}
	}
	t.Logf("the turns' traces:\n%s", describe(filter(spans, func(s span) bool { return s.trace == turns[0].trace || s.trace == turns[1].trace })))
}

// filter returns the spans keep accepts.
func filter(ss []span, keep func(span) bool) []span {
	var out []span
	for _, s := range ss {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}
