package loop_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc"
)

// recorder is an Emitter that keeps every message in order and can be made
// to fail.
type recorder struct {
	mu   sync.Mutex
	msgs []*penguinv1.OmniMessage
	fail error
	// on, when set, sees every message after it is recorded.
	on func(*penguinv1.OmniMessage)
}

func (r *recorder) Emit(_ context.Context, m *penguinv1.OmniMessage) error {
	r.mu.Lock()
	if r.fail != nil {
		err := r.fail
		r.mu.Unlock()
		return err
	}
	r.msgs = append(r.msgs, m)
	on := r.on
	r.mu.Unlock()
	if on != nil {
		on(m)
	}
	return nil
}

func (r *recorder) all() []*penguinv1.OmniMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*penguinv1.OmniMessage(nil), r.msgs...)
}

// host is a Host with a steering queue and a retry wait that RetryNow can
// cut short.
type host struct {
	mu       sync.Mutex
	queue    []*penguinv1.OmniMessage
	states   []penguinv1.SessionState
	retryIns []time.Duration
	contexts int
	retryNow chan struct{}
	em       *recorder
}

func newHost(em *recorder) *host { return &host{em: em, retryNow: make(chan struct{}, 1)} }

func (h *host) steer(text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue = append(h.queue, loop.SteeringMessage(text))
}

func (h *host) TakeInput() []*penguinv1.OmniMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queue
	h.queue = nil
	return q
}

func (h *host) SetState(s penguinv1.SessionState, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.states = append(h.states, s)
	if s == penguinv1.SessionState_SESSION_STATE_RETRY_WAIT {
		h.retryIns = append(h.retryIns, d)
	}
}

func (h *host) WaitRetry(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-h.retryNow:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *host) StartContext(ctx context.Context) error {
	h.mu.Lock()
	h.contexts++
	h.mu.Unlock()
	if err := h.em.Emit(ctx, &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{SessionId: "s"}}}); err != nil {
		return err
	}
	return h.em.Emit(ctx, omni.ToolListReady(nil))
}

// approver decides with a function; nil allows everything.
type approver func(ctx context.Context, call *penguinv1.ToolCall) penguinv1.Decision

func (a approver) Decide(ctx context.Context, call *penguinv1.ToolCall) penguinv1.Decision {
	if a == nil {
		return penguinv1.Decision_DECISION_ALLOW
	}
	return a(ctx, call)
}

// rig is one loop under test with fake llm and environment servers.
type rig struct {
	t    *testing.T
	llm  *fake.LLM
	env  *fake.Env
	em   *recorder
	host *host
	deps loop.Deps
	set  loop.Settings
	mctx *loop.Context

	mu       sync.Mutex
	executed map[string]int
}

func newRig(t *testing.T, replies ...*fake.Reply) *rig {
	t.Helper()
	r := &rig{t: t, llm: &fake.LLM{}, env: &fake.Env{}, em: &recorder{}, executed: map[string]int{}}
	r.llm.Generate = fake.Script(replies...)
	llmConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, r.llm) })
	envConn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, r.env) })
	envClient := penguinv1.NewEnvironmentServiceClient(envConn)
	resp, err := envClient.CreateEnvironment(context.Background(), &penguinv1.CreateEnvironmentRequest{Workspace: "w"})
	if err != nil {
		t.Fatal(err)
	}
	envID := resp.GetEnvironmentId()
	r.host = newHost(r.em)
	r.deps = loop.Deps{
		LLM: penguinv1.NewLLMServiceClient(llmConn),
		Tools: countingTools{r: r, ex: &envtool.Executor{Target: func() (envtool.Client, string) {
			return envClient, envID
		}}},
		Approver: approver(nil),
		Emitter:  r.em,
		Host:     r.host,
	}
	r.set = loop.Settings{
		Model: &penguinv1.ModelRef{Provider: "p", ModelId: "m"},
		Retry: loop.Retry{MaxRetries: 5, Base: time.Millisecond, Cap: 8 * time.Millisecond},
	}
	r.mctx = &loop.Context{}
	return r
}

type countingTools struct {
	r  *rig
	ex *envtool.Executor
}

func (c countingTools) Execute(ctx context.Context, call *penguinv1.ToolCall, fwd func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	c.r.mu.Lock()
	c.r.executed[call.GetToolCallId()]++
	c.r.mu.Unlock()
	return c.ex.Execute(ctx, call, fwd)
}

func (r *rig) runs(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.executed[id]
}

// run runs a task with a deadline and checks the streaming discipline of
// everything emitted.
func (r *rig) run(ctx context.Context, prompt string) loop.Result {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res := loop.Run(ctx, r.deps, r.set, r.mctx, []*penguinv1.OmniMessage{omni.UserText(prompt)})
	r.checkDiscipline()
	return res
}

func (r *rig) checkDiscipline() {
	r.t.Helper()
	c := omni.NewChecker()
	for i, m := range r.em.all() {
		if err := c.Check(m); err != nil {
			r.t.Fatalf("message %d breaks the streaming discipline: %v", i, err)
		}
	}
	if err := c.Finish(); err != nil {
		r.t.Fatalf("stream: %v", err)
	}
}

// persisted returns the emitted messages that belong in the log.
func (r *rig) persisted() []*penguinv1.OmniMessage {
	var out []*penguinv1.OmniMessage
	for _, m := range r.em.all() {
		if omni.Persistable(m) {
			out = append(out, m)
		}
	}
	return out
}

// kinds returns the payload kinds of msgs, for order checks.
func kinds(msgs []*penguinv1.OmniMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.ProtoReflect().WhichOneof(m.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name())
	}
	return out
}

func find[T any](msgs []*penguinv1.OmniMessage, get func(*penguinv1.OmniMessage) T, ok func(T) bool) []T {
	var out []T
	for _, m := range msgs {
		if v := get(m); ok(v) {
			out = append(out, v)
		}
	}
	return out
}

func requestEnds(msgs []*penguinv1.OmniMessage) []*penguinv1.RequestEnd {
	return find(msgs, (*penguinv1.OmniMessage).GetRequestEnd, func(v *penguinv1.RequestEnd) bool { return v != nil })
}

func outputs(msgs []*penguinv1.OmniMessage) []*penguinv1.ToolCallOutput {
	return find(msgs, (*penguinv1.OmniMessage).GetToolCallOutput, func(v *penguinv1.ToolCallOutput) bool { return v != nil })
}

func texts(msgs []*penguinv1.OmniMessage) []string {
	var out []string
	for _, m := range msgs {
		if t := m.GetText(); t != nil {
			out = append(out, t.GetText())
		}
	}
	return out
}

var errStore = errors.New("store down")
