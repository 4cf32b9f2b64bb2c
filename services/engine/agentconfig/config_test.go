package agentconfig

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"max_turns", d.MaxTurns, -1},
		{"thinking_level", d.Model.ThinkingLevelProto(), penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM},
		{"max_tokens", d.Model.MaxTokens, int64(32000)},
		{"request_timeout", d.Model.RequestTimeout(), 120 * time.Second},
		{"compaction.enabled", d.Compaction.Enabled, true},
		{"compaction.mode", d.Compaction.ModeProto(), penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE},
		{"compaction.context_threshold", d.Compaction.ContextThreshold, int64(256000)},
		{"compaction.turns_threshold", d.Compaction.TurnsThreshold, int64(-1)},
		{"retry.max_attempts", d.Retry.MaxAttempts, 5},
		{"retry.base_delay", d.Retry.BaseDelay, 2 * time.Second},
		{"retry.max_delay", d.Retry.MaxDelay, 30 * time.Second},
		{"tools.builtin", d.Tools.Builtin == nil, true},
		{"vault.enabled", d.Vault.Enabled, true},
		{"skills.enabled", d.Skills.Enabled, true},
		{"memory.enabled", d.Memory.Enabled, true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for _, ph := range []string{"{{AGENTS_MD}}", "{{SKILLS}}", "{{VAULT}}", "{{MEMORY}}", "{{CWD}}", "{{DATE}}", "{{MODEL_ID}}"} {
		if !strings.Contains(d.SystemPrompt, ph) {
			t.Errorf("the default system prompt lacks %s", ph)
		}
	}
	if !strings.Contains(d.Vault.Prompt, "{{VAULT_KEYS}}") || !strings.Contains(d.Skills.Prompt, "{{SKILL_METADATA}}") {
		t.Error("a section prompt lacks its inner placeholder")
	}
}

// The template Init writes must say exactly what Default() says, comments
// aside, or a new agent would not run with the documented defaults.
func TestDefaultTemplateMatchesDefault(t *testing.T) {
	t.Parallel()
	c, err := Parse("system_config.yaml", []byte(DefaultYAML()))
	if err != nil {
		t.Fatalf("the default template does not parse: %v", err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("the default template differs from Default():\n got %+v\nwant %+v", c, Default())
	}
}

func TestCompactionTriggers(t *testing.T) {
	t.Parallel()
	c := Default().Compaction
	cases := []struct {
		window, want int64
	}{
		{0, DefaultContextWindow - 2048},      // unknown window: 128000 assumed
		{32768, 32768 - 2048},                 // a small model compacts inside its window
		{1_000_000, 256000},                   // a large one at the configured threshold
		{258048, 256000},                      // the crossover point
		{1000, 1},                             // absurdly small windows still trigger
		{200_000, 200_000 - 2048},             // window below the threshold
		{256000 + 2048 + 1, 256000},           // just above
		{DefaultContextWindow, 128000 - 2048}, // explicit default
	}
	for _, tc := range cases {
		if got := c.EffectiveContextThreshold(tc.window); got != tc.want {
			t.Errorf("EffectiveContextThreshold(%d) = %d, want %d", tc.window, got, tc.want)
		}
	}
	if !c.ContextDue(256000, 1_000_000) || c.ContextDue(255999, 1_000_000) {
		t.Error("ContextDue is off by one at the threshold")
	}
	if c.TurnsDue(1 << 40) {
		t.Error("turns_threshold -1 must never trigger")
	}
	c.TurnsThreshold = 3
	if c.TurnsDue(2) || !c.TurnsDue(3) {
		t.Error("TurnsDue(3) with threshold 3 must trigger, 2 must not")
	}
	c.Enabled = false
	if c.TurnsDue(3) || c.ContextDue(1<<40, 0) {
		t.Error("a disabled compaction must not trigger automatically")
	}
}

// fullConfig sets every field to a non-default value.
func fullConfig() Config {
	f := false
	to, max := int64(5000), int64(100)
	c := Config{
		Name:         "reviewer",
		Description:  "Reviews code.",
		Version:      7,
		SystemPrompt: "You review code in {{CWD}}.\n{{AGENTS_MD}}\n",
		MaxTurns:     40,
		Model: ModelSettings{
			Provider:         "anthropic",
			ModelID:          "claude-sonnet-5",
			ThinkingLevel:    "xhigh",
			MaxTokens:        -1,
			ContextWindow:    200000,
			RequestTimeoutMS: 0,
			VisionModel:      ModelRef{Provider: "google", ModelID: "gemini-3.1-pro-preview"},
		},
		Compaction: CompactionSettings{
			Enabled:          false,
			Mode:             ModeDiscard,
			ContextThreshold: 100000,
			TurnsThreshold:   50,
			Prompt:           "Summarize. [summary]…[/summary]\n",
			RetryNote:        "Again, please.\n",
		},
		Tools: ToolSettings{
			Builtin: []ToolSpec{
				{Name: "exec_command", TimeoutMS: &to, CallDescription: &f},
				{Name: "read_file", Description: "Read a file.", Permission: "r", MaxOutputLength: &max,
					Parameters: `{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"integer","minimum":1}},"required":["file_path"]}`},
				{Name: ToolRunSubagent, Permission: "r"},
			},
			Custom: []ToolSpec{{
				Name: "word_count", Description: "Count words.", Permission: "r", ForModel: ForTextOnly,
				Parameters: `{"type":"object","properties":{"path":{"type":"string"},"ratio":{"type":"number","default":0.5},"deep":{"type":"boolean","default":true},"x":{"default":null}}}`,
				Command:    "wc -w",
			}},
			MCPServers: []MCPServer{
				{Name: "fs", Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"A": "1"}, Cwd: "/tmp", ConnectTimeoutMS: 2000, TimeoutMS: 9000, Permission: "r"},
				{Name: "docs", Transport: "http", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}, Permission: "rw"},
			},
		},
		Retry:  RetrySettings{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Minute + 500*time.Millisecond},
		Vault:  SectionSettings{Enabled: false, Prompt: "V {{VAULT_KEYS}}\n"},
		Skills: SectionSettings{Enabled: false, Prompt: "S {{SKILL_METADATA}}\n"},
		Memory: MemorySettings{Enabled: false, Prompt: "M\n", WorkspacePrompt: "W\n"},
	}
	return c
}

func TestConfigRoundTrip(t *testing.T) {
	t.Parallel()
	want := fullConfig()
	data, err := Marshal(want)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	got, err := Parse("system_config.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v\nfile:\n%s", got, want, data)
	}
	// The schema is written as a YAML mapping, not a JSON string, and
	// keeps its key order.
	if strings.Contains(string(data), `"type":"object"`) {
		t.Errorf("parameters were written as a JSON string:\n%s", data)
	}
	if i, j := strings.Index(string(data), "file_path:"), strings.Index(string(data), "offset:"); i < 0 || j < i {
		t.Errorf("schema key order not kept:\n%s", data)
	}
	// Writing it again gives the same bytes.
	again, err := Marshal(got)
	if err != nil || string(again) != string(data) {
		t.Errorf("a second write differs from the first (%v)", err)
	}
}

func TestPartialConfigKeepsDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse("c.yaml", []byte("model:\n  max_tokens: 1000\ncompaction:\n  mode: discard\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Model.MaxTokens != 1000 || c.Compaction.Mode != ModeDiscard {
		t.Errorf("written keys not applied: %+v", c)
	}
	if c.Model.ThinkingLevel != d.Model.ThinkingLevel || c.Model.RequestTimeoutMS != d.Model.RequestTimeoutMS ||
		c.Compaction.Prompt != d.Compaction.Prompt || c.SystemPrompt != d.SystemPrompt || c.Retry != d.Retry {
		t.Errorf("keys left out lost their defaults: %+v", c)
	}
	// Empty and comment-only files are all defaults.
	for _, src := range []string{"", "# nothing\n", "---\n"} {
		c, err := Parse("c.yaml", []byte(src))
		if err != nil || !reflect.DeepEqual(c, d) {
			t.Errorf("Parse(%q) = %v, want the defaults", src, err)
		}
	}
}

func TestParametersForms(t *testing.T) {
	t.Parallel()
	src := `tools:
  custom:
    - name: a
      description: A.
      command: "true"
      parameters: '{"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}'
    - name: b
      description: B.
      command: "true"
      parameters:
        type: object
        properties:
          z: {type: string, enum: [x, "y", "1"]}
          a: {type: integer, maximum: 10, exclusive: false, ratio: 1.5, nothing: null}
        required: [z]
`
	c, err := Parse("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(c.Tools.Custom[0].Parameters), `{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}`; got != want {
		t.Errorf("JSON string form = %s, want %s", got, want)
	}
	want := `{"type":"object","properties":{"z":{"type":"string","enum":["x","y","1"]},"a":{"type":"integer","maximum":10,"exclusive":false,"ratio":1.5,"nothing":null}},"required":["z"]}`
	if got := string(c.Tools.Custom[1].Parameters); got != want {
		t.Errorf("mapping form = %s, want %s", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  string
		line int
		want string // a part of the message
	}{
		{"syntax", "model:\n  max_tokens: [1,\n", 2, "did not find"},
		{"duplicate key", "max_turns: 1\nmax_turns: 2\n", 2, `key "max_turns" appears twice (first at line 1)`},
		{"list for scalar", "system_prompt: [a]\n", 1, "expected a string, got a list"},
		{"unknown top key", "system_prompt: hi\nbogus: 1\n", 2, `unknown key "bogus"`},
		{"unknown nested key", "model:\n  max_token: 5\n", 2, `model: unknown key "max_token"`},
		{"unknown key in a list item", "tools:\n  builtin:\n    - name: read_file\n      timeout: 5\n", 4, `tools.builtin[0]: unknown key "timeout"`},
		{"unknown key in PenguinHarness's nesting", "tools:\n  mcpServers:\n    - name: a\n      config:\n        command: x\n        disabled: true\n", 6, `tools.mcpServers[0].config: unknown key "disabled"`},
		{"wrong type", "max_turns: many\n", 1, `max_turns: expected an integer, got the string "many"`},
		{"scalar for mapping", "model: fast\n", 1, "expected a mapping"},
		{"not a mapping", "- a\n- b\n", 1, "expected a mapping"},
		{"bare number duration", "retry:\n  base_delay: 2\n", 2, `expected a duration with a unit, such as "2s" or "500ms", got the integer "2"`},
		{"bad duration unit", "retry:\n  max_delay: 3 parsecs\n", 2, `expected a duration with a unit, such as "2s" or "500ms", got the string "3 parsecs"`},
		{"duration mapping", "retry:\n  max_delay: {s: 1}\n", 2, `expected a duration with a unit`},
		{"delays inverted", "retry:\n  base_delay: 10s\n  max_delay: 1s\n", 3, "retry.max_delay: must be at least base_delay"},
		{"negative attempts", "retry:\n  max_attempts: -1\n", 2, "retry.max_attempts"},
		{"bad mode", "compaction:\n  mode: shrink\n", 2, `compaction.mode: must be summarize or discard, got "shrink"`},
		{"empty summarize prompt", "compaction:\n  prompt: \"\"\n", 2, "compaction.prompt"},
		{"bad thinking", "model:\n  thinking_level: huge\n", 2, "model.thinking_level"},
		{"zero max_turns", "max_turns: 0\n", 1, "max_turns"},
		{"zero max_tokens", "model:\n  max_tokens: 0\n", 2, "model.max_tokens"},
		{"lone provider", "model:\n  provider: openai\n", 1, "provider and model_id go together"},
		{"lone vision model id", "model:\n  vision_model:\n    model_id: x\n", 2, "model.vision_model"},
		{"empty system prompt", "system_prompt: \"  \"\n", 1, "system_prompt: must not be empty"},
		{"empty builtin list", "tools:\n  builtin: []\n", 2, "tools.builtin: an empty list"},
		{"bad tool name", "tools:\n  builtin:\n    - name: read_file\n    - name: \"bad name\"\n", 4, "tools.builtin[1].name"},
		{"duplicate tool", "tools:\n  builtin:\n    - name: read_file\n    - name: read_file\n", 4, `"read_file" is already declared at tools.builtin[0]`},
		{"bad permission", "tools:\n  builtin:\n    - name: read_file\n      permission: x\n", 4, "tools.builtin[0].permission: must be r or rw"},
		{"bad for_model", "tools:\n  builtin:\n    - name: read_file\n      for_model: all\n", 4, "for_model"},
		{"builtin with command", "tools:\n  builtin:\n    - name: read_file\n      command: cat\n", 4, "only a custom tool has a command"},
		{"custom without command", "tools:\n  custom:\n    - name: x\n      description: X.\n      parameters: {type: object}\n", 3, "tools.custom[0].command"},
		{"custom shadows engine tool", "tools:\n  custom:\n    - name: run_subagent\n      description: X.\n      command: x\n      parameters: {type: object}\n", 3, "is an engine tool"},
		{"parameters not an object", "tools:\n  custom:\n    - name: x\n      description: X.\n      command: x\n      parameters: '[1]'\n", 6, "must be a JSON object"},
		{"parameters bad JSON", "tools:\n  custom:\n    - name: x\n      description: X.\n      command: x\n      parameters: '{'\n", 6, "JSON Schema object"},
		{"parameters wrong type", "tools:\n  custom:\n    - name: x\n      description: X.\n      command: x\n      parameters: {type: string}\n", 6, "type object"},
		{"mcp without transport", "tools:\n  mcp_servers:\n    - name: a\n", 3, "needs a command (stdio) or a url (http)"},
		{"mcp bad name", "tools:\n  mcp_servers:\n    - name: a.b\n      command: x\n", 3, "tools.mcp_servers[0].name"},
		{"mcp unknown transport", "tools:\n  mcp_servers:\n    - name: a\n      transport: websocket\n      url: http://x\n", 4, "must be stdio, http or sse"},
		{"mcp sse without url", "tools:\n  mcp_servers:\n    - name: a\n      transport: sse\n", 3, "an sse server needs a url"},
		{"mcp mixed", "tools:\n  mcp_servers:\n    - name: a\n      url: http://x\n      args: [a]\n", 3, "an http server takes url and headers"},
		{"mcp bad permission", "tools:\n  mcp_servers:\n    - name: a\n      command: x\n      permission: w\n", 5, "must be auto, r or rw"},
		{"mcp duplicate", "tools:\n  mcp_servers:\n    - name: a\n      command: x\n    - name: a\n      command: y\n", 5, "already declared"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("/agents/x/system_config.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.src)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not contain %q", msg, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %q is not a *ConfigError", msg)
			}
			if ce.File != "/agents/x/system_config.yaml" {
				t.Errorf("error names file %q", ce.File)
			}
			if ce.Line != tc.line {
				t.Errorf("error %q at line %d, want %d", msg, ce.Line, tc.line)
			}
			if !strings.HasPrefix(msg, "/agents/x/system_config.yaml:") {
				t.Errorf("error %q does not start with the file name", msg)
			}
		})
	}
}

// Every problem of a file is reported at once, so one edit fixes them all.
func TestConfigErrorsAllReported(t *testing.T) {
	t.Parallel()
	_, err := Parse("c.yaml", []byte("bogus: 1\nmodel:\n  thinking_level: wild\ncompaction:\n  mode: x\nretry:\n  base_delay: 5\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`c.yaml:1: unknown key "bogus"`, "c.yaml:3: model.thinking_level", "c.yaml:5: compaction.mode", "c.yaml:7: retry.base_delay: expected a duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseThinkingLevel(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]penguinv1.ThinkingLevel{
		"none":   penguinv1.ThinkingLevel_THINKING_LEVEL_NONE,
		"low":    penguinv1.ThinkingLevel_THINKING_LEVEL_LOW,
		"medium": penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM,
		"high":   penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH,
		"xhigh":  penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH,
		"max":    penguinv1.ThinkingLevel_THINKING_LEVEL_MAX,
	} {
		got, err := ParseThinkingLevel(strings.ToUpper(name))
		if err != nil || got != want {
			t.Errorf("ParseThinkingLevel(%q) = %v, %v", name, got, err)
		}
	}
	if l, err := ParseThinkingLevel(""); err != nil || l != penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		t.Errorf("empty level = %v, %v", l, err)
	}
	if _, err := ParseThinkingLevel("ultra"); err == nil {
		t.Error("ultra accepted")
	}
}

func TestModelSettingsProto(t *testing.T) {
	t.Parallel()
	m := fullConfig().Model
	if r := m.Ref(); r.GetProvider() != "anthropic" || r.GetModelId() != "claude-sonnet-5" {
		t.Errorf("Ref() = %v", r)
	}
	if Default().Model.Ref() != nil {
		t.Error("Ref() of an unset model must be nil")
	}
	if m.MaxTokensProto() != 0 {
		t.Errorf("max_tokens -1 must be 0 in the request, got %d", m.MaxTokensProto())
	}
	if m.RequestTimeout() != 0 {
		t.Error("request_timeout_ms 0 must mean no timeout")
	}
	if v := m.VisionModel.Proto(); v.GetProvider() != "google" {
		t.Errorf("vision model = %v", v)
	}
}

// An agent whose system_config.yaml holds the skills and memory sections
// an earlier version wrote gets today's, which name the agent-file tools;
// an edited section is kept.
func TestLegacySectionsUpgraded(t *testing.T) {
	t.Parallel()
	for _, legacySkills := range legacySkillsPrompts {
		yaml := "skills:\n  prompt: |\n" + indent(legacySkills, "    ") + "memory:\n  prompt: |\n" + indent(legacyMemoryPrompt, "    ")
		c, err := Parse("system_config.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		if c.Skills.Prompt != DefaultSkillsPrompt || c.Memory.Prompt != DefaultMemoryPrompt {
			t.Errorf("legacy sections kept:\n%s\n%s", c.Skills.Prompt, c.Memory.Prompt)
		}
	}
	edited := "skills:\n  prompt: |\n    # My skills\n    {{SKILL_METADATA}}\n"
	if c, err := Parse("system_config.yaml", []byte(edited)); err != nil || c.Skills.Prompt != "# My skills\n{{SKILL_METADATA}}\n" {
		t.Errorf("an edited section was changed: %q, %v", c.Skills.Prompt, err)
	}
}
