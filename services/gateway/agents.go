package gateway

import (
	"context"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The agent routes: one AgentService call each, under
// /api/projects/{project}. A route's path values (project, agent, name,
// scope, file) fill the request's fields of those names, over the JSON
// body's.

// agentRoutes registers the agent routes with api.
func (g *Gateway) agentRoutes(api func(string, http.HandlerFunc)) {
	type a = penguinv1.AgentServiceClient
	const p = "/api/projects/{project}/agents"
	api("GET "+p, agentCall(g, a.ListAgents, http.StatusOK))
	api("POST "+p, agentCall(g, a.CreateAgent, http.StatusCreated))
	api("PATCH "+p+"/{agent}", agentCall(g, a.RenameAgent, http.StatusOK))
	api("DELETE "+p+"/{agent}", agentCall(g, a.DeleteAgent, http.StatusOK))
	api("GET "+p+"/{agent}/export", g.exportAgent)
	api("POST "+p+"/{agent}/import", agentCall(g, a.ImportAgent, http.StatusOK))
	api("GET "+p+"/{agent}/config/{file}", agentCall(g, a.GetAgentConfig, http.StatusOK))
	api("PUT "+p+"/{agent}/config/{file}", agentCall(g, a.UpdateAgentConfig, http.StatusOK))
	api("GET "+p+"/{agent}/skills", agentCall(g, a.ListSkills, http.StatusOK))
	api("POST "+p+"/{agent}/skills", agentCall(g, a.InstallSkill, http.StatusCreated))
	api("PUT "+p+"/{agent}/skills/{name}/enabled", agentCall(g, a.SetSkillEnabled, http.StatusOK))
	api("DELETE "+p+"/{agent}/skills/{name}", agentCall(g, a.UninstallSkill, http.StatusOK))
	api("GET "+p+"/{agent}/memory", agentCall(g, a.ListMemoryScopes, http.StatusOK))
	api("GET "+p+"/{agent}/memory/{scope}/files", agentCall(g, a.ListMemoryFiles, http.StatusOK))
	api("GET "+p+"/{agent}/memory/{scope}/files/{name}", agentCall(g, a.GetMemoryFile, http.StatusOK))
	api("PUT "+p+"/{agent}/memory/{scope}/files/{name}", agentCall(g, a.UpdateMemoryFile, http.StatusOK))
	api("DELETE "+p+"/{agent}/memory/{scope}/files/{name}", agentCall(g, a.DeleteMemoryFile, http.StatusOK))
	api("GET "+p+"/{agent}/memory/{scope}/export", agentCall(g, a.ExportMemory, http.StatusOK))
	api("POST "+p+"/{agent}/memory/{scope}/import", agentCall(g, a.ImportMemory, http.StatusOK))
	api("GET "+p+"/{agent}/vault", agentCall(g, a.ListVault, http.StatusOK))
	api("PUT "+p+"/{agent}/vault/{name}", agentCall(g, a.SetVault, http.StatusOK))
	api("DELETE "+p+"/{agent}/vault/{name}", agentCall(g, a.DeleteVault, http.StatusOK))
	api("GET "+p+"/{agent}/tools", agentCall(g, a.ListAgentTools, http.StatusOK))
	api("PUT "+p+"/{agent}/tools/{name}/enabled", agentCall(g, a.SetAgentToolEnabled, http.StatusOK))
	api("GET "+p+"/{agent}/mcp", agentCall(g, a.ListMCPServers, http.StatusOK))
	api("POST "+p+"/{agent}/mcp", agentCall(g, a.PutMCPServer, http.StatusOK))
	api("DELETE "+p+"/{agent}/mcp/{name}", agentCall(g, a.DeleteMCPServer, http.StatusOK))
	api("POST "+p+"/{agent}/mcp/{name}/test", agentCall(g, a.TestMCPServer, http.StatusOK))
	api("GET "+p+"/{agent}/model", agentCall(g, a.GetAgentModel, http.StatusOK))
	api("PUT "+p+"/{agent}/model", agentCall(g, a.SetAgentModel, http.StatusOK))
	api("POST /api/projects/{project}/models/test", agentCall(g, a.TestModel, http.StatusOK))
	api("GET /api/projects/{project}/models/settings", agentCall(g, a.ListModelSettings, http.StatusOK))
	api("PUT /api/projects/{project}/models/settings", agentCall(g, a.SetModelSettings, http.StatusOK))
}

// pathFields are the path values a route copies into its request: into
// the field of the same name, or else into the field of that name with
// "_id" (a route's {project} fills a request's project_id).
var pathFields = []string{"project", "agent", "name", "scope", "file", "user", "token"}

// agentCall makes a route of one AgentService call (see rpcRoute).
func agentCall[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](g *Gateway, call func(penguinv1.AgentServiceClient, context.Context, PReq, ...grpc.CallOption) (Resp, error), ok int) http.HandlerFunc {
	return rpcRoute(g, g.opts.Agents, "agent", call, ok)
}

// providerRoutes registers the provider route routes with api: the global
// routes under /api/providers, a project's under
// /api/projects/{project}/providers, one LLMService call each. Who may
// call which is the engine's access check's to say, as for every call.
func (g *Gateway) providerRoutes(api func(string, http.HandlerFunc)) {
	type l = penguinv1.LLMServiceClient
	for _, p := range []string{"/api/providers", "/api/projects/{project}/providers"} {
		api("GET "+p, rpcRoute(g, g.opts.LLM, "llm", l.ListProviders, http.StatusOK))
		api("POST "+p, rpcRoute(g, g.opts.LLM, "llm", l.AddProvider, http.StatusCreated))
		api("PUT "+p, rpcRoute(g, g.opts.LLM, "llm", l.UpdateProvider, http.StatusOK))
		api("DELETE "+p+"/{name}", rpcRoute(g, g.opts.LLM, "llm", l.RemoveProvider, http.StatusOK))
		api("POST "+p+"/{name}/test", rpcRoute(g, g.opts.LLM, "llm", l.TestProvider, http.StatusOK))
	}
}

// rpcRoute makes a route of one call of client, the service called name:
// the JSON body (if any) is the request, the path values fill their
// fields, and the response is written as JSON with status ok (no body
// for 204). A nil client answers Unimplemented.
func rpcRoute[Client any, Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](g *Gateway, client Client, name string, call func(Client, context.Context, PReq, ...grpc.CallOption) (Resp, error), ok int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if any(client) == nil {
			writeError(w, codes.Unimplemented, "this gateway reaches no "+name+" service")
			return
		}
		req := PReq(new(Req))
		if err := readProto(r, req); err != nil {
			badRequest(w, err.Error())
			return
		}
		fields := req.ProtoReflect().Descriptor().Fields()
		for _, field := range pathFields {
			v := r.PathValue(field)
			if v == "" {
				continue
			}
			f := fields.ByName(protoreflect.Name(field))
			if f == nil {
				f = fields.ByName(protoreflect.Name(field + "_id"))
			}
			if f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
				req.ProtoReflect().Set(f, protoreflect.ValueOfString(v))
			}
		}
		resp, err := call(client, r.Context(), req)
		if err != nil {
			g.fail(w, r, err)
			return
		}
		if ok == http.StatusNoContent {
			w.WriteHeader(ok)
			return
		}
		writeProto(w, ok, resp)
	}
}

// exportAgent sends an agent's archive as a tar.gz download.
func (g *Gateway) exportAgent(w http.ResponseWriter, r *http.Request) {
	if g.opts.Agents == nil {
		writeError(w, codes.Unimplemented, "this gateway reaches no agent service")
		return
	}
	resp, err := g.opts.Agents.ExportAgent(r.Context(), &penguinv1.ExportAgentRequest{Project: r.PathValue("project"), Agent: r.PathValue("agent")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("agent")+`.tar.gz"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp.GetArchive())
}
