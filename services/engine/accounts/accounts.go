// Package accounts serves the gRPC services of users, sign-in, projects,
// members and tokens (proto/penguin/v1/teams.proto): thin handlers that
// turn messages into calls of the engine's access.Guard, which decides
// everything, and its answers back into messages.
package accounts

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/clientlimit"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/oidclogin"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Server implements AuthService, UserService, ProjectService and
// TokenService.
type Server struct {
	g *access.Guard
	// oidc signs users in through the identity provider; nil when none
	// is configured.
	oidc *oidclogin.Login
	// oidcStarts limits how often each client starts a sign-in with the
	// identity provider.
	oidcStarts *clientlimit.Limiter
	// llm is the llm service, asked whether a project to delete still
	// has provider routes.
	llm penguinv1.LLMServiceClient
	// The services' handlers, each with its own Unimplemented type.
	auth     authServer
	users    userServer
	projects projectServer
	tokens   tokenServer
}

// New returns the handlers over g; llm is the llm service the engine
// calls, and login signs users in through the identity provider when it
// is not nil.
func New(g *access.Guard, llm penguinv1.LLMServiceClient, login *oidclogin.Login) *Server {
	s := &Server{g: g, llm: llm, oidc: login, oidcStarts: clientlimit.OIDCStarts()}
	s.auth, s.users, s.projects, s.tokens = authServer{s: s}, userServer{s: s}, projectServer{s: s}, tokenServer{s: s}
	return s
}

// Register registers the four services on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	penguinv1.RegisterAuthServiceServer(r, &s.auth)
	penguinv1.RegisterUserServiceServer(r, &s.users)
	penguinv1.RegisterProjectServiceServer(r, &s.projects)
	penguinv1.RegisterTokenServiceServer(r, &s.tokens)
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func userOf(u *store.User) *penguinv1.User {
	if u == nil {
		return nil
	}
	return &penguinv1.User{
		UserId: u.ID, Name: u.Name, Email: u.Email, Admin: u.Admin, Disabled: u.Disabled,
		HasPassword: u.PasswordHash != "", CreatedAt: ts(u.CreatedAt),
	}
}

func scopeOf(s store.Scope) penguinv1.TokenScope {
	if s == store.ScopeRead {
		return penguinv1.TokenScope_TOKEN_SCOPE_READ
	}
	return penguinv1.TokenScope_TOKEN_SCOPE_FULL
}

func roleOf(r store.Role) penguinv1.ProjectRole {
	switch r {
	case store.RoleOwner:
		return penguinv1.ProjectRole_PROJECT_ROLE_OWNER
	case store.RoleMember:
		return penguinv1.ProjectRole_PROJECT_ROLE_MEMBER
	}
	return penguinv1.ProjectRole_PROJECT_ROLE_UNSPECIFIED
}

type authServer struct {
	penguinv1.UnimplementedAuthServiceServer
	s *Server
}

// WhoAmI implements AuthService.
func (a *authServer) WhoAmI(ctx context.Context, _ *penguinv1.WhoAmIRequest) (*penguinv1.WhoAmIResponse, error) {
	c, u, err := a.s.g.Caller(ctx)
	if err != nil {
		return nil, err
	}
	mode := penguinv1.ServerMode_SERVER_MODE_LOCAL
	if a.s.g.Mode() == access.Team {
		mode = penguinv1.ServerMode_SERVER_MODE_TEAM
	}
	return &penguinv1.WhoAmIResponse{
		User: userOf(u), Operator: c.Operator, Scope: scopeOf(c.Scope), Mode: mode,
		MustChangePassword: u != nil && !c.Local && u.PasswordHash != "" && u.PasswordChangedAt.IsZero(),
	}, nil
}

// SignIn implements AuthService.
func (a *authServer) SignIn(ctx context.Context, req *penguinv1.SignInRequest) (*penguinv1.SignInResponse, error) {
	secret, expires, u, err := a.s.g.SignIn(ctx, req.GetUserId(), req.GetPassword())
	if err != nil {
		return nil, err
	}
	return &penguinv1.SignInResponse{SessionToken: secret, ExpiresAt: ts(expires), User: userOf(u)}, nil
}

// SignOut implements AuthService.
func (a *authServer) SignOut(ctx context.Context, _ *penguinv1.SignOutRequest) (*penguinv1.SignOutResponse, error) {
	return &penguinv1.SignOutResponse{}, a.s.g.SignOut(ctx)
}

// ChangePassword implements AuthService.
func (a *authServer) ChangePassword(ctx context.Context, req *penguinv1.ChangePasswordRequest) (*penguinv1.ChangePasswordResponse, error) {
	return &penguinv1.ChangePasswordResponse{}, a.s.g.ChangePassword(ctx, req.GetOldPassword(), req.GetNewPassword())
}

// GetSignInOptions implements AuthService.
func (a *authServer) GetSignInOptions(context.Context, *penguinv1.GetSignInOptionsRequest) (*penguinv1.GetSignInOptionsResponse, error) {
	out := &penguinv1.GetSignInOptionsResponse{}
	if a.s.oidc != nil {
		out.OidcName = a.s.oidc.Name()
	}
	return out, nil
}

// errNoOIDC answers the OIDC calls of a server without a provider.
var errNoOIDC = status.Error(codes.FailedPrecondition, "this server has no identity provider configured; sign in with a password")

// BeginOIDCSignIn implements AuthService. A client over the limit of
// sign-in starts (clientlimit.OIDCStarts) is RESOURCE_EXHAUSTED; the
// gateway, calling through the in-process transport for its browsers,
// limits each of them itself.
func (a *authServer) BeginOIDCSignIn(ctx context.Context, req *penguinv1.BeginOIDCSignInRequest) (*penguinv1.BeginOIDCSignInResponse, error) {
	if a.s.oidc == nil {
		return nil, errNoOIDC
	}
	if key, ok := clientlimit.PeerKey(ctx); ok {
		if ok, _ := a.s.oidcStarts.Allow(key, time.Now()); !ok {
			return nil, status.Error(codes.ResourceExhausted, clientlimit.OIDCStartsRefused)
		}
	}
	u, err := a.s.oidc.Begin(ctx, req.GetBrowserBinding(), req.GetLoopbackRedirect())
	if err != nil {
		return nil, err
	}
	return &penguinv1.BeginOIDCSignInResponse{AuthorizationUrl: u}, nil
}

// CompleteOIDCSignIn implements AuthService. A refusal is recorded in
// the audit log with its reason.
func (a *authServer) CompleteOIDCSignIn(ctx context.Context, req *penguinv1.CompleteOIDCSignInRequest) (*penguinv1.CompleteOIDCSignInResponse, error) {
	if a.s.oidc == nil {
		return nil, errNoOIDC
	}
	if req.GetLoopbackRedirect() == "" {
		// The gateway's callback: a command-line client's sign-in goes
		// on to that client, which completes it.
		to, err := a.s.oidc.Loopback(ctx, req.GetState(), req.GetCode())
		if err != nil {
			a.s.g.Audit(ctx, "", "sign_in.failed", "", "oidc: "+status.Convert(err).Message())
			return nil, err
		}
		if to != "" {
			return &penguinv1.CompleteOIDCSignInResponse{RedirectUrl: to}, nil
		}
	}
	id, err := a.s.oidc.Complete(ctx, req.GetState(), req.GetCode(), req.GetBrowserBinding(), req.GetLoopbackRedirect())
	if err != nil {
		a.s.g.Audit(ctx, "", "sign_in.failed", "", "oidc: "+status.Convert(err).Message())
		return nil, err
	}
	secret, expires, u, err := a.s.g.SignInExternal(ctx, id)
	if err != nil {
		return nil, err
	}
	return &penguinv1.CompleteOIDCSignInResponse{SessionToken: secret, ExpiresAt: ts(expires), User: userOf(u)}, nil
}

type userServer struct {
	penguinv1.UnimplementedUserServiceServer
	s *Server
}

// ListUsers implements UserService.
func (u *userServer) ListUsers(ctx context.Context, _ *penguinv1.ListUsersRequest) (*penguinv1.ListUsersResponse, error) {
	us, err := u.s.g.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	out := &penguinv1.ListUsersResponse{}
	for _, x := range us {
		out.Users = append(out.Users, userOf(x))
	}
	return out, nil
}

// CreateUser implements UserService.
func (u *userServer) CreateUser(ctx context.Context, req *penguinv1.CreateUserRequest) (*penguinv1.CreateUserResponse, error) {
	x, err := u.s.g.CreateUser(ctx, req.GetUserId(), req.GetName(), req.GetPassword(), req.GetAdmin())
	if err != nil {
		return nil, err
	}
	return &penguinv1.CreateUserResponse{User: userOf(x)}, nil
}

// UpdateUser implements UserService.
func (u *userServer) UpdateUser(ctx context.Context, req *penguinv1.UpdateUserRequest) (*penguinv1.UpdateUserResponse, error) {
	x, err := u.s.g.UpdateUser(ctx, req.GetUserId(), req.Disabled, req.Admin)
	if err != nil {
		return nil, err
	}
	return &penguinv1.UpdateUserResponse{User: userOf(x)}, nil
}

// ResetPassword implements UserService.
func (u *userServer) ResetPassword(ctx context.Context, req *penguinv1.ResetPasswordRequest) (*penguinv1.ResetPasswordResponse, error) {
	return &penguinv1.ResetPasswordResponse{}, u.s.g.ResetPassword(ctx, req.GetUserId(), req.GetPassword())
}

// DeleteUser implements UserService.
func (u *userServer) DeleteUser(ctx context.Context, req *penguinv1.DeleteUserRequest) (*penguinv1.DeleteUserResponse, error) {
	return &penguinv1.DeleteUserResponse{}, u.s.g.DeleteUser(ctx, req.GetUserId())
}

type projectServer struct {
	penguinv1.UnimplementedProjectServiceServer
	s *Server
}

func projectOf(p access.ProjectView) *penguinv1.Project {
	return &penguinv1.Project{ProjectId: p.ID, Name: p.Name, Role: roleOf(p.Role), CreatedAt: ts(p.CreatedAt)}
}

// ListProjects implements ProjectService.
func (p *projectServer) ListProjects(ctx context.Context, _ *penguinv1.ListProjectsRequest) (*penguinv1.ListProjectsResponse, error) {
	ps, err := p.s.g.ListProjects(ctx)
	if err != nil {
		return nil, err
	}
	out := &penguinv1.ListProjectsResponse{}
	for _, x := range ps {
		out.Projects = append(out.Projects, projectOf(x))
	}
	return out, nil
}

// CreateProject implements ProjectService.
func (p *projectServer) CreateProject(ctx context.Context, req *penguinv1.CreateProjectRequest) (*penguinv1.CreateProjectResponse, error) {
	x, err := p.s.g.CreateProject(ctx, req.GetProjectId(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &penguinv1.CreateProjectResponse{Project: projectOf(x)}, nil
}

// DeleteProject implements ProjectService. A project whose provider
// routes are still stored is not deleted, as one with sessions is not:
// its owners remove them first (penguin providers remove --project, or the
// Models page), so that no API key outlives its project unseen, nor
// passes to a later project of the same id.
func (p *projectServer) DeleteProject(ctx context.Context, req *penguinv1.DeleteProjectRequest) (*penguinv1.DeleteProjectResponse, error) {
	id := req.GetProjectId()
	if err := p.s.g.Check(ctx, id, access.Own, "project", id); err != nil {
		return nil, err
	}
	if err := p.s.noRoutes(ctx, id); err != nil {
		return nil, err
	}
	return &penguinv1.DeleteProjectResponse{}, p.s.g.DeleteProject(ctx, id)
}

// noRoutes fails when the llm service stores provider routes of project,
// naming them, or cannot say. An llm service that is not there
// (Unimplemented: a client command's server without one) stores none.
func (s *Server) noRoutes(ctx context.Context, project string) error {
	resp, err := s.llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{Project: project})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return nil
	case err != nil:
		return status.Errorf(codes.Unavailable, "project %s: its provider routes could not be checked (%v); try again", project, status.Convert(err).Message())
	}
	var names []string
	for _, r := range resp.GetProviders() {
		if r.GetProject() == project {
			names = append(names, r.GetName())
		}
	}
	if len(names) > 0 {
		return status.Errorf(codes.FailedPrecondition, "project %s still has %d provider routes (%s); remove them first", project, len(names), strings.Join(names, ", "))
	}
	return nil
}

// ListMembers implements ProjectService.
func (p *projectServer) ListMembers(ctx context.Context, req *penguinv1.ListMembersRequest) (*penguinv1.ListMembersResponse, error) {
	ms, err := p.s.g.ListMembers(ctx, req.GetProjectId())
	if err != nil {
		return nil, err
	}
	out := &penguinv1.ListMembersResponse{}
	for _, m := range ms {
		out.Members = append(out.Members, &penguinv1.Member{UserId: m.UserID, Role: roleOf(m.Role), CreatedAt: ts(m.CreatedAt)})
	}
	return out, nil
}

// SetMember implements ProjectService.
func (p *projectServer) SetMember(ctx context.Context, req *penguinv1.SetMemberRequest) (*penguinv1.SetMemberResponse, error) {
	role := store.RoleMember
	if req.GetRole() == penguinv1.ProjectRole_PROJECT_ROLE_OWNER {
		role = store.RoleOwner
	}
	return &penguinv1.SetMemberResponse{}, p.s.g.SetMember(ctx, req.GetProjectId(), req.GetUserId(), role)
}

// RemoveMember implements ProjectService.
func (p *projectServer) RemoveMember(ctx context.Context, req *penguinv1.RemoveMemberRequest) (*penguinv1.RemoveMemberResponse, error) {
	return &penguinv1.RemoveMemberResponse{}, p.s.g.RemoveMember(ctx, req.GetProjectId(), req.GetUserId())
}

// ListAudit implements ProjectService.
func (p *projectServer) ListAudit(ctx context.Context, req *penguinv1.ListAuditRequest) (*penguinv1.ListAuditResponse, error) {
	rs, err := p.s.g.ListAudit(ctx, req.GetProjectId(), req.GetBeforeId(), int(req.GetLimit()))
	if err != nil {
		return nil, err
	}
	out := &penguinv1.ListAuditResponse{}
	for _, r := range rs {
		out.Records = append(out.Records, &penguinv1.AuditRecord{Id: r.ID, At: ts(r.At), Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail})
	}
	return out, nil
}

type tokenServer struct {
	penguinv1.UnimplementedTokenServiceServer
	s *Server
}

func tokenOf(t *store.AccessToken) *penguinv1.Token {
	return &penguinv1.Token{
		TokenId: t.ID, Name: t.Name, Scope: scopeOf(t.Scope),
		CreatedAt: ts(t.CreatedAt), ExpiresAt: ts(t.ExpiresAt), LastUsedAt: ts(t.LastUsedAt),
	}
}

// ListTokens implements TokenService.
func (t *tokenServer) ListTokens(ctx context.Context, _ *penguinv1.ListTokensRequest) (*penguinv1.ListTokensResponse, error) {
	list, err := t.s.g.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	out := &penguinv1.ListTokensResponse{}
	for _, x := range list {
		out.Tokens = append(out.Tokens, tokenOf(x))
	}
	return out, nil
}

// CreateToken implements TokenService.
func (t *tokenServer) CreateToken(ctx context.Context, req *penguinv1.CreateTokenRequest) (*penguinv1.CreateTokenResponse, error) {
	scope := store.ScopeFull
	if req.GetScope() == penguinv1.TokenScope_TOKEN_SCOPE_READ {
		scope = store.ScopeRead
	}
	// A TTL beyond any allowed one stays beyond it rather than overflowing.
	ttl := time.Duration(min(max(req.GetTtlSeconds(), -1), 1<<32)) * time.Second
	tk, secret, err := t.s.g.CreateToken(ctx, req.GetName(), scope, ttl)
	if err != nil {
		return nil, err
	}
	return &penguinv1.CreateTokenResponse{Token: tokenOf(tk), Secret: secret}, nil
}

// RevokeToken implements TokenService.
func (t *tokenServer) RevokeToken(ctx context.Context, req *penguinv1.RevokeTokenRequest) (*penguinv1.RevokeTokenResponse, error) {
	return &penguinv1.RevokeTokenResponse{}, t.s.g.RevokeToken(ctx, req.GetTokenId())
}
