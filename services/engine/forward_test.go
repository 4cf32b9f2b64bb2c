package engine_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// replica is one engine replica of a forwarding test: a manager on the
// shared store, served on a loopback port (its advertised address) with
// forwarding to the other replicas.
type replica struct {
	addr    string
	store   store.Store
	mgr     *session.Manager
	srv     *grpc.Server
	client  penguinv1.EngineServiceClient
	metrics *prometheus.Registry
}

// peers dials engine replicas for forwarding, one connection per address.
type peers struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (p *peers) Peer(addr string) (penguinv1.EngineServiceClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[addr]; c != nil {
		return penguinv1.NewEngineServiceClient(c), nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return penguinv1.NewEngineServiceClient(c), nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// startReplica serves a replica named name over storeURL.
func startReplica(t *testing.T, name, storeURL, agentDir string, llmConn, envConn *grpc.ClientConn) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{addr: lis.Addr().String(), store: st, metrics: prometheus.NewRegistry()}
	r.mgr, err = session.New(session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(llmConn), Environment: penguinv1.NewEnvironmentServiceClient(envConn),
		DefaultAgentState: agentDir, EngineID: name, Address: r.addr, LeaseTTL: time.Second, Registerer: r.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &peers{conns: map[string]*grpc.ClientConn{}}
	r.srv = grpc.NewServer()
	penguinv1.RegisterEngineServiceServer(r.srv, engine.New(r.mgr, nil, engine.WithForwarding(engine.Forwarding{
		Owners: r.mgr, Peers: p, Self: r.addr, Observe: r.mgr.ObserveForward, Patience: 5 * time.Second,
	})))
	go func() { _ = r.srv.Serve(lis) }()
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.client = penguinv1.NewEngineServiceClient(conn)
	t.Cleanup(func() {
		conn.Close()
		p.close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.mgr.Shutdown(sctx)
		r.srv.Stop()
		_ = st.Close()
	})
	return r
}

// forwarded returns how many calls of method the replica forwarded with
// the given answer code.
func (r *replica) forwarded(t *testing.T, method string, c codes.Code) float64 {
	t.Helper()
	mfs, err := r.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "penguin_engine_forwarded_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var gotMethod, gotCode string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method":
					gotMethod = l.GetValue()
				case "code":
					gotCode = l.GetValue()
				}
			}
			if gotMethod == method && gotCode == c.String() {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestCallsReachTheOwningReplica runs a task on one replica and sends the
// calls that only its owner can answer (Attach, Steer, RetryNow, Approve,
// Abort) to another replica, which passes them on: they take effect on
// the owner, and the answers come back through the replica asked. A call
// that arrives after the run ended is answered where it lands, and one
// whose owner cannot be reached says so.
func TestCallsReachTheOwningReplica(t *testing.T) {
	llm, envConn, llmConn, agentDir, storeURL := replicaFixture(t)
	a := startReplica(t, "engine-a", storeURL, agentDir, llmConn, envConn)
	b := startReplica(t, "engine-b", storeURL, agentDir, llmConn, envConn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	hung := newGate()
	llm.Generate = fake.Script(
		fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"ls"}`).Done(),
		fake.NewReply().Text("Done, and I read the note.").Done(),
		// The second session's request hangs until it is aborted.
		fake.NewReply().PartialOnly("Thinking").Hook(func(ctx context.Context) error {
			hung.open()
			<-ctx.Done()
			return ctx.Err()
		}),
		fake.NewReply().PartialOnly("Again").Hook(func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}),
	)
	create := func() string {
		resp, err := a.client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
			Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, Workspace: "/work/ws", ApprovalMode: alwaysAsk,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetSession().GetSessionId()
	}

	id := create()
	stream, err := a.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "list the files"})
	if err != nil {
		t.Fatal(err)
	}
	var ask *penguinv1.ApprovalRequest
	for ask == nil {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("run stream before the approval request: %v", err)
		}
		ask = resp.GetEvent().GetApprovalRequest()
	}

	attach, err := b.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, UntilIdle: true})
	if err != nil {
		t.Fatal(err)
	}
	attached := make(chan []*penguinv1.RunEvent, 1)
	first := make(chan struct{})
	go func() {
		var evs []*penguinv1.RunEvent
		for {
			resp, err := attach.Recv()
			if err != nil {
				attached <- evs
				return
			}
			if evs = append(evs, resp.GetEvent()); len(evs) == 1 {
				close(first)
			}
		}
	}()
	// The Attach is under way on the owner before the run goes on; a late
	// one would find the session idle and only replay its log.
	select {
	case <-first:
	case <-attached:
		t.Fatal("the Attach through engine-b ended at once")
	case <-ctx.Done():
		t.Fatal("the Attach through engine-b sent nothing")
	}
	if _, err := b.client.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "mind the note"}); err != nil {
		t.Fatalf("Steer through engine-b: %v", err)
	}
	if resp, err := b.client.RetryNow(ctx, &penguinv1.RetryNowRequest{SessionId: id}); err != nil || resp.GetRetried() {
		t.Fatalf("RetryNow through engine-b: %v %v, want retried=false (no reconnect wait)", resp, err)
	}
	second, err := b.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "again"})
	if err == nil {
		_, err = second.Recv()
	}
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "engine-a") {
		t.Fatalf("Run on engine-b while engine-a runs the session: %v, want FailedPrecondition naming engine-a", err)
	}
	if _, err := b.client.Approve(ctx, &penguinv1.ApproveRequest{SessionId: id, ToolCallId: ask.GetToolCall().GetToolCallId(), Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
		t.Fatalf("Approve through engine-b: %v", err)
	}
	evs, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("the run ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	// The steering reached the owner's task: the model got it.
	reqs := llm.Requests()
	if last := reqs[len(reqs)-1].GetNewMessages(); !strings.Contains(last[len(last)-1].GetText().GetText(), "mind the note") {
		t.Fatalf("the second request's input = %v, want the steering text last", last)
	}
	var sawOutput bool
	select {
	case evs := <-attached:
		for _, ev := range evs {
			sawOutput = sawOutput || ev.GetMessage().GetToolCallOutput() != nil
		}
		if len(evs) == 0 || evs[len(evs)-1].GetState().GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || !sawOutput {
			t.Fatalf("the Attach through engine-b got %d events (tool output %v), want the run to its idle end", len(evs), sawOutput)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Attach through engine-b did not end with the run")
	}
	for _, m := range []string{"Attach", "Steer", "RetryNow", "Approve"} {
		if n := b.forwarded(t, m, codes.OK); n != 1 {
			t.Errorf("engine-b forwarded %v %s calls, want 1", n, m)
		}
	}

	// The run is over: a late Steer is answered by the replica it reached.
	if _, err := b.client.Steer(ctx, &penguinv1.SteerRequest{SessionId: id, Text: "too late"}); code(err) != codes.FailedPrecondition {
		t.Fatalf("Steer after the run: %v, want FailedPrecondition", err)
	}

	// Abort through engine-b stops a run engine-a owns.
	id2 := create()
	stream, err = a.client.Run(ctx, &penguinv1.RunRequest{SessionId: id2, Prompt: "think"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hung.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if resp, err := b.client.Abort(ctx, &penguinv1.AbortRequest{SessionId: id2, Reason: "from b"}); err != nil || !resp.GetAborted() {
		t.Fatalf("Abort through engine-b: %v %v", resp, err)
	}
	evs, err = enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	if st := end(t, evs); st.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED || st.GetMessage() != "from b" {
		t.Fatalf("the aborted run ended %v (%q)", st.GetStatus(), st.GetMessage())
	}

	// An owner that cannot be reached: the caller learns why and when the
	// session frees up.
	stream, err = a.client.Run(ctx, &penguinv1.RunRequest{SessionId: id2, Prompt: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	a.srv.Stop()
	_, err = b.client.Steer(ctx, &penguinv1.SteerRequest{SessionId: id2, Text: "hello?"})
	if code(err) != codes.Unavailable || !strings.Contains(err.Error(), a.addr) || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("Steer for a run whose owner is unreachable: %v, want Unavailable naming %s and its lease", err, a.addr)
	}
}
