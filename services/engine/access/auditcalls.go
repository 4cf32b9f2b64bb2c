package access

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// auditedCalls are the calls recorded in the audit log, with the action
// each records, when they succeed, by the gRPC servers' interceptor
// (AuditCall) rather than by their handlers: what they touch is named in
// the request alone. Sign-ins, accounts, tokens, members, session
// deletions and approvals are recorded where they are decided.
var auditedCalls = map[string]string{
	"/penguin.v1.AgentService/DeleteAgent":       "agent.delete",
	"/penguin.v1.ScheduleService/DeleteSchedule": "schedule.delete",
	llmService + "AddProvider":                   "provider_route.add",
	llmService + "UpdateProvider":                "provider_route.update",
	llmService + "RemoveProvider":                "provider_route.remove",
	llmService + "ResealProviderKeys":            "provider_keys.reseal",
}

// AuditCall records a call of auditedCalls that succeeded (err is nil)
// in the audit log of the project its request names: the request's
// agent, schedule or route name is the target. An API key in the request
// is never recorded, only whether it changed.
func (g *Guard) AuditCall(ctx context.Context, fullMethod string, req any, err error) {
	action, ok := auditedCalls[fullMethod]
	m, isMsg := req.(proto.Message)
	if !ok || err != nil || !isMsg {
		return
	}
	msg := m.ProtoReflect()
	project, _ := stringField(msg, "project")
	var target []string
	for _, name := range []protoreflect.Name{"agent", "name"} {
		if v, _ := stringField(msg, name); v != "" {
			target = append(target, v)
		}
	}
	if fd := msg.Descriptor().Fields().ByName("route"); fd != nil && fd.Message() != nil && msg.Has(fd) {
		if v, _ := stringField(msg.Get(fd).Message(), "name"); v != "" {
			target = append(target, v)
		}
	}
	detail := ""
	if fd := msg.Descriptor().Fields().ByName("api_key"); fd != nil && msg.Has(fd) {
		detail = "api key set"
		if msg.Get(fd).String() == "" {
			detail = "api key removed"
		}
	}
	g.Audit(ctx, project, action, strings.Join(target, "/"), detail)
}
