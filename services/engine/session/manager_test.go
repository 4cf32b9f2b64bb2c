package session_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
)

// rig is a Manager over a real SQLite store, with the fake llm and
// environment services over in-memory gRPC.
type rig struct {
	mgr   *session.Manager
	store store.Store
	llm   *fake.LLM
	env   *fake.Env
	agent string
}

func newRig(t *testing.T, opts ...func(*session.Options)) *rig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "engine.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: st, llm: &fake.LLM{}, env: &fake.Env{Tools: []*penguinv1.ToolInfo{fake.Tool("read_file", penguinv1.Permission_PERMISSION_R)}}, agent: filepath.Join(dir, "agent")}
	if err := os.MkdirAll(r.agent, 0o755); err != nil {
		t.Fatal(err)
	}
	llmConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, r.llm) })
	envConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, r.env) })
	o := session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(llmConn), Environment: penguinv1.NewEnvironmentServiceClient(envConn),
		DefaultAgentState: r.agent, EngineID: "engine-here", Address: "10.0.0.1:7423", Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range opts {
		f(&o)
	}
	r.mgr, err = session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.mgr.Shutdown(ctx)
		_ = st.Close()
	})
	return r
}

func (r *rig) create(t *testing.T, spec session.CreateSpec) *penguinv1.Session {
	t.Helper()
	s, err := r.mgr.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var model = &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}

func TestCreateChecksItsInput(t *testing.T) {
	r := newRig(t)
	for _, c := range []struct {
		name string
		spec session.CreateSpec
	}{
		{"no model id", session.CreateSpec{Model: &penguinv1.ModelRef{Provider: "fake"}, Workspace: "ws"}},
		{"no workspace", session.CreateSpec{Model: model, Workspace: " "}},
		{"missing agent state", session.CreateSpec{Model: model, Workspace: "ws", AgentState: "/no/such/agent"}},
	} {
		if _, err := r.mgr.Create(t.Context(), c.spec); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("%s: Create = %v, want ErrInvalid", c.name, err)
		}
	}
	if len(r.env.Created()) != 0 {
		t.Fatalf("refused sessions created %d environments", len(r.env.Created()))
	}
}

func TestCreateRecordsTheSessionAndItsEnvironment(t *testing.T) {
	r := newRig(t)
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	if s.GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL || s.GetWorkspace() != "/fake/ws" ||
		s.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || s.GetLastSequence() != 1 {
		t.Fatalf("session = %v", s)
	}
	created := r.env.Created()
	if len(created) != 1 || created[0].GetLabel() != s.GetSessionId() || !created[0].GetCommandPolicy().GetUseDefaults() {
		t.Fatalf("environment requests = %v", created)
	}
	hist, more, err := r.mgr.History(t.Context(), s.GetSessionId(), 0, 0)
	if err != nil || more || len(hist) != 1 {
		t.Fatalf("History = %v, %v, %v", hist, more, err)
	}
	meta := hist[0].GetMessage().GetSessionMeta()
	if meta.GetSessionId() != s.GetSessionId() || meta.GetWorkspace() != "/fake/ws" || !strings.Contains(meta.GetSystemPrompt(), "/fake/ws") {
		t.Fatalf("session_meta = %v", meta)
	}
	got, err := r.mgr.Get(t.Context(), s.GetSessionId())
	if err != nil || got.GetSessionId() != s.GetSessionId() {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if err := r.mgr.Delete(t.Context(), s.GetSessionId()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mgr.Get(t.Context(), s.GetSessionId()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
}

// A session another replica runs is that replica's: a task here is refused
// as busy, naming the replica, and Owner tells callers where to go.
func TestASessionLeasedElsewhere(t *testing.T) {
	r := newRig(t)
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	other := lease.New(r.store, lease.Options{Owner: "engine-there", Address: "10.0.0.2:7423", TTL: time.Minute})
	if _, err := other.Acquire(t.Context(), s.GetSessionId()); err != nil {
		t.Fatal(err)
	}
	err := r.mgr.Run(t.Context(), s.GetSessionId(), session.RunSpec{Prompt: "hi"}, func(*penguinv1.RunEvent) error { return nil })
	if !errors.Is(err, session.ErrBusy) || !strings.Contains(err.Error(), "engine-there") {
		t.Fatalf("Run = %v, want ErrBusy naming engine-there", err)
	}
	addr, elsewhere, err := r.mgr.Owner(t.Context(), s.GetSessionId())
	if err != nil || !elsewhere || addr != "10.0.0.2:7423" {
		t.Fatalf("Owner = %q, %v, %v", addr, elsewhere, err)
	}
	if err := r.mgr.Steer(t.Context(), s.GetSessionId(), "faster", nil); !errors.Is(err, session.ErrPrecondition) || !strings.Contains(err.Error(), "10.0.0.2:7423") {
		t.Fatalf("Steer = %v, want a precondition error with the owner's address", err)
	}
}

func TestApproveWithoutAQuestion(t *testing.T) {
	r := newRig(t)
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	if err := r.mgr.Approve(t.Context(), s.GetSessionId(), "c1", nil, penguinv1.Decision_DECISION_FORBIDDEN); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("Approve(forbidden) = %v, want ErrInvalid", err)
	}
	if err := r.mgr.Approve(t.Context(), s.GetSessionId(), "", nil, penguinv1.Decision_DECISION_ALLOW); !errors.Is(err, session.ErrInvalid) {
		t.Fatalf("Approve without a call id = %v, want ErrInvalid", err)
	}
	if err := r.mgr.Approve(t.Context(), s.GetSessionId(), "c1", nil, penguinv1.Decision_DECISION_ALLOW); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Approve with no task = %v, want ErrNotFound", err)
	}
}

// A run ends with the idle state, its events numbered after the
// session_meta, and the session unloads once nobody follows it.
func TestRunToItsEnd(t *testing.T) {
	r := newRig(t)
	r.llm.Generate = fake.Script(fake.NewReply().Text("hello there").Done())
	s := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"})
	var evs []*penguinv1.RunEvent
	err := r.mgr.Run(t.Context(), s.GetSessionId(), session.RunSpec{Prompt: "hi"}, func(ev *penguinv1.RunEvent) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1].GetState()
	if last.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || last.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("last event = %v", evs[len(evs)-1])
	}
	for i, ev := range evs {
		if ev.GetSequence() != int64(i+2) {
			t.Fatalf("event %d numbered %d, want %d", i, ev.GetSequence(), i+2)
		}
	}
	got, err := r.mgr.Get(t.Context(), s.GetSessionId())
	if err != nil || got.GetTitle() != "hi" {
		t.Fatalf("Get = %v, %v", got, err)
	}
}
