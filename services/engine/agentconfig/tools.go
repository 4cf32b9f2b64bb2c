package agentconfig

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

// Names of the tools the engine runs itself rather than the environment:
// the subagent tools (only the engine can start a session),
// describe_image (only the engine reaches the llm service) and the
// agent-file tools (only the engine holds the agent's skills and memory;
// see Files).
// The paths by which the model reaches the agent's memory through the
// agent-file tools, relative to the agent state directory. The default
// tools' descriptions name them; agentstate lays the directory out by them.
const (
	// UserMemoryPath is the user scope of memory.
	UserMemoryPath = "memory/user"
	// WorkspaceMemoryPath is the memory of the session's workspace,
	// whichever directory its key names.
	WorkspaceMemoryPath = "memory/workspace"
)

const (
	ToolRunSubagent     = "run_subagent"
	ToolInputSubagent   = "input_subagent"
	ToolKillSubagent    = "kill_subagent"
	ToolDescribeImage   = "describe_image"
	ToolReadAgentFile   = "read_agent_file"
	ToolWriteAgentFile  = "write_agent_file"
	ToolDeleteAgentFile = "delete_agent_file"
	// ToolReadImage is the environment's image reader for vision models.
	ToolReadImage = "read_image"
)

// Model classes of ToolSpec.ForModel.
const (
	ForVision   = "vision"
	ForTextOnly = "text-only"
)

// EngineToolNames lists the tools the engine runs itself, in the order
// they are offered.
func EngineToolNames() []string {
	return []string{ToolRunSubagent, ToolInputSubagent, ToolKillSubagent, ToolDescribeImage, ToolReadAgentFile, ToolWriteAgentFile, ToolDeleteAgentFile}
}

func isEngineTool(name string) bool { return slices.Contains(EngineToolNames(), name) }

// defaultForModel is the model class of the tools that depend on one when
// the configuration does not say.
func defaultForModel(name string) string {
	switch name {
	case ToolReadImage:
		return ForVision
	case ToolDescribeImage:
		return ForTextOnly
	}
	return ""
}

func i64(v int64) *int64 { return &v }

// DefaultEngineTools returns the built-in definitions of the engine's
// tools. Their schemas put "description" first, because the model writes
// arguments in schema order and frontends show that sentence while the
// call runs.
func DefaultEngineTools() []ToolSpec {
	return []ToolSpec{
		{
			Name: ToolRunSubagent,
			Description: "Delegate a self-contained subtask to a subagent: a child session with its own context, working in the same workspace. " +
				"Give it everything it needs in the prompt, including the exact result it must report back. " +
				"It runs in the foreground for yield_time_ms, then moves to the background and returns a subagent_id; " +
				"with run_in_background it returns the id at once and its result arrives later as a message. " +
				"A subagent cannot start subagents of its own.",
			Parameters: `{"type":"object","properties":{` +
				`"description":{"type":"string","description":"One sentence, shown to the user, saying what the subagent will do. Write it first."},` +
				`"prompt":{"type":"string","description":"The complete subtask: all context, and the exact output expected."},` +
				`"provider":{"type":"string","description":"The provider of model_id; required whenever model_id is given. Omit both to use this session's model."},` +
				`"model_id":{"type":"string","description":"The subagent's model; omit to use this session's model."},` +
				`"thinking_level":{"type":"string","enum":["none","low","medium","high","xhigh","max"],"description":"The subagent's reasoning effort; omit to use this session's. Lower suits mechanical work, higher hard analysis."},` +
				`"yield_time_ms":{"type":"integer","description":"How long to wait in the foreground before moving to the background; default 300000."},` +
				`"run_in_background":{"type":"boolean","description":"Return the subagent_id at once; the result arrives as a message when done."}` +
				`},"required":["description","prompt"]}`,
			Permission: "rw",
			TimeoutMS:  i64(600000),
		},
		{
			Name: ToolInputSubagent,
			Description: "Poll a background subagent for its progress and result, or, once it is idle, give it a follow-up prompt. " +
				"An empty prompt only polls.",
			Parameters: `{"type":"object","properties":{` +
				`"description":{"type":"string","description":"One sentence, shown to the user, saying why. Write it first."},` +
				`"subagent_id":{"type":"string","description":"The id returned by run_subagent."},` +
				`"prompt":{"type":"string","description":"A follow-up task, accepted only while the subagent is idle; empty polls."},` +
				`"yield_time_ms":{"type":"integer","description":"How long to wait; default 300000 with a prompt, 10000 for a poll."}` +
				`},"required":["description","subagent_id"]}`,
			Permission: "rw",
			TimeoutMS:  i64(600000),
		},
		{
			Name:        ToolKillSubagent,
			Description: "Stop a background subagent and remove it, returning any output not yet delivered.",
			Parameters: `{"type":"object","properties":{` +
				`"description":{"type":"string","description":"One sentence, shown to the user, saying why. Write it first."},` +
				`"subagent_id":{"type":"string","description":"The id returned by run_subagent."}` +
				`},"required":["description","subagent_id"]}`,
			Permission: "rw",
			TimeoutMS:  i64(30000),
		},
		{
			Name: ToolDescribeImage,
			Description: "Have a vision model look at an image and answer in text. " +
				"The source is an http(s) URL, a file in the workspace (png, jpeg, gif or webp, up to 5 MB), " +
				"or an image attached to a message, which the message names as scratchpad/<name>.",
			Parameters: `{"type":"object","properties":{` +
				`"source":{"type":"string","description":"An http(s) URL, a path inside the workspace, or scratchpad/<name> for an attached image."},` +
				`"prompt":{"type":"string","description":"What to ask about the image; by default a detailed description."}` +
				`},"required":["source"]}`,
			Permission: "r",
			ForModel:   ForTextOnly,
			TimeoutMS:  i64(90000),
		},
		{
			Name: ToolReadAgentFile,
			Description: "Read one of your own agent files, which the engine keeps apart from the workspace: " +
				"AGENTS.md, a skill's files (skills/<name>/SKILL.md and what it refers to) or your memory (" + UserMemoryPath + "/..., " + WorkspaceMemoryPath + "/...). " +
				"A directory (\"\", skills, " + UserMemoryPath + ") is listed. The workspace's file tools cannot reach these files.",
			Parameters: `{"type":"object","properties":{` +
				`"file_path":{"type":"string","description":"The path among the agent files, such as skills/pdf/SKILL.md or ` + UserMemoryPath + `/MEMORY.md."}` +
				`},"required":["file_path"]}`,
			Permission: "r",
			TimeoutMS:  i64(10000),
		},
		{
			Name: ToolWriteAgentFile,
			Description: "Write a memory file, replacing it whole: " + UserMemoryPath + "/<name>.md for what holds wherever you work, " +
				WorkspaceMemoryPath + "/<name>.md for what holds in this workspace only (MEMORY.md is each scope's index). " +
				"A file holds at most 64 KiB, a scope at most 1 MiB in 256 files.",
			Parameters: `{"type":"object","properties":{` +
				`"file_path":{"type":"string","description":"The memory file, such as ` + UserMemoryPath + `/prefers-pnpm.md."},` +
				`"content":{"type":"string","description":"The whole new content of the file."}` +
				`},"required":["file_path","content"]}`,
			Permission: "rw",
			TimeoutMS:  i64(10000),
		},
		{
			Name:        ToolDeleteAgentFile,
			Description: "Delete a memory file that turned out wrong or stale (then remove its line from the scope's MEMORY.md).",
			Parameters: `{"type":"object","properties":{` +
				`"file_path":{"type":"string","description":"The memory file, such as ` + WorkspaceMemoryPath + `/old-topic.md."}` +
				`},"required":["file_path"]}`,
			Permission: "rw",
			TimeoutMS:  i64(10000),
		},
	}
}

// ModelClass is the class of models the tool is offered to (ForVision or
// ForTextOnly), or empty for every model: the entry's for_model, else the
// tool's built-in class.
func (s ToolSpec) ModelClass() string {
	if s.ForModel != "" {
		return s.ForModel
	}
	return defaultForModel(s.Name)
}

// AvailableFor reports whether the tool is offered to a model of the given
// class.
func (s ToolSpec) AvailableFor(vision bool) bool {
	switch s.ModelClass() {
	case ForVision:
		return vision
	case ForTextOnly:
		return !vision
	}
	return true
}

// PermissionProto returns the permission as the contract's enum;
// unspecified when the entry does not say.
func (s ToolSpec) PermissionProto() penguinv1.Permission {
	return permissionProto(s.Permission)
}

// permissionProto reads a permission word (r or rw); anything else, "" and
// an MCP server's "auto" included, is unspecified.
func permissionProto(word string) penguinv1.Permission {
	p, _ := enumword.Parse[penguinv1.Permission](word)
	return p
}

// Definition returns the definition sent to the model, with the
// "description" argument removed when CallDescription is false. Parameters
// that are not a JSON object (Validate rejects them) are passed on as they
// are.
func (s ToolSpec) Definition() *penguinv1.ToolDefinition {
	params := string(s.Parameters)
	if s.CallDescription != nil && !*s.CallDescription {
		params = stripOrKeep(params)
	}
	return &penguinv1.ToolDefinition{Name: s.Name, Description: s.Description, Parameters: params}
}

// stripOrKeep removes the call description, keeping the schema unchanged
// when it cannot be parsed.
func stripOrKeep(params string) string {
	if params == "" {
		return ""
	}
	if out, err := StripCallDescription(params); err == nil {
		return out
	}
	return params
}

func (s ToolSpec) proto() *penguinv1.ToolSpec {
	def := s.Definition()
	p := &penguinv1.ToolSpec{
		Name:        s.Name,
		Description: def.Description,
		Parameters:  def.Parameters,
		Permission:  s.PermissionProto(),
		Command:     s.Command,
	}
	if s.TimeoutMS != nil {
		p.TimeoutMs = i64(*s.TimeoutMS)
	}
	if s.MaxOutputLength != nil {
		p.MaxOutputLength = i64(*s.MaxOutputLength)
	}
	return p
}

// find returns the builtin entry with the given name.
func (t ToolSettings) find(name string) (ToolSpec, bool) {
	for _, s := range t.Builtin {
		if s.Name == name {
			return s, true
		}
	}
	return ToolSpec{}, false
}

// Available reports whether a tool the environment offers should reach a
// model of the given class: an entry's for_model decides, else the
// built-in class (read_image for vision models only).
func (t ToolSettings) Available(name string, vision bool) bool {
	s, ok := t.find(name)
	if !ok {
		s = ToolSpec{Name: name}
	}
	return s.AvailableFor(vision)
}

// CallDescriptionEnabled reports whether the tool keeps its "description"
// call argument.
func (t ToolSettings) CallDescriptionEnabled(name string) bool {
	s, ok := t.find(name)
	return !ok || s.CallDescription == nil || *s.CallDescription
}

// FilterEnvironmentTools takes the tools an environment reports and keeps
// those meant for a model of the given class, with the "description"
// argument removed where call_description is false. The result is what the
// model is offered, before the engine's own tools are added.
func (t ToolSettings) FilterEnvironmentTools(tools []*penguinv1.ToolInfo, vision bool) []*penguinv1.ToolInfo {
	out := make([]*penguinv1.ToolInfo, 0, len(tools))
	for _, ti := range tools {
		def := ti.GetDefinition()
		if def == nil || !t.Available(def.GetName(), vision) {
			continue
		}
		if !t.CallDescriptionEnabled(def.GetName()) {
			def = &penguinv1.ToolDefinition{Name: def.GetName(), Description: def.GetDescription(), Parameters: stripOrKeep(def.GetParameters())}
		}
		out = append(out, &penguinv1.ToolInfo{Definition: def, Permission: ti.GetPermission()})
	}
	return out
}

// EngineTools returns the engine's own tools for a model of the given
// class. With no builtin list every engine tool is offered; with one, only
// those it names, each entry overriding the built-in definition field by
// field (an empty description or parameters keeps the built-in one).
func (t ToolSettings) EngineTools(vision bool) []ToolSpec {
	var out []ToolSpec
	for _, d := range DefaultEngineTools() {
		s := d
		if t.Builtin != nil {
			o, ok := t.find(d.Name)
			if !ok {
				continue
			}
			s = mergeSpec(d, o)
		}
		if s.AvailableFor(vision) {
			out = append(out, s)
		}
	}
	return out
}

// mergeSpec overrides base with the fields set in o.
func mergeSpec(base, o ToolSpec) ToolSpec {
	if o.Description != "" {
		base.Description = o.Description
	}
	if o.Parameters != "" {
		base.Parameters = o.Parameters
	}
	if o.Permission != "" {
		base.Permission = o.Permission
	}
	if o.ForModel != "" {
		base.ForModel = o.ForModel
	}
	if o.TimeoutMS != nil {
		base.TimeoutMS = o.TimeoutMS
	}
	if o.MaxOutputLength != nil {
		base.MaxOutputLength = o.MaxOutputLength
	}
	if o.CallDescription != nil {
		base.CallDescription = o.CallDescription
	}
	return base
}

// ToolConfig returns the environment's tool configuration: the builtin
// entries (without the engine's own tools), the custom tools and the MCP
// servers. A nil builtin list becomes an empty one, which the environment
// reads as every builtin with its defaults; filtering by model class is
// left to FilterEnvironmentTools.
func (t ToolSettings) ToolConfig() *penguinv1.ToolConfig {
	tc := &penguinv1.ToolConfig{}
	for _, s := range t.Builtin {
		if !isEngineTool(s.Name) {
			tc.Builtin = append(tc.Builtin, s.proto())
		}
	}
	// A builtin list that names only engine tools offers no environment
	// builtin (an agent that only delegates, say); sent empty, it would
	// mean every one.
	tc.NoBuiltins = len(t.Builtin) > 0 && len(tc.Builtin) == 0
	for _, s := range t.Custom {
		tc.Custom = append(tc.Custom, s.proto())
	}
	for _, m := range t.MCPServers {
		ms := &penguinv1.McpServer{
			Name:             m.Name,
			Transport:        m.EffectiveTransport(),
			Command:          m.Command,
			Args:             slices.Clone(m.Args),
			Env:              maps.Clone(m.Env),
			Cwd:              m.Cwd,
			Url:              m.URL,
			Headers:          maps.Clone(m.Headers),
			ConnectTimeoutMs: m.ConnectTimeoutMS,
			TimeoutMs:        m.TimeoutMS,
		}
		if m.MaxOutputLength != nil {
			ms.MaxOutputLength = i64(*m.MaxOutputLength)
		}
		ms.Permission = permissionProto(m.Permission)
		tc.McpServers = append(tc.McpServers, ms)
	}
	return tc
}

// StripCallDescription removes the "description" property and its
// "required" entry from an arguments schema, keeping everything else and
// its key order.
func StripCallDescription(schema string) (string, error) {
	n, err := jsonToNode([]byte(schema))
	if err != nil {
		return "", fmt.Errorf("parameters are not valid JSON: %w", err)
	}
	if n.Kind != yaml.MappingNode {
		return "", fmt.Errorf("parameters are not a JSON object")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch {
		case k == "properties" && v.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				if v.Content[j].Value == "description" {
					v.Content = slices.Delete(v.Content, j, j+2)
					break
				}
			}
		case k == "required" && v.Kind == yaml.SequenceNode:
			v.Content = slices.DeleteFunc(v.Content, func(e *yaml.Node) bool { return e.Value == "description" })
		}
	}
	var b bytes.Buffer
	if err := nodeToJSON(&b, n); err != nil {
		return "", err
	}
	return b.String(), nil
}
