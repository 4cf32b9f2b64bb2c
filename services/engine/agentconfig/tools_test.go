package agentconfig

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

func names(specs []ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestToolConfigDefault(t *testing.T) {
	t.Parallel()
	c := Default()
	tc := c.Tools.ToolConfig()
	if !proto.Equal(tc, &penguinv1.ToolConfig{}) {
		t.Errorf("the default tool config must be empty (every builtin with its defaults), got %v", tc)
	}
	if got := names(c.Tools.EngineTools(false)); !slices.Equal(got, []string{ToolRunSubagent, ToolInputSubagent, ToolKillSubagent, ToolDescribeImage, ToolReadAgentFile, ToolWriteAgentFile, ToolDeleteAgentFile}) {
		t.Errorf("engine tools for a text-only model = %v", got)
	}
	if got := names(c.Tools.EngineTools(true)); !slices.Equal(got, []string{ToolRunSubagent, ToolInputSubagent, ToolKillSubagent, ToolReadAgentFile, ToolWriteAgentFile, ToolDeleteAgentFile}) {
		t.Errorf("engine tools for a vision model = %v", got)
	}
}

func TestToolConfigFull(t *testing.T) {
	t.Parallel()
	c := fullConfig()
	tc := c.Tools.ToolConfig()
	to, max := int64(5000), int64(100)
	want := &penguinv1.ToolConfig{
		Builtin: []*penguinv1.ToolSpec{
			{Name: "exec_command", TimeoutMs: &to},
			{Name: "read_file", Description: "Read a file.", Permission: penguinv1.Permission_PERMISSION_R, MaxOutputLength: &max,
				Parameters: `{"type":"object","properties":{"file_path":{"type":"string"},"offset":{"type":"integer","minimum":1}},"required":["file_path"]}`},
		},
		Custom: []*penguinv1.ToolSpec{{
			Name: "word_count", Description: "Count words.", Permission: penguinv1.Permission_PERMISSION_R,
			Parameters: string(c.Tools.Custom[0].Parameters), Command: "wc -w",
		}},
		McpServers: []*penguinv1.McpServer{
			{Name: "fs", Transport: "stdio", Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"A": "1"}, Cwd: "/tmp",
				ConnectTimeoutMs: 2000, TimeoutMs: 9000, Permission: penguinv1.Permission_PERMISSION_R},
			{Name: "docs", Transport: "http", Url: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"},
				Permission: penguinv1.Permission_PERMISSION_RW},
		},
	}
	if !proto.Equal(tc, want) {
		t.Errorf("ToolConfig:\n got %v\nwant %v", tc, want)
	}
	// Only run_subagent is listed, so it is the only engine tool, with its
	// built-in schema and the entry's permission.
	eng := c.Tools.EngineTools(false)
	if len(eng) != 1 || eng[0].Name != ToolRunSubagent || eng[0].Permission != "r" || eng[0].Parameters == "" || eng[0].Description == "" {
		t.Errorf("engine tools with a builtin list = %+v", eng)
	}
	// The config's maps are not shared with the message.
	tc.McpServers[0].Env["A"] = "changed"
	if c.Tools.MCPServers[0].Env["A"] != "1" {
		t.Error("ToolConfig shares its maps with the config")
	}
}

// TestToolConfigOnlyEngineTools: a builtin list naming only engine tools
// offers those and no environment builtin, which the environment is told
// with no_builtins (an empty list would mean every builtin); an sse MCP
// server passes through.
func TestToolConfigOnlyEngineTools(t *testing.T) {
	t.Parallel()
	c, err := Parse("c.yaml", []byte("tools:\n  builtin:\n    - name: run_subagent\n  mcp_servers:\n    - name: old\n      transport: sse\n      url: http://127.0.0.1:1/sse\n"))
	if err != nil {
		t.Fatal(err)
	}
	tc := c.Tools.ToolConfig()
	if !tc.GetNoBuiltins() || len(tc.GetBuiltin()) != 0 {
		t.Errorf("ToolConfig = %v, want no_builtins and no builtin list", tc)
	}
	if m := tc.GetMcpServers(); len(m) != 1 || m[0].GetTransport() != "sse" {
		t.Errorf("mcp servers = %v", m)
	}
	if got := names(c.Tools.EngineTools(false)); !slices.Equal(got, []string{ToolRunSubagent}) {
		t.Errorf("engine tools = %v", got)
	}
	if full := fullConfig().Tools.ToolConfig(); full.GetNoBuiltins() {
		t.Error("a list with environment tools must not set no_builtins")
	}
}

func TestDefaultEngineToolSchemas(t *testing.T) {
	t.Parallel()
	for _, s := range DefaultEngineTools() {
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal([]byte(s.Parameters), &schema); err != nil {
			t.Errorf("%s: schema is not JSON: %v", s.Name, err)
			continue
		}
		if schema.Type != "object" || len(schema.Required) == 0 {
			t.Errorf("%s: schema %s", s.Name, s.Parameters)
		}
		for _, r := range schema.Required {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %q is not a property", s.Name, r)
			}
		}
		// The file tools take no call description: their file_path
		// says what they act on.
		if !slices.Contains([]string{ToolDescribeImage, ToolReadAgentFile, ToolWriteAgentFile, ToolDeleteAgentFile}, s.Name) {
			if !strings.HasPrefix(string(s.Parameters), `{"type":"object","properties":{"description":`) || !slices.Contains(schema.Required, "description") {
				t.Errorf("%s: description must be the first, required property: %s", s.Name, s.Parameters)
			}
		}
		if s.PermissionProto() == penguinv1.Permission_PERMISSION_UNSPECIFIED || s.TimeoutMS == nil {
			t.Errorf("%s: permission or timeout missing", s.Name)
		}
		c := Default()
		c.Tools.Builtin = []ToolSpec{{Name: "read_file"}, s}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: the built-in definition does not validate: %v", s.Name, err)
		}
	}
}

func TestStripCallDescription(t *testing.T) {
	t.Parallel()
	in := `{"type":"object","properties":{"description":{"type":"string"},"cmd":{"type":"string"},"n":{"type":"integer"}},"required":["description","cmd"],"description":"kept: the schema's own"}`
	got, err := StripCallDescription(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"cmd":{"type":"string"},"n":{"type":"integer"}},"required":["cmd"],"description":"kept: the schema's own"}`
	if got != want {
		t.Errorf("StripCallDescription:\n got %s\nwant %s", got, want)
	}
	if _, err := StripCallDescription("[1]"); err == nil {
		t.Error("a non-object schema was accepted")
	}
	if _, err := StripCallDescription("{"); err == nil {
		t.Error("broken JSON was accepted")
	}
	f := false
	def := ToolSpec{Name: "x", Parameters: JSONSchema(in), CallDescription: &f}.Definition()
	if def.GetParameters() != want {
		t.Errorf("Definition with call_description false = %s", def.GetParameters())
	}
}

func TestFilterEnvironmentTools(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"description":{"type":"string"},"cmd":{"type":"string"}},"required":["description","cmd"]}`
	env := []*penguinv1.ToolInfo{
		{Definition: &penguinv1.ToolDefinition{Name: "exec_command", Parameters: schema}, Permission: penguinv1.Permission_PERMISSION_RW},
		{Definition: &penguinv1.ToolDefinition{Name: ToolReadImage, Parameters: `{"type":"object"}`}, Permission: penguinv1.Permission_PERMISSION_R},
		{Definition: &penguinv1.ToolDefinition{Name: "mcp__fs__read", Parameters: `{"type":"object"}`}, Permission: penguinv1.Permission_PERMISSION_R},
	}
	var ts ToolSettings
	toolNames := func(infos []*penguinv1.ToolInfo) []string {
		var out []string
		for _, i := range infos {
			out = append(out, i.GetDefinition().GetName())
		}
		return out
	}
	if got := toolNames(ts.FilterEnvironmentTools(env, true)); !slices.Equal(got, []string{"exec_command", ToolReadImage, "mcp__fs__read"}) {
		t.Errorf("vision model gets %v", got)
	}
	if got := toolNames(ts.FilterEnvironmentTools(env, false)); !slices.Equal(got, []string{"exec_command", "mcp__fs__read"}) {
		t.Errorf("text-only model gets %v", got)
	}
	f := false
	ts.Builtin = []ToolSpec{{Name: "exec_command", CallDescription: &f}, {Name: ToolReadImage, ForModel: ""}}
	out := ts.FilterEnvironmentTools(env, true)
	if p := out[0].GetDefinition().GetParameters(); strings.Contains(p, "description") {
		t.Errorf("call description not removed: %s", p)
	}
	if env[0].GetDefinition().GetParameters() != schema {
		t.Error("FilterEnvironmentTools changed its input")
	}
	if out[0].GetPermission() != penguinv1.Permission_PERMISSION_RW {
		t.Error("permission lost")
	}
	if !ts.CallDescriptionEnabled(ToolReadImage) || ts.CallDescriptionEnabled("exec_command") {
		t.Error("CallDescriptionEnabled")
	}
	ts.Builtin = []ToolSpec{{Name: ToolReadImage, ForModel: ForTextOnly}}
	if !ts.Available(ToolReadImage, false) || ts.Available(ToolReadImage, true) {
		t.Error("a for_model entry does not override the built-in class")
	}
}
