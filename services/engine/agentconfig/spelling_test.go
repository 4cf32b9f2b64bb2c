package agentconfig

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/proto"
)

// loadAgent reads the system_config.yaml in testdata file name, as a user
// moving an agent over would.
func loadAgent(t *testing.T, name string) Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(name, data)
	if err != nil {
		t.Fatalf("PenguinHarness's %s does not load: %v", name, err)
	}
	return c
}

func TestReferencePartialOverrideLoads(t *testing.T) {
	t.Parallel()
	c := loadAgent(t, "reference/partial_override.yaml")
	if c.Name != "default_agent" || c.Version != 3 || c.MaxTurns != -1 {
		t.Errorf("name %q, version %d, max_turns %d", c.Name, c.Version, c.MaxTurns)
	}
	if c.Model.MaxTokens != 32000 || c.Model.ThinkingLevel != "medium" || c.Model.RequestTimeout() != 120*time.Second {
		t.Errorf("model = %+v", c.Model)
	}
	if c.Compaction.ContextThreshold != 256000 || c.Compaction.TurnsThreshold != -1 || c.Compaction.ModeProto() != penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE {
		t.Errorf("compaction = %+v", c.Compaction)
	}
	// Keys the file leaves out keep Penguin's defaults, the compaction
	// prompt among them.
	if c.Compaction.Prompt != DefaultCompactionPrompt || !c.Compaction.Enabled || c.Retry != Default().Retry {
		t.Errorf("defaults lost: %+v %+v", c.Compaction, c.Retry)
	}
}

func TestReferenceEveryKeyLoads(t *testing.T) {
	t.Parallel()
	c := loadAgent(t, "reference/every_key.yaml")
	if c.KernelVersion != "2026-05-01" || c.Version != 7 || c.MaxTurns != 40 {
		t.Errorf("kernel_version %q, version %d, max_turns %d", c.KernelVersion, c.Version, c.MaxTurns)
	}
	if c.Model.RequestTimeoutMS != 90000 || c.Model.MaxTokens != 16000 || c.Model.ThinkingLevel != "high" {
		t.Errorf("model = %+v", c.Model)
	}
	cp := c.Compaction
	if cp.ContextThreshold != 180000 || cp.TurnsThreshold != 60 || cp.Mode != ModeDiscard || !strings.HasPrefix(cp.Prompt, "Write the summary") {
		t.Errorf("compaction = %+v", cp)
	}
	if c.Memory.Enabled || !c.Vault.Enabled || c.Skills.Enabled || !c.Schedules.Enabled || !strings.Contains(c.Schedules.Prompt, "{{SCHEDULE_LIST}}") {
		t.Errorf("sections: memory %v, vault %v, skills %v, schedules %+v", c.Memory.Enabled, c.Vault.Enabled, c.Skills.Enabled, c.Schedules)
	}
	// Tool entries: camelCase bounds and forModel, call_description.
	ex, ok := c.Tools.find("exec_command")
	if !ok || *ex.TimeoutMS != 120000 || *ex.MaxOutputLength != 16000 || c.Tools.CallDescriptionEnabled("exec_command") || ex.Permission != "rw" {
		t.Fatalf("exec_command = %+v", ex)
	}
	if def := ex.Definition(); strings.Contains(def.GetParameters(), `"properties":{"description"`) || strings.Contains(def.GetParameters(), `"required":["description"`) || !strings.Contains(def.GetParameters(), `"cmd"`) {
		t.Errorf("exec_command's schema with call_description false = %s", def.GetParameters())
	}
	if img, _ := c.Tools.find("read_image"); img.ForModel != ForVision || img.AvailableFor(false) {
		t.Errorf("read_image = %+v", img)
	}
	if d, _ := c.Tools.find("describe_image"); d.ForModel != ForTextOnly || d.AvailableFor(true) {
		t.Errorf("describe_image = %+v", d)
	}
	// The environment gets the builtin entries but not the engine's own
	// tools, which the engine offers as configured.
	tc := c.Tools.ToolConfig()
	var names []string
	for _, b := range tc.GetBuiltin() {
		names = append(names, b.GetName())
	}
	if strings.Join(names, ",") != "exec_command,read_file,read_image" || tc.GetBuiltin()[0].GetTimeoutMs() != 120000 || tc.GetBuiltin()[0].GetMaxOutputLength() != 16000 {
		t.Errorf("environment builtin = %v", tc.GetBuiltin())
	}
	if eng := c.Tools.EngineTools(false); len(eng) != 2 || eng[0].Name != ToolRunSubagent || eng[1].Name != ToolDescribeImage {
		t.Errorf("engine tools = %+v", eng)
	}
	if len(c.Tools.MCPServers) != 0 || tc.GetMcpServers() != nil {
		t.Errorf("mcpServers: [] = %v", c.Tools.MCPServers)
	}
}

func TestReferenceMCPServersLoad(t *testing.T) {
	t.Parallel()
	c := loadAgent(t, "reference/mcp_servers.yaml")
	got := c.Tools.ToolConfig().GetMcpServers()
	want := []*penguinv1.McpServer{
		{Name: "filesystem", Transport: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "."}},
		{Name: "linear", Transport: "http", Url: "https://mcp.linear.example/mcp", Headers: map[string]string{"Authorization": "Bearer lin_api_x"}, Permission: penguinv1.Permission_PERMISSION_R},
		{Name: "legacy", Transport: "sse", Url: "http://127.0.0.1:8931/sse", ConnectTimeoutMs: 5000, TimeoutMs: 45000, MaxOutputLength: proto.Int64(8000)},
		{Name: "local-db", Transport: "stdio", Command: "/opt/mcp/db-server", Args: []string{"--read-only"}, Env: map[string]string{"DB_URL": "postgres://localhost/app"}, Cwd: "/srv/app", Permission: penguinv1.Permission_PERMISSION_RW},
	}
	if len(got) != len(want) {
		t.Fatalf("%d servers: %v", len(got), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("server %d = %v\nwant %v", i, got[i], want[i])
		}
	}
}

// The common mcpServers JSON of MCP servers' READMEs, pasted under tools.
func TestReadmeMCPConfigLoads(t *testing.T) {
	t.Parallel()
	c := loadAgent(t, "mcp_readme.yaml")
	got := c.Tools.ToolConfig().GetMcpServers()
	want := []*penguinv1.McpServer{
		{Name: "filesystem", Transport: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop", "/path/to/other/allowed/dir"}},
		{Name: "github", Transport: "stdio", Command: "docker", Args: []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"}, Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"}},
		{Name: "docs", Transport: "http", Url: "https://docs.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer ${DOCS_TOKEN}"}},
		{Name: "events", Transport: "sse", Url: "http://localhost:3001/sse"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d servers: %v", len(got), got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("server %d = %v\nwant %v", i, got[i], want[i])
		}
	}
}

// A configuration read in PenguinHarness's spelling is written back in
// Penguin's, the canonical one, and reads back the same.
func TestReferenceConfigIsWrittenInPenguinsSpelling(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"reference/every_key.yaml", "reference/mcp_servers.yaml", "mcp_readme.yaml"} {
		c := loadAgent(t, name)
		data, err := Marshal(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, theirs := range []string{"timeoutMs", "max_context_length", "max_session_turns", "mcpServers", "forModel", "maxOutputLength", "connectTimeoutMs", "config:"} {
			if strings.Contains(string(data), theirs) {
				t.Errorf("%s was written back with %s:\n%s", name, theirs, data)
			}
		}
		back, err := Parse(name, data)
		if err != nil {
			t.Fatalf("%s written back does not load: %v", name, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s changed on the way back:\n got %+v\nwant %+v", name, back, c)
		}
	}
}

// A file written in one spelling throughout loads; a file that uses both
// is refused at the key that breaks its spelling, naming both keys.
func TestMixedSpellingsAreRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  string
		line int
		want []string
	}{
		{"Penguin's key in a PenguinHarness file", "model:\n  timeoutMs: 5000\ncompaction:\n  context_threshold: 9000\n", 4,
			[]string{"compaction.context_threshold: this is Penguin's spelling, but the file uses PenguinHarness's spelling (model.timeoutMs at line 2): write max_context_length here"}},
		{"PenguinHarness's key in a Penguin file", "compaction:\n  turns_threshold: 30\n  max_context_length: 9000\n", 3,
			[]string{"compaction.max_context_length: this is PenguinHarness's spelling, but the file uses Penguin's spelling (compaction.turns_threshold at line 2): write context_threshold here"}},
		{"one setting written both ways", "model:\n  request_timeout_ms: 1\n  timeoutMs: 2\n", 3,
			[]string{"model.timeoutMs: this is PenguinHarness's spelling", "write request_timeout_ms here"}},
		{"a tool entry", "compaction:\n  max_session_turns: 3\ntools:\n  builtin:\n    - name: read_file\n      timeout_ms: 5\n", 6,
			[]string{"tools.builtin[0].timeout_ms: this is Penguin's spelling", "(compaction.max_session_turns at line 2): write timeoutMs here"}},
		{"a flat server under mcpServers with Penguin's key", "tools:\n  mcpServers:\n    - name: a\n      command: x\n      connect_timeout_ms: 5\n", 5,
			[]string{"tools.mcpServers[0].connect_timeout_ms: this is Penguin's spelling", "write connectTimeoutMs here"}},
		{"PenguinHarness's nesting under mcp_servers", "tools:\n  mcp_servers:\n    - name: a\n      config:\n        command: x\n", 4,
			[]string{"tools.mcp_servers[0].config: this is PenguinHarness's spelling", "(tools.mcp_servers at line 2)"}},
		{"a key beside config", "tools:\n  mcpServers:\n    - name: a\n      command: y\n      config:\n        command: x\n", 4,
			[]string{`tools.mcpServers[0]: unknown key "command": an mcpServers entry is {name, config}`}},
		{"type and transport", "tools:\n  mcpServers:\n    a:\n      type: http\n      transport: http\n      url: http://x\n", 4,
			[]string{"tools.mcpServers.a.type: type and transport name the same thing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("/a/system_config.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error for:\n%s", tc.src)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Line != tc.line || ce.File != "/a/system_config.yaml" {
				t.Errorf("first problem %+v, want line %d of the file", ce, tc.line)
			}
			// The key that broke the spelling is reported once, not again
			// as unknown or duplicate.
			if n := len(flatten(err)); n != 1 {
				t.Errorf("%d problems reported, want 1: %v", n, err)
			}
		})
	}
}

// Problems in a file in PenguinHarness's spelling name the keys as the
// file writes them, at their lines.
func TestReferenceSpelledProblemsNameTheWrittenKeys(t *testing.T) {
	t.Parallel()
	src := "tools:\n  mcpServers:\n    - name: good\n      config:\n        command: x\n        timeoutMs: -1\n    - name: bad name\n      config:\n        url: http://x\n        bogus: 1\n  builtin:\n    - name: read_file\n      forModel: sometimes\n"
	_, err := Parse("c.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"c.yaml:6: tools.mcpServers[0].config.timeoutMs: must not be negative",
		"c.yaml:7: tools.mcpServers[1].name: must be letters",
		`c.yaml:10: tools.mcpServers[1].config: unknown key "bogus"`,
		"c.yaml:13: tools.builtin[0].forModel: must be vision or text-only",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// The READMEs' shape names a server by its key.
	_, err = Parse("c.yaml", []byte("tools:\n  mcpServers:\n    web:\n      url: http://x\n      args: [a]\n    cli: nope\n"))
	for _, want := range []string{"c.yaml:3: tools.mcpServers.web: an http server takes url and headers", "c.yaml:6: tools.mcpServers.cli: expected a mapping"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
