// Package gateway serves Penguin's EngineService to browsers and curl as
// plain HTTP with JSON bodies and Server-Sent Events, and serves the web
// app that uses it. It holds no state of its own: every API route is one
// engine (or llm) call, but for sign-in (a signed cookie, see auth.go) and
// the first-run form (which writes the providers file, see setup.go), so
// the gateway can sit in front of a local engine or a remote one, and the
// SSE stream resumes from Last-Event-ID because event ids are the
// session's sequence numbers.
//
// JSON follows the proto JSON mapping: request and response bodies are the
// gRPC messages in protojson (proto field names, enum value names, 64-bit
// integers as decimal strings), and the gateway's own small envelopes
// (sequence numbers) write 64-bit integers as strings too. Conversation
// messages (the SSE stream, the history) are in the trace format instead
// (docs/trace-format.md), the one session exports use on disk. Errors are
// {"error": "<gRPC code in snake_case>", "message": "..."}.
package gateway

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/clientlimit"
	"github.com/penguin-agent/penguin/internal/logger"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Options configure a Gateway.
type Options struct {
	// AuthToken, when set, is required on every API route: as
	// "Authorization: Bearer <token>", or through the session cookie a
	// browser gets for it at POST /api/auth/login. Without it the API is
	// open, and only requests addressed to localhost or an IP address are
	// answered.
	AuthToken string
	// TrustedProxies are the reverse proxies in front of the gateway whose
	// X-Forwarded-For it believes when it limits each client (clientKey);
	// none means the address of the connection is the client's. Never
	// trusted by default: any client can send the header.
	TrustedProxies []netip.Prefix
	// Heartbeat is the interval of SSE comment lines that keep proxies from
	// closing an idle stream; zero means 20 seconds.
	Heartbeat time.Duration
	// Logger receives one line per failed call; nil discards.
	Logger *slog.Logger
	// Accounts answers who a caller is and signs users in: the engine's
	// AuthService. Nil keeps the gateway to the server's token alone, as
	// a gateway in front of an engine without users.
	Accounts penguinv1.AuthServiceClient
	// Users, Projects and Tokens answer the account routes (teams.go);
	// nil answers them Unimplemented.
	Users    penguinv1.UserServiceClient
	Projects penguinv1.ProjectServiceClient
	Tokens   penguinv1.TokenServiceClient
	// Team says the server is in team mode: callers must sign in.
	Team bool
	// Agents answers the agent routes (/api/projects/{project}/agents/…);
	// nil answers them Unimplemented.
	Agents penguinv1.AgentServiceClient
	// Schedules answers the schedule routes
	// (/api/projects/{project}/…/schedules); nil answers them
	// Unimplemented.
	Schedules penguinv1.ScheduleServiceClient
	// LLM answers GET /api/models and the provider routes (/api/providers,
	// /api/projects/{project}/providers, the first-run form); nil answers
	// them Unimplemented.
	LLM penguinv1.LLMServiceClient
	// App is the web app's built files, served at / (index.html for every
	// path that is not a file, so the app's own routes reload); nil serves
	// the API alone.
	App fs.FS
}

// Gateway is the HTTP face of an EngineService.
type Gateway struct {
	engine   penguinv1.EngineServiceClient
	accounts penguinv1.AuthServiceClient
	opts     Options
	auth     *auth
	cop      *http.CrossOriginProtection
	mux      *http.ServeMux
	// apiRoutes lists the patterns of the API routes, every one behind
	// authenticated (see Routes).
	apiRoutes []string
	// oidcStarts limits how often each client starts a sign-in with the
	// identity provider.
	oidcStarts *clientlimit.Limiter
}

var jsonOut = protojson.MarshalOptions{UseProtoNames: true}

// New returns a Gateway over engine.
func New(engine penguinv1.EngineServiceClient, opts Options) *Gateway {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 20 * time.Second
	}
	opts.Logger = logger.OrDiscard(opts.Logger)
	g := &Gateway{
		engine: engine, accounts: opts.Accounts, opts: opts, mux: http.NewServeMux(),
		auth: newAuth(opts.AuthToken, opts.Team, time.Now), cop: http.NewCrossOriginProtection(),
		oidcStarts: clientlimit.OIDCStarts(),
	}
	g.routes()
	return g
}

func (g *Gateway) routes() {
	m := g.mux
	m.HandleFunc("GET /api/auth", g.authStatus)
	m.HandleFunc("POST /api/auth/login", g.login)
	m.HandleFunc("POST /api/auth/logout", g.logout)
	m.HandleFunc("GET /api/auth/oidc/start", g.limitOIDCStarts(g.oidcStart))
	m.HandleFunc("GET /api/auth/oidc/callback", g.oidcCallback)

	api := func(pattern string, h http.HandlerFunc) {
		g.apiRoutes = append(g.apiRoutes, pattern)
		m.Handle(pattern, g.authenticated(h))
	}
	api("GET /api/sessions", g.listSessions)
	api("POST /api/sessions", g.createSession)
	api("GET /api/sessions/{id}", g.getSession)
	api("PATCH /api/sessions/{id}", g.updateSession)
	api("GET /api/defaults", g.sessionDefaults)
	api("DELETE /api/sessions/{id}", g.deleteSession)
	api("GET /api/sessions/{id}/messages", g.messages)
	api("GET /api/sessions/{id}/trace", g.trace)
	api("GET /api/sessions/{id}/stream", g.stream)
	api("POST /api/sessions/{id}/tasks", g.startTask)
	api("POST /api/sessions/{id}/steer", g.steer)
	api("POST /api/sessions/{id}/approvals/{toolCallId}", g.approve)
	api("POST /api/sessions/{id}/abort", g.abort)
	api("POST /api/sessions/{id}/retry-now", g.retryNow)
	api("POST /api/sessions/{id}/compact", g.compact)
	api("POST /api/sessions/{id}/fork", g.fork)
	api("GET /api/sessions/{id}/processes", g.processes)
	api("POST /api/sessions/{id}/processes/{processId}/kill", g.killProcess)
	api("GET /api/events", g.sessionEvents)
	api("GET /api/models", g.models)
	api("GET /api/setup", g.setupStatus)
	api("POST /api/setup/provider", g.setupProvider)
	g.agentRoutes(api)
	g.teamRoutes(api)
	g.providerRoutes(api)
	g.scheduleRoutes(api)
	g.workspaceRoutes(api)
	var app http.Handler
	if g.opts.App != nil {
		app = appHandler(g.opts.App)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if app == nil || strings.HasPrefix(r.URL.Path, "/api/") || !safeMethod(r.Method) {
			writeError(w, codes.NotFound, "no route "+r.Method+" "+r.URL.Path)
			return
		}
		app.ServeHTTP(w, r)
	})
}

// ServeHTTP refuses malformed, misaddressed and cross-origin requests,
// then routes the rest.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := checkInput(r); err != nil {
		badRequest(w, err.Error())
		return
	}
	if err := g.auth.checkHost(r); err != nil {
		writeError(w, codes.PermissionDenied, err.Error())
		return
	}
	if err := g.cop.Check(r); err != nil {
		writeError(w, codes.PermissionDenied, "cross-origin request refused: "+err.Error())
		return
	}
	g.mux.ServeHTTP(w, r)
}

// authenticated wraps an API route with the one middleware that resolves
// its caller (see auth.go): the client's credential goes with every call
// the route makes, and a credential the engine does not know is refused
// here, before the route runs. What the caller may touch is decided by
// the services the route calls, not here.
func (g *Gateway) authenticated(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, code, msg := g.auth.credential(w, r, g.accounts == nil)
		if code != codes.OK {
			writeError(w, code, msg)
			return
		}
		if g.accounts == nil {
			h(w, r)
			return
		}
		ctx := withCredential(r.Context(), cred)
		if _, err := g.accounts.WhoAmI(ctx, &penguinv1.WhoAmIRequest{}); err != nil {
			g.fail(w, r, err)
			return
		}
		h(w, r.WithContext(ctx))
	})
}

func writeJSON(w http.ResponseWriter, httpStatus int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProto(w http.ResponseWriter, httpStatus int, m proto.Message) {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		writeError(w, codes.Internal, "could not encode the response")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(b)
}

// Routes returns the patterns ("METHOD /path/{name}") of every API route
// that acts for a caller, for a test that tries each of them as a user
// who must not reach another user's things.
func (g *Gateway) Routes() []string { return append([]string(nil), g.apiRoutes...) }
