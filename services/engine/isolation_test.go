package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/processtest"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/gateway"
)

// secret is in Alice's session and nowhere Bob may look.
const secret = "SECRET-OF-ALICE"

// TestIsolation is the isolation attack suite (docs/security.md, "Who
// sees what"): on a team server, user Bob calls every method of every
// penguin.v1 service (enumerated from the descriptors, so a new RPC is
// tried without anyone adding it here) and every API route of the
// gateway (from its route table) on Alice's session and project. Every
// call that names them is refused with NOT_FOUND or PERMISSION_DENIED
// (404/403), and no answer, error or stream carries anything of hers.
func TestIsolation(t *testing.T) {
	dir := t.TempDir()
	storeURL := filepath.Join(dir, "penguin.db")
	const svc = "isolation-service-token"
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	p, err := assemble.New(t.Context(), teamConfig(t, dir, lis, svc, 0))
	if err != nil {
		t.Fatal(err)
	}
	processtest.Serve(t, p)
	ctx := testkit.Context(t, 3*time.Minute)
	dial := func(token string) *grpc.ClientConn {
		conn, err := grpcclient.New(addr, grpcclient.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	op := dial(svc)
	users := penguinv1.NewUserServiceClient(op)
	tokenOf := func(user string) string {
		if _, err := users.CreateUser(ctx, &penguinv1.CreateUserRequest{UserId: user, Password: user + "-password"}); err != nil {
			t.Fatal(err)
		}
		s, err := penguinv1.NewAuthServiceClient(op).SignIn(ctx, &penguinv1.SignInRequest{UserId: user, Password: user + "-password"})
		if err != nil {
			t.Fatal(err)
		}
		// A personal access token, so that Bob's SignOut does not end
		// the credential the rest of the suite uses.
		tk, err := penguinv1.NewTokenServiceClient(dial(s.GetSessionToken())).CreateToken(ctx, &penguinv1.CreateTokenRequest{Name: "suite"})
		if err != nil {
			t.Fatal(err)
		}
		return tk.GetSecret()
	}
	alice, bob := tokenOf("alice"), tokenOf("bob")
	// Alice's token, which Bob tries to revoke by its id.
	mine, err := penguinv1.NewTokenServiceClient(dial(alice)).ListTokens(ctx, &penguinv1.ListTokensRequest{})
	if err != nil || len(mine.GetTokens()) != 1 {
		t.Fatalf("Alice's tokens: %v, %v", mine, err)
	}
	aliceToken := mine.GetTokens()[0].GetTokenId()
	if _, err := penguinv1.NewProjectServiceClient(dial(alice)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "apollo", Name: secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := penguinv1.NewProjectServiceClient(dial(bob)).CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "bravo"}); err != nil {
		t.Fatal(err)
	}
	// Alice's session, written where the engine keeps it.
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateSession(ctx, &store.Session{ID: "s-alice", ProjectID: "apollo", Title: secret, Workspace: "/" + secret}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	// Alice sees it; the check below is not vacuous.
	got, err := penguinv1.NewEngineServiceClient(dial(alice)).GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: "s-alice"})
	if err != nil || got.GetSession().GetTitle() != secret {
		t.Fatalf("Alice's own session: %v, %v", got, err)
	}
	providerRoutes(ctx, t, dial(alice), dial(tokenOf("carol")))
	// A model setting of Alice's project, its model named after the
	// secret, which she lists.
	agentsA := penguinv1.NewAgentServiceClient(dial(alice))
	if _, err := agentsA.SetModelSettings(ctx, &penguinv1.SetModelSettingsRequest{Project: "apollo", Settings: &penguinv1.ModelSettings{
		Model: &penguinv1.ModelRef{Provider: "apollo-llm", ModelId: secret}, ContextWindow: 32768,
	}}); err != nil {
		t.Fatal(err)
	}
	if got, err := agentsA.ListModelSettings(ctx, &penguinv1.ListModelSettingsRequest{Project: "apollo"}); err != nil || !strings.Contains(got.String(), secret) {
		t.Fatalf("Alice's own model settings: %v, %v", got, err)
	}

	// Alice's agent and schedule in her project, which sends the secret to
	// her session.
	if _, err := penguinv1.NewAgentServiceClient(dial(alice)).CreateAgent(ctx, &penguinv1.CreateAgentRequest{Project: "apollo", Name: "default"}); err != nil {
		t.Fatal(err)
	}
	schedules := penguinv1.NewScheduleServiceClient(dial(alice))
	if _, err := schedules.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Project: "apollo", Agent: "default", Name: "default",
		Yaml: "prompt: " + secret + "\nperiod: 1h\nstart_at: 2030-01-01T00:00:00Z\nsession_id: s-alice\n"}); err != nil {
		t.Fatal(err)
	}
	if got, err := schedules.ListSchedules(ctx, &penguinv1.ListSchedulesRequest{Project: "apollo"}); err != nil || len(got.GetSchedules()) != 1 {
		t.Fatalf("Alice's own schedules: %v, %v", got, err)
	}
	// Bob cannot aim a schedule of his own project at Alice's session.
	if _, err := penguinv1.NewAgentServiceClient(dial(bob)).CreateAgent(ctx, &penguinv1.CreateAgentRequest{Project: "bravo", Name: "default"}); err != nil {
		t.Fatal(err)
	}
	_, err = penguinv1.NewScheduleServiceClient(dial(bob)).CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Project: "bravo", Agent: "default", Name: "steal",
		Yaml: "prompt: hi\nperiod: 1h\nstart_at: 2030-01-01T00:00:00Z\nsession_id: s-alice\n"})
	if status.Code(err) != codes.InvalidArgument || strings.Contains(err.Error(), secret) {
		t.Errorf("Bob's schedule aimed at Alice's session: %v; want INVALID_ARGUMENT", err)
	}
	// A schedule may name a model of its own project's routes, not of
	// another's: Alice's names her apollo-llm route, Bob's the same is
	// refused as an unknown route, saying nothing of Alice's, and nothing
	// of his is stored.
	modelOf := "prompt: hi\nperiod: 1h\nstart_at: 2030-01-01T00:00:00Z\nworkspace: ws\nprovider: apollo-llm\nmodel_id: " + secret + "\n"
	if _, err := schedules.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Project: "apollo", Agent: "default", Name: "routed", Yaml: modelOf}); err != nil {
		t.Fatalf("Alice's schedule on her project's route: %v", err)
	}
	bobSchedules := penguinv1.NewScheduleServiceClient(dial(bob))
	_, err = bobSchedules.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Project: "bravo", Agent: "default", Name: "borrow", Yaml: modelOf})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `unknown provider "apollo-llm"`) || strings.Contains(err.Error(), "its models") {
		t.Errorf("Bob's schedule on Alice's route: %v; want INVALID_ARGUMENT naming the route unknown", err)
	}
	if got, err := bobSchedules.ListSchedules(ctx, &penguinv1.ListSchedulesRequest{Project: "bravo"}); err != nil || len(got.GetSchedules()) != 0 {
		t.Errorf("Bob's schedules after refused creates: %v, %v", got, err)
	}

	t.Run("gRPC", func(t *testing.T) { attackGRPC(ctx, t, dial(bob), aliceToken) })
	t.Run("HTTP", func(t *testing.T) {
		gw := gateway.New(penguinv1.NewEngineServiceClient(p.Local()), gateway.Options{
			AuthToken: svc, Team: true, Accounts: penguinv1.NewAuthServiceClient(p.Local()),
			LLM: penguinv1.NewLLMServiceClient(p.Local()), Agents: penguinv1.NewAgentServiceClient(p.Local()),
			Users: penguinv1.NewUserServiceClient(p.Local()), Projects: penguinv1.NewProjectServiceClient(p.Local()),
			Tokens:    penguinv1.NewTokenServiceClient(p.Local()),
			Schedules: penguinv1.NewScheduleServiceClient(p.Local()),
		})
		web := httptest.NewServer(gw)
		defer web.Close()
		attackHTTP(ctx, t, web.URL, gw.Routes(), bob, aliceToken)
	})
}

// providerRoutes gives Alice's project a provider route (its one model
// named after the secret), which she lists, and checks the levels of a
// project's routes: Carol, a plain member of the project, lists and may
// use them but not change them, and only an administrator changes the
// global ones.
func providerRoutes(ctx context.Context, t *testing.T, alice, carol *grpc.ClientConn) {
	t.Helper()
	route := &penguinv1.ProviderRoute{Name: "apollo-llm", Type: "openai", BaseUrl: "http://127.0.0.1:9/v1", Models: []string{secret}}
	llmA := penguinv1.NewLLMServiceClient(alice)
	if _, err := llmA.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "apollo", Route: route, ApiKey: "sk-alice-0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	listed, err := llmA.ListProviders(ctx, &penguinv1.ListProvidersRequest{Project: "apollo"})
	if err != nil || !strings.Contains(listed.String(), secret) || strings.Contains(listed.String(), "sk-alice-0123") {
		t.Fatalf("Alice's own routes: %v, %v", listed, err)
	}
	if _, err := penguinv1.NewProjectServiceClient(alice).SetMember(ctx, &penguinv1.SetMemberRequest{ProjectId: "apollo", UserId: "carol"}); err != nil {
		t.Fatal(err)
	}
	llmC := penguinv1.NewLLMServiceClient(carol)
	if got, err := llmC.ListProviders(ctx, &penguinv1.ListProvidersRequest{Project: "apollo"}); err != nil || !strings.Contains(got.String(), secret) {
		t.Fatalf("Carol, a member, lists: %v, %v", got, err)
	}
	if _, err := llmC.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Project: "apollo", Name: "apollo-llm"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Carol, a member, removed a route: %v", err)
	}
	if _, err := llmC.AddProvider(ctx, &penguinv1.AddProviderRequest{Route: route, ApiKey: "k"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Carol added a global route: %v", err)
	}
	if tested, err := llmC.TestProvider(ctx, &penguinv1.TestProviderRequest{Project: "apollo", Name: "apollo-llm"}); err != nil || tested.GetOk() {
		t.Fatalf("Carol's test of a route at a dead address: %v, %v", tested, err)
	}
	// The audit log of apollo, which Alice owns, records her change of
	// its routes, without the key, and not Carol's refused one.
	log, err := penguinv1.NewProjectServiceClient(alice).ListAudit(ctx, &penguinv1.ListAuditRequest{ProjectId: "apollo"})
	if err != nil {
		t.Fatal(err)
	}
	var adds, removes int
	for _, r := range log.GetRecords() {
		switch {
		case strings.Contains(r.String(), "sk-alice"):
			t.Fatalf("the audit log holds the route's key: %v", r)
		case r.GetAction() == "provider_route.add" && r.GetActor() == "alice" && r.GetTarget() == "apollo-llm" && r.GetDetail() == "api key set":
			adds++
		case r.GetAction() == "provider_route.remove":
			removes++
		}
	}
	if adds != 1 || removes != 0 {
		t.Fatalf("apollo's audit log has %d route additions by alice and %d removals; want 1 and 0:\n%v", adds, removes, log.GetRecords())
	}

	// A project with a stored route is not deleted until its owner
	// removes the route: no key outlives its project.
	projects := penguinv1.NewProjectServiceClient(alice)
	if _, err := projects.CreateProject(ctx, &penguinv1.CreateProjectRequest{ProjectId: "doomed"}); err != nil {
		t.Fatal(err)
	}
	doomed := &penguinv1.ProviderRoute{Name: "doomed-llm", Type: "openai", BaseUrl: "http://127.0.0.1:9/v1"}
	if _, err := llmA.AddProvider(ctx, &penguinv1.AddProviderRequest{Project: "doomed", Route: doomed, ApiKey: "sk-doomed-0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	_, err = projects.DeleteProject(ctx, &penguinv1.DeleteProjectRequest{ProjectId: "doomed"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "doomed-llm") {
		t.Fatalf("deleting a project with a provider route: %v; want FAILED_PRECONDITION naming the route", err)
	}
	if _, err := llmA.RemoveProvider(ctx, &penguinv1.RemoveProviderRequest{Project: "doomed", Name: "doomed-llm"}); err != nil {
		t.Fatal(err)
	}
	if _, err := projects.DeleteProject(ctx, &penguinv1.DeleteProjectRequest{ProjectId: "doomed"}); err != nil {
		t.Fatalf("deleting the project once its route is gone: %v", err)
	}
}

// refused are the answers to a call on Alice's things.
var refused = []codes.Code{codes.NotFound, codes.PermissionDenied}

// targets fills a request with Alice's session, project, agent, account
// and token (whose id is token), in whichever of those fields it has; it
// reports whether it set any.
func targets(m protoreflect.Message, token string) bool {
	set := false
	for name, v := range map[protoreflect.Name]string{
		"session_id": "s-alice", "project": "apollo", "project_id": "apollo", "user_id": "alice", "agent": "default",
		"token_id": token,
	} {
		fd := m.Descriptor().Fields().ByName(name)
		if fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() {
			m.Set(fd, protoreflect.ValueOfString(v))
			set = set || name != "agent"
		}
	}
	return set
}

// allowedElse lists methods whose refusal of Bob is another code, and
// why that leaks nothing.
var allowedElse = map[string][]codes.Code{
	// Project ids are one namespace: a taken id is taken for everyone.
	"/penguin.v1.ProjectService/CreateProject": {codes.AlreadyExists},
	// Bob signing in as Alice without her password.
	"/penguin.v1.AuthService/SignIn": {codes.Unauthenticated},
	// Bob's own password, wrong.
	"/penguin.v1.AuthService/ChangePassword": {codes.PermissionDenied, codes.InvalidArgument},
}

func attackGRPC(ctx context.Context, t *testing.T, conn *grpc.ClientConn, aliceToken string) {
	var methods []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "penguin.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				methods = append(methods, sd.Methods().Get(j))
			}
		}
		return true
	})
	sort.Slice(methods, func(i, j int) bool { return methods[i].FullName() < methods[j].FullName() })
	if len(methods) < 40 {
		t.Fatalf("only %d methods found; the descriptors are not all linked in", len(methods))
	}
	var table []string
	for _, md := range methods {
		full := fmt.Sprintf("/%s/%s", md.Parent().FullName(), md.Name())
		req := dynamicpb.NewMessage(md.Input())
		named := targets(req, aliceToken)
		code, leak := call(ctx, conn, full, md, req)
		table = append(table, fmt.Sprintf("%s %v", full, code))
		if leak != "" {
			t.Errorf("%s leaked %q", full, leak)
		}
		if !named {
			// A call that names nothing of Alice's (a listing, WhoAmI, a
			// token of Bob's own) may succeed; it must only leak nothing.
			continue
		}
		if !slices.Contains(refused, code) && !slices.Contains(allowedElse[full], code) {
			t.Errorf("%s on Alice's things answered %v; want NOT_FOUND or PERMISSION_DENIED", full, code)
		}
	}
	t.Logf("Bob's calls:\n%s", strings.Join(table, "\n"))
}

// call makes one call, unary or server-streaming, and returns its code
// and anything of Alice's found in the answer or the error.
func call(ctx context.Context, conn *grpc.ClientConn, full string, md protoreflect.MethodDescriptor, req *dynamicpb.Message) (codes.Code, string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var out strings.Builder
	var err error
	if md.IsStreamingServer() || md.IsStreamingClient() {
		var cs grpc.ClientStream
		cs, err = conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: md.IsStreamingClient()}, full)
		if err == nil {
			if err = cs.SendMsg(req); err == nil {
				err = cs.CloseSend()
			}
			for err == nil {
				resp := dynamicpb.NewMessage(md.Output())
				if err = cs.RecvMsg(resp); err == nil {
					b, _ := protojson.Marshal(resp)
					out.Write(b)
				}
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
	} else {
		resp := dynamicpb.NewMessage(md.Output())
		if err = conn.Invoke(ctx, full, req, resp); err == nil {
			b, _ := protojson.Marshal(resp)
			out.Write(b)
		}
	}
	if err != nil {
		out.WriteString(status.Convert(err).Message())
	}
	if strings.Contains(out.String(), secret) {
		return status.Code(err), out.String()
	}
	return status.Code(err), ""
}

var param = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// bodies are the request bodies of routes that check their body's shape
// before they ask the engine; the rest get "{}".
var bodies = map[string]string{
	"POST /api/projects/{project}/models/test": `{"model":{"provider":"p","model_id":"m"}}`,
}

// queries name Alice's project in the query of routes that take one
// there.
var queries = map[string]string{
	"GET /api/sessions": "?project_id=apollo",
	// The global audit log holds Alice's sign-ins: admins only.
	"GET /api/audit": "?limit=100",
}

func attackHTTP(ctx context.Context, t *testing.T, base string, routes []string, token, aliceToken string) {
	if len(routes) < 15 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	var table []string
	for _, route := range routes {
		method, pattern, _ := strings.Cut(route, " ")
		named := strings.Contains(pattern, "{")
		path := param.ReplaceAllStringFunc(pattern, func(p string) string {
			switch name := strings.Trim(p, "{}"); {
			case name == "id":
				return "s-alice"
			case strings.Contains(strings.ToLower(name), "project"):
				return "apollo"
			case name == "agent" || name == "name":
				return "default"
			case name == "user":
				return "alice"
			case name == "token":
				return aliceToken
			}
			return "x"
		})
		if strings.HasPrefix(pattern, "/api/projects/") {
			named = true // every project route names Alice's project
		}
		if q, ok := queries[route]; ok {
			path, named = path+q, true
		}
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		body := "{}"
		if b, ok := bodies[route]; ok {
			body = b
		}
		req, _ := http.NewRequestWithContext(rctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		var answer []byte
		if err == nil {
			answer, _ = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		cancel()
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		table = append(table, fmt.Sprintf("%s %d", route, code))
		if strings.Contains(string(answer), secret) {
			t.Errorf("%s leaked: %s", route, answer)
		}
		if named && code != http.StatusNotFound && code != http.StatusForbidden {
			t.Errorf("%s on Alice's things answered %d %s; want 404 or 403", route, code, answer)
		}
	}
	t.Logf("Bob's requests:\n%s", strings.Join(table, "\n"))
}
