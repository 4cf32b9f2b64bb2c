package agentapi

import (
	"context"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
)

// loadConfig reads and parses an agent's system_config.yaml.
func (s *Server) loadConfig(ctx context.Context, t target) (agentconfig.Config, error) {
	_, files, err := s.files(ctx, t)
	if err != nil {
		return agentconfig.Config{}, err
	}
	cfg, err := agentconfig.Parse(agentstate.ConfigFile, files[agentstate.ConfigFile].Data)
	if err != nil {
		return cfg, status.Errorf(codes.FailedPrecondition, "the agent's configuration does not load: %v", err)
	}
	return cfg, nil
}

// ListMCPServers implements AgentService. Environment and header values
// (tokens, often) are left out: only their names are listed.
func (s *Server) ListMCPServers(ctx context.Context, req *penguinv1.ListMCPServersRequest) (*penguinv1.ListMCPServersResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	cfg, err := s.loadConfig(ctx, t)
	if err != nil {
		return nil, err
	}
	resp := &penguinv1.ListMCPServersResponse{}
	for _, m := range cfg.Tools.MCPServers {
		resp.Servers = append(resp.Servers, &penguinv1.MCPServerSpec{
			Name: m.Name, Transport: m.EffectiveTransport(), Command: m.Command, Args: m.Args, Url: m.URL,
			Env: namesOnly(m.Env), Headers: namesOnly(m.Headers), Permission: m.Permission, Cwd: m.Cwd,
		})
	}
	return resp, nil
}

func namesOnly(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = ""
	}
	return out
}

// PutMCPServer implements AgentService. A stdio server is tested first
// (TestMCPServer's connection in a fresh environment) when the engine can
// reach the environment service, so that a command that does not exist is
// refused instead of saved.
func (s *Server) PutMCPServer(ctx context.Context, req *penguinv1.PutMCPServerRequest) (*penguinv1.PutMCPServerResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	spec := req.GetServer()
	if spec.GetName() == "" {
		return nil, invalid("server.name", "required")
	}
	err = s.editConfig(ctx, t, "mcp server "+spec.GetName(), "server", func(cfg agentconfig.Config, doc *yaml.Node) error {
		m := agentconfig.MCPServer{
			Name: spec.GetName(), Transport: spec.GetTransport(), Command: spec.GetCommand(), Args: spec.GetArgs(),
			Env: maps.Clone(spec.GetEnv()), URL: spec.GetUrl(), Headers: maps.Clone(spec.GetHeaders()),
			Permission: spec.GetPermission(), Cwd: spec.GetCwd(),
		}
		// An empty value keeps the one the server has.
		idx := slices.IndexFunc(cfg.Tools.MCPServers, func(x agentconfig.MCPServer) bool { return x.Name == m.Name })
		if idx >= 0 {
			old := cfg.Tools.MCPServers[idx]
			m.ConnectTimeoutMS, m.TimeoutMS, m.MaxOutputLength = old.ConnectTimeoutMS, old.TimeoutMS, old.MaxOutputLength
			keep(m.Env, old.Env)
			keep(m.Headers, old.Headers)
		}
		for k, v := range m.Env {
			if v == "" {
				return invalid("server.env."+k, "a new variable needs a value")
			}
		}
		for k, v := range m.Headers {
			if v == "" {
				return invalid("server.headers."+k, "a new header needs a value")
			}
		}
		if m.EffectiveTransport() == "stdio" && s.opts.Environment != nil {
			if res := s.testServer(ctx, m, ""); !res.GetOk() {
				return invalid("server.command", "the server does not start: %s", res.GetMessage())
			}
		}
		var node yaml.Node
		if err := node.Encode(m); err != nil {
			return status.Errorf(codes.Internal, "encode the server: %v", err)
		}
		tools := mapEnsure(doc, "tools", yaml.MappingNode)
		list := mapEnsure(tools, "mcp_servers", yaml.SequenceNode)
		for i, item := range list.Content {
			if v := mapValue(item, "name"); v != nil && v.Value == m.Name {
				list.Content[i] = &node
				return nil
			}
		}
		list.Content = append(list.Content, &node)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.PutMCPServerResponse{}, nil
}

// keep fills the empty values of next from prev.
func keep(next, prev map[string]string) {
	for k, v := range next {
		if v == "" && prev[k] != "" {
			next[k] = prev[k]
		}
	}
}

// DeleteMCPServer implements AgentService.
func (s *Server) DeleteMCPServer(ctx context.Context, req *penguinv1.DeleteMCPServerRequest) (*penguinv1.DeleteMCPServerResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	err = s.editConfig(ctx, t, "remove mcp server "+req.GetName(), "name", func(_ agentconfig.Config, doc *yaml.Node) error {
		if tools := mapValue(doc, "tools"); tools != nil {
			if list := mapValue(tools, "mcp_servers"); list != nil {
				for i, item := range list.Content {
					if v := mapValue(item, "name"); v != nil && v.Value == req.GetName() {
						list.Content = slices.Delete(list.Content, i, i+1)
						// The last server goes with its key, and an empty
						// tools with it, so the file reads as if never
						// edited.
						if len(list.Content) == 0 {
							mapDelete(tools, "mcp_servers")
						}
						dropEmpty(doc, "tools")
						return nil
					}
				}
			}
		}
		return status.Errorf(codes.NotFound, "the agent has no MCP server %q", req.GetName())
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.DeleteMCPServerResponse{}, nil
}

// mcpTestWorkspace is where a tested stdio server starts when the request
// names no workspace: a directory of the environment service's root.
const mcpTestWorkspace = ".penguin-mcp-test"

// TestMCPServer implements AgentService.
func (s *Server) TestMCPServer(ctx context.Context, req *penguinv1.TestMCPServerRequest) (*penguinv1.TestMCPServerResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if s.opts.Environment == nil {
		return nil, status.Error(codes.Unavailable, "this engine has no environment service")
	}
	cfg, err := s.loadConfig(ctx, t)
	if err != nil {
		return nil, err
	}
	idx := slices.IndexFunc(cfg.Tools.MCPServers, func(x agentconfig.MCPServer) bool { return x.Name == req.GetName() })
	if idx < 0 {
		return nil, status.Errorf(codes.NotFound, "the agent has no MCP server %q", req.GetName())
	}
	return s.testServer(ctx, cfg.Tools.MCPServers[idx], req.GetWorkspace()), nil
}

// mcpTestTimeout bounds one test.
const mcpTestTimeout = 60 * time.Second

// testServer creates an environment with the one server, reads how
// connecting to it went and which tools it offers, and disposes of it.
func (s *Server) testServer(ctx context.Context, m agentconfig.MCPServer, workspace string) *penguinv1.TestMCPServerResponse {
	ctx, cancel := context.WithTimeout(ctx, mcpTestTimeout)
	defer cancel()
	cfg := agentconfig.Default()
	cfg.Tools.MCPServers = []agentconfig.MCPServer{m}
	if workspace == "" {
		workspace = mcpTestWorkspace
	}
	start := time.Now()
	resp, err := s.opts.Environment.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{
		Workspace: workspace, Tools: cfg.Tools.ToolConfig(), Label: "mcp-test-" + m.Name,
	}, grpc.WaitForReady(true))
	if err != nil {
		return &penguinv1.TestMCPServerResponse{Message: "the environment could not be created: " + status.Convert(err).Message()}
	}
	latency := time.Since(start).Milliseconds()
	defer func() {
		_, _ = s.opts.Environment.DisposeEnvironment(context.WithoutCancel(ctx), &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
	}()
	out := &penguinv1.TestMCPServerResponse{LatencyMs: latency}
	for _, r := range resp.GetMcp().GetResults() {
		if r.GetServer() != m.Name {
			continue
		}
		out.LatencyMs = r.GetDurationMs()
		if r.GetStatus() != penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED {
			out.Message = r.GetError()
			return out
		}
	}
	prefix := "mcp__" + m.Name + "__"
	for _, ti := range resp.GetTools() {
		if name := ti.GetDefinition().GetName(); len(name) > len(prefix) && name[:len(prefix)] == prefix {
			out.Tools = append(out.Tools, name[len(prefix):])
		}
	}
	out.Ok = true
	return out
}
