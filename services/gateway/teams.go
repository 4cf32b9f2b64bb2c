package gateway

import (
	"net/http"

	"google.golang.org/grpc/codes"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The account routes: one call each of the engine's AuthService,
// UserService, ProjectService and TokenService (proto/penguin/v1/teams.proto),
// which decide who may do what; the gateway only carries the caller's
// credential to them, as on every API route.

// teamRoutes registers the account routes with api.
func (g *Gateway) teamRoutes(api func(string, http.HandlerFunc)) {
	type (
		au = penguinv1.AuthServiceClient
		us = penguinv1.UserServiceClient
		pr = penguinv1.ProjectServiceClient
		tk = penguinv1.TokenServiceClient
	)
	const (
		auth     = "auth"
		users    = "user"
		projects = "project"
		tokens   = "token"
	)
	api("POST /api/auth/password", rpcRoute(g, g.accounts, auth, au.ChangePassword, http.StatusNoContent))

	api("GET /api/users", rpcRoute(g, g.opts.Users, users, us.ListUsers, http.StatusOK))
	api("POST /api/users", rpcRoute(g, g.opts.Users, users, us.CreateUser, http.StatusCreated))
	api("PATCH /api/users/{user}", rpcRoute(g, g.opts.Users, users, us.UpdateUser, http.StatusOK))
	api("PUT /api/users/{user}/password", rpcRoute(g, g.opts.Users, users, us.ResetPassword, http.StatusNoContent))
	api("DELETE /api/users/{user}", rpcRoute(g, g.opts.Users, users, us.DeleteUser, http.StatusNoContent))

	api("GET /api/projects", rpcRoute(g, g.opts.Projects, projects, pr.ListProjects, http.StatusOK))
	api("POST /api/projects", rpcRoute(g, g.opts.Projects, projects, pr.CreateProject, http.StatusCreated))
	api("DELETE /api/projects/{project}", rpcRoute(g, g.opts.Projects, projects, pr.DeleteProject, http.StatusNoContent))
	api("GET /api/projects/{project}/members", rpcRoute(g, g.opts.Projects, projects, pr.ListMembers, http.StatusOK))
	api("PUT /api/projects/{project}/members/{user}", rpcRoute(g, g.opts.Projects, projects, pr.SetMember, http.StatusNoContent))
	api("DELETE /api/projects/{project}/members/{user}", rpcRoute(g, g.opts.Projects, projects, pr.RemoveMember, http.StatusNoContent))
	api("GET /api/projects/{project}/audit", g.audit)
	api("GET /api/audit", g.audit)

	api("GET /api/tokens", rpcRoute(g, g.opts.Tokens, tokens, tk.ListTokens, http.StatusOK))
	api("POST /api/tokens", rpcRoute(g, g.opts.Tokens, tokens, tk.CreateToken, http.StatusCreated))
	api("DELETE /api/tokens/{token}", rpcRoute(g, g.opts.Tokens, tokens, tk.RevokeToken, http.StatusNoContent))
}

// audit serves GET /api/projects/{project}/audit?before_id=N&limit=M: a
// page of the project's audit log, newest first; and GET /api/audit, the
// same of the global log (admins).
func (g *Gateway) audit(w http.ResponseWriter, r *http.Request) {
	before, err := queryInt(r, "before_id", 1<<62)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	limit, err := queryInt32(r, "limit")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if g.opts.Projects == nil {
		writeError(w, codes.Unimplemented, "this gateway reaches no project service")
		return
	}
	resp, err := g.opts.Projects.ListAudit(r.Context(), &penguinv1.ListAuditRequest{ProjectId: r.PathValue("project"), BeforeId: before, Limit: limit})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}
