package engine_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
)

// UpdateSession renames, pins and archives; unset fields are kept, and a
// bad title is refused without changing anything.
func TestUpdateSessionRenamesPinsAndArchives(t *testing.T) {
	e := newEnv(t)
	id := e.create(allowAll)
	update := func(req *penguinv1.UpdateSessionRequest) (*penguinv1.Session, error) {
		req.SessionId = id
		resp, err := e.client.UpdateSession(e.ctx(), req)
		return resp.GetSession(), err
	}
	s, err := update(&penguinv1.UpdateSessionRequest{Title: proto.String("  Release notes  "), Pinned: proto.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetTitle() != "Release notes" || !s.GetPinned() || s.GetArchived() {
		t.Fatalf("after rename and pin: %+v", s)
	}
	s, err = update(&penguinv1.UpdateSessionRequest{Archived: proto.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetTitle() != "Release notes" || !s.GetPinned() || !s.GetArchived() {
		t.Fatalf("archiving kept the rest: %+v", s)
	}
	for _, bad := range []string{"", "   ", strings.Repeat("x", 201), "two\nlines"} {
		if _, err := update(&penguinv1.UpdateSessionRequest{Title: proto.String(bad), Pinned: proto.Bool(false)}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("title %q: %v, want InvalidArgument", bad, err)
		}
	}
	got, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.GetSession(); g.GetTitle() != "Release notes" || !g.GetPinned() {
		t.Fatalf("a refused update changed the session: %+v", g)
	}
	list, err := e.client.ListSessions(e.ctx(), &penguinv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if l := list.GetSessions(); len(l) != 1 || !l[0].GetArchived() || !l[0].GetPinned() {
		t.Fatalf("the list does not show the marks: %+v", l)
	}
	if _, err := e.client.UpdateSession(e.ctx(), &penguinv1.UpdateSessionRequest{SessionId: "session-nope", Pinned: proto.Bool(true)}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown session: %v, want NotFound", err)
	}
}

// GetSessionDefaults passes on the environment service's sandbox and
// offers read-only approval to a person.
func TestGetSessionDefaults(t *testing.T) {
	e := newEnv(t)
	d, err := e.client.GetSessionDefaults(e.ctx(), &penguinv1.GetSessionDefaultsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE || d.GetNetwork() != penguinv1.NetworkAccess_NETWORK_ACCESS_NONE ||
		d.GetInteractiveApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY {
		t.Fatalf("defaults %+v", d)
	}
}

// A mode changed while a task runs applies to its next tool call: the
// call that would have asked under always-ask runs under allow-all.
func TestUpdateSessionApprovalModeMidTask(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "write_file", `{}`).Done(),
		fake.NewReply().ToolCall("c2", "write_file", `{}`).Done(),
		fake.NewReply().Text("done").Done(),
	)
	id := e.create(penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK)
	stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "write two files"})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	for {
		r, err := stream.Recv()
		if err != nil {
			break
		}
		ar := r.GetEvent().GetApprovalRequest()
		if ar == nil {
			continue
		}
		asked = append(asked, ar.GetToolCall().GetToolCallId())
		if _, err := e.client.UpdateSession(e.ctx(), &penguinv1.UpdateSessionRequest{SessionId: id,
			ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL.Enum()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.Approve(e.ctx(), &penguinv1.ApproveRequest{SessionId: id, ToolCallId: ar.GetToolCall().GetToolCallId(), Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
			t.Fatal(err)
		}
	}
	if len(asked) != 1 || asked[0] != "c1" {
		t.Fatalf("asked for %v, want only c1 (c2 came after the switch to allow-all)", asked)
	}
	s, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if s.GetSession().GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL {
		t.Fatalf("mode %v", s.GetSession().GetApprovalMode())
	}
}
