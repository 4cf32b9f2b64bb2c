package access

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Authorize checks a call's request against the caller's access before
// its handler runs, for every method of every service, so that a new RPC
// is checked without anyone remembering to: a request that names a
// session (a string field session_id) needs that session's project, and
// a request of a project-scoped service (projectScoped) that names a
// project (a string field project; empty means DefaultProject) needs that
// project. The level follows the method's name: Get, List, Watch,
// Export and Attach read; everything else writes. Handlers still decide
// what the check cannot see (which project a new session goes in, which
// sessions a listing shows). The operator and the implicit user of a
// local server pass.
func (g *Guard) Authorize(ctx context.Context, fullMethod string, req any) error {
	c, err := caller(ctx)
	if err != nil {
		return err
	}
	m, ok := req.(proto.Message)
	if !ok || c.Operator || c.Local {
		// The services' own calls (the operator's) and a laptop's one
		// user name sessions before they exist (an environment's label).
		return nil
	}
	lvl := levelOf(fullMethod)
	msg := m.ProtoReflect()
	if id, ok := stringField(msg, "session_id"); ok && id != "" {
		return g.CheckSession(ctx, id, lvl)
	}
	if strings.HasPrefix(fullMethod, llmService) {
		return g.authorizeRoutes(ctx, c, fullMethod, msg, lvl)
	}
	if !projectScoped(fullMethod) {
		return nil
	}
	if p, ok := stringField(msg, "project"); ok {
		if p == "" {
			p = DefaultProject
		}
		return g.Check(ctx, p, lvl, "project", p)
	}
	return nil
}

// llmService prefixes the methods of the llm service, whose provider
// routes are global (project empty) or a project's.
const llmService = "/penguin.v1.LLMService/"

// routeOwners are the llm service's methods that change a project's
// routes, which hold its API keys: they need the project's owner.
var routeOwners = []string{llmService + "AddProvider", llmService + "UpdateProvider", llmService + "RemoveProvider"}

// authorizeRoutes checks a call of the llm service: a request naming a
// project needs that project (at read level to list its routes, write
// level to use or test them, owner level to change them); one naming none
// touches the global routes, which everyone may list and only an
// administrator may change or test.
func (g *Guard) authorizeRoutes(ctx context.Context, c *Caller, fullMethod string, msg protoreflect.Message, lvl Level) error {
	p, _ := stringField(msg, "project")
	if p == "" {
		if lvl == Read || c.Admin {
			return nil
		}
		return status.Error(codes.PermissionDenied, "the global provider routes are changed and tested by administrators; name your project to manage its own")
	}
	if slices.Contains(routeOwners, fullMethod) {
		lvl = Own
	}
	return g.Check(ctx, p, lvl, "project", p)
}

// projectScoped reports whether a method belongs to a service whose
// requests name the project they touch in a field "project".
func projectScoped(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/penguin.v1.AgentService/") || strings.HasPrefix(fullMethod, "/penguin.v1.ScheduleService/")
}

// readPrefixes are the method name prefixes of calls that only read.
var readPrefixes = []string{"Get", "List", "Watch", "Export", "Attach"}

// levelOf is the level a method needs, from its name.
func levelOf(fullMethod string) Level {
	name := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
	for _, p := range readPrefixes {
		if strings.HasPrefix(name, p) {
			return Read
		}
	}
	return Write
}

// stringField returns the value of msg's string field name, and whether
// msg has one.
func stringField(msg protoreflect.Message, name protoreflect.Name) (string, bool) {
	fd := msg.Descriptor().Fields().ByName(name)
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return "", false
	}
	return msg.Get(fd).String(), true
}
