package agentapi

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

// Tool kinds of AgentTool.
const (
	kindBuiltin = "builtin"
	kindEngine  = "engine"
	kindCustom  = "custom"
)

// builtinTools returns every builtin tool with its own definition: the
// environment's, as a fresh environment with the default configuration
// reports them (the environment service is their one owner), then the
// engine's.
func (s *Server) builtinTools(ctx context.Context) ([]*penguinv1.AgentTool, error) {
	if s.opts.Environment == nil {
		return nil, status.Error(codes.Unavailable, "this engine has no environment service")
	}
	ctx, cancel := context.WithTimeout(ctx, mcpTestTimeout)
	defer cancel()
	resp, err := s.opts.Environment.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{
		Workspace: mcpTestWorkspace, Tools: agentconfig.Default().Tools.ToolConfig(), Label: "tool-list",
	}, grpc.WaitForReady(true))
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the environment service could not list its tools: %s", status.Convert(err).Message())
	}
	_, _ = s.opts.Environment.DisposeEnvironment(context.WithoutCancel(ctx), &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
	var out []*penguinv1.AgentTool
	for _, ti := range resp.GetTools() {
		d := ti.GetDefinition()
		out = append(out, &penguinv1.AgentTool{
			Name: d.GetName(), Description: d.GetDescription(), Kind: kindBuiltin, Permission: permissionWord(ti.GetPermission()),
			ForModel: agentconfig.ToolSpec{Name: d.GetName()}.ModelClass(),
		})
	}
	for _, e := range agentconfig.DefaultEngineTools() {
		out = append(out, &penguinv1.AgentTool{Name: e.Name, Description: e.Description, Kind: kindEngine, Permission: e.Permission, ForModel: e.ModelClass()})
	}
	return out, nil
}

// permissionWord is r or rw, as a configuration spells it.
func permissionWord(p penguinv1.Permission) string {
	if p == penguinv1.Permission_PERMISSION_R {
		return "r"
	}
	return "rw"
}

// ListAgentTools implements AgentService: every builtin tool, enabled
// when the configuration offers it (no builtin list offers them all), with
// the configuration's overrides, then the custom tools.
func (s *Server) ListAgentTools(ctx context.Context, req *penguinv1.ListAgentToolsRequest) (*penguinv1.ListAgentToolsResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	cfg, err := s.loadConfig(ctx, t)
	if err != nil {
		return nil, err
	}
	tools, err := s.builtinTools(ctx)
	if err != nil {
		return nil, err
	}
	for _, tool := range tools {
		tool.Enabled = cfg.Tools.Builtin == nil
		i := slices.IndexFunc(cfg.Tools.Builtin, func(e agentconfig.ToolSpec) bool { return e.Name == tool.Name })
		if i < 0 {
			continue
		}
		e := cfg.Tools.Builtin[i]
		tool.Enabled = true
		if e.Description != "" {
			tool.Description = e.Description
		}
		if e.Permission != "" {
			tool.Permission = e.Permission
		}
		tool.ForModel = e.ModelClass()
	}
	for _, c := range cfg.Tools.Custom {
		perm := c.Permission
		if perm == "" {
			perm = "rw"
		}
		tools = append(tools, &penguinv1.AgentTool{Name: c.Name, Description: c.Description, Kind: kindCustom, Permission: perm, Enabled: true, ForModel: c.ModelClass()})
	}
	return &penguinv1.ListAgentToolsResponse{Tools: tools}, nil
}

// SetAgentToolEnabled implements AgentService. Disabling a tool of an
// agent that offers every builtin writes the list of the others; enabling
// one adds its name; a list that comes to name every builtin with no
// override goes, so that the agent again offers every builtin, new ones
// included.
func (s *Server) SetAgentToolEnabled(ctx context.Context, req *penguinv1.SetAgentToolEnabledRequest) (*penguinv1.SetAgentToolEnabledResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	all, err := s.builtinTools(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, tool := range all {
		names[i] = tool.GetName()
	}
	name := req.GetName()
	if !slices.Contains(names, name) {
		return nil, status.Errorf(codes.NotFound, "no builtin tool is called %q (a custom tool is removed from the configuration, an MCP server's with its server)", name)
	}
	verb := "disable tool "
	if req.GetEnabled() {
		verb = "enable tool "
	}
	err = s.editConfig(ctx, t, verb+name, "name", func(cfg agentconfig.Config, doc *yaml.Node) error {
		tools := mapEnsure(doc, "tools", yaml.MappingNode)
		list := mapValue(tools, "builtin")
		if list == nil || list.Kind != yaml.SequenceNode {
			if req.GetEnabled() {
				return nil
			}
			list = mapEnsure(tools, "builtin", yaml.SequenceNode)
			for _, n := range names {
				list.Content = append(list.Content, nameEntry(n))
			}
		}
		i := slices.IndexFunc(list.Content, func(item *yaml.Node) bool {
			v := mapValue(item, "name")
			return v != nil && v.Value == name
		})
		switch {
		case req.GetEnabled() && i < 0:
			list.Content = append(list.Content, nameEntry(name))
		case !req.GetEnabled() && i >= 0:
			if len(list.Content) == 1 {
				return status.Errorf(codes.FailedPrecondition, "%s is the agent's last builtin tool; an agent keeps at least one", name)
			}
			list.Content = slices.Delete(list.Content, i, i+1)
		}
		if everyByName(list, names) {
			mapDelete(tools, "builtin")
		}
		dropEmpty(doc, "tools")
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.SetAgentToolEnabledResponse{}, nil
}

// nameEntry is a builtin list entry that names a tool and overrides
// nothing.
func nameEntry(name string) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "name"}, {Kind: yaml.ScalarNode, Value: name},
	}}
}

// everyByName reports whether a builtin list names every one of names
// and overrides nothing, which is what no list at all means.
func everyByName(list *yaml.Node, names []string) bool {
	var have []string
	for _, item := range list.Content {
		if item.Kind != yaml.MappingNode || len(item.Content) != 2 {
			return false
		}
		have = append(have, item.Content[1].Value)
	}
	for _, n := range names {
		if !slices.Contains(have, n) {
			return false
		}
	}
	return true
}
