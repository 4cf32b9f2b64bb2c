package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// TestTurnsAreTracedAndCounted runs a task of two turns, the first of
// which reconnects once and runs a tool: each turn is the root span of a
// trace of its own, described by its attributes, and the engine's metrics
// count the session, the run, the turns, the retry and the approval.
func TestTurnsAreTracedAndCounted(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *session.Options) { o.TracerProvider, o.Registerer = tp, reg })
	e.llm.Generate = fake.Script(
		fake.NewReply().Fail(penguinv1.StopReason_STOP_REASON_TIMEOUT, "connection reset"),
		fake.NewReply().ToolCall("c1", "exec_command", `{"cmd":"ls"}`).Done(),
		fake.NewReply().Text("done").Done(),
	)
	id := e.create(allowAll)
	if st := end(t, e.run(id, "go")); st.GetStatus() != completedS {
		t.Fatalf("run ended %v: %s", st.GetStatus(), st.GetMessage())
	}

	var turns []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "engine.turn" {
			turns = append(turns, s)
		}
	}
	if len(turns) != 2 {
		t.Fatalf("%d turn spans, want 2", len(turns))
	}
	if turns[0].SpanContext().TraceID() == turns[1].SpanContext().TraceID() {
		t.Fatal("both turns are in one trace; each turn must be its own")
	}
	want := []string{
		"penguin.session_id=" + id + " penguin.turn=1 penguin.turn.status=completed penguin.turn.attempts=2 penguin.turn.tool_calls=1",
		"penguin.session_id=" + id + " penguin.turn=2 penguin.turn.status=completed penguin.turn.attempts=1 penguin.turn.tool_calls=0",
	}
	for i, s := range turns {
		if s.Parent().IsValid() {
			t.Errorf("turn %d has a parent span; it must be its trace's root", i+1)
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		for _, w := range strings.Fields(want[i]) {
			k, v, _ := strings.Cut(w, "=")
			if attrs[k] != v {
				t.Errorf("turn %d: %s = %q, want %q (all: %v)", i+1, k, attrs[k], v, attrs)
			}
		}
	}

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"penguin_engine_sessions_created_total", map[string]string{"kind": "new"}, 1},
		{"penguin_engine_runs_total", map[string]string{"kind": "run", "status": "completed"}, 1},
		{"penguin_engine_turns_total", map[string]string{"status": "completed"}, 2},
		{"penguin_engine_retries_total", map[string]string{"status": "timeout"}, 1},
		{"penguin_engine_approvals_total", map[string]string{"decision": "allow"}, 1},
		{"penguin_engine_runs_active", nil, 0},
	} {
		// The run's own counters are updated as it winds down, just after
		// the idle state reaches the client: poll briefly.
		var got float64
		var ok bool
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = eventually.Wait(ctx, func() bool {
			got, ok = metrictest.Value(t, reg, c.name, c.labels)
			return ok && got == c.want
		})
		cancel()
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}

// TestLostLeaseStopsTheTask checks a replica that finds, when it renews
// its run lease, that another replica has taken the session over: it
// stops its task rather than write the session's log alongside the new
// owner.
func TestLostLeaseStopsTheTask(t *testing.T) {
	e := newEnv(t, func(o *session.Options) { o.EngineID, o.LeaseTTL = "engine-a", time.Second })
	hung := newGate()
	e.llm.Generate = fake.Script(fake.NewReply().PartialOnly("Thinking").Hook(func(ctx context.Context) error {
		hung.open()
		<-ctx.Done()
		return ctx.Err()
	}))
	id := e.create(allowAll)
	ctx := e.ctx()
	stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "think"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hung.wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Another replica takes the lease, as if engine-a had been cut off
	// for longer than the lease lasts.
	if err := e.store.ReleaseLease(ctx, id, "engine-a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.store.AcquireLease(ctx, id, "engine-x", "10.0.0.9:7423", time.Minute); err != nil || !ok {
		t.Fatalf("take the lease: %v %v", ok, err)
	}
	evs, err := enginetest.Collect(stream)
	if err != nil {
		t.Fatal(err)
	}
	st := end(t, evs)
	if st.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED || !strings.Contains(st.GetMessage(), "engine-x took the session over") {
		t.Fatalf("the task ended %v (%q), want aborted because engine-x took over", st.GetStatus(), st.GetMessage())
	}
	// The task's end did not release the new owner's lease.
	if owner, _, _, err := e.store.LeaseHolder(ctx, id); err != nil || owner != "engine-x" {
		t.Fatalf("lease holder after the stop = %q, %v; want engine-x", owner, err)
	}
}

// TestUnreachableEnvironmentIsReplaced binds a session to an environment
// replica that cannot be reached (its host is gone): the next run waits a
// little for it, then gives the session a fresh environment from the
// environment service and runs there. While it waits it has only read the
// session and holds no lease (no other replica is kept from the session
// by a run that has written nothing: had one started a task meanwhile,
// this run's first commit would be refused); the commit that binds the
// fresh environment takes the lease, renewed from then on.
func TestUnreachableEnvironmentIsReplaced(t *testing.T) {
	// A replica that is gone: its listener is closed before anyone dials.
	lis := bufconn.Listen(1 << 16)
	lis.Close()
	dead, err := grpc.NewClient("passthrough:///gone",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(o *session.Options) {
		o.EngineID, o.LeaseTTL, o.Registerer = "engine-a", time.Second, reg
		o.DialEnvironment = func(addr string) (penguinv1.EnvironmentServiceClient, error) {
			if addr != "10.0.0.9:7422" {
				return nil, fmt.Errorf("unexpected environment address %q", addr)
			}
			return penguinv1.NewEnvironmentServiceClient(dead), nil
		}
	})
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("first").Done(),
		fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
		fake.NewReply().Text("second").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "first"))
	ctx := e.ctx()
	row, err := e.store.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	row.EnvironmentAddr = "10.0.0.9:7422"
	if err := e.store.UpdateSession(ctx, row); err != nil {
		t.Fatal(err)
	}

	done := make(chan []*penguinv1.RunEvent, 1)
	go func() {
		stream, err := e.client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "second"})
		if err != nil {
			done <- nil
			return
		}
		evs, _ := enginetest.Collect(stream)
		done <- evs
	}()
	// Well into the wait for the gone replica (unreachableWait), the run
	// holds no lease.
	timer := time.NewTimer(1500 * time.Millisecond)
	<-timer.C
	if owner, _, _, err := e.store.LeaseHolder(ctx, id); !errors.Is(err, store.ErrNotFound) || len(e.envSvc.Created()) != 1 {
		t.Fatalf("while the run waited, the lease was %q's (%v), %d environments created; want no lease and no fresh environment yet", owner, err, len(e.envSvc.Created()))
	}
	evs := <-done
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("the run ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	if n := len(e.envSvc.Created()); n != 2 {
		t.Fatalf("%d environments created, want 2 (the fresh one)", n)
	}
	row, err = e.store.GetSession(ctx, id)
	if err != nil || row.EnvironmentAddr != "" || row.EnvironmentID != "env-2" {
		t.Fatalf("the session is bound to %q at %q (%v), want env-2 on the environment service", row.EnvironmentID, row.EnvironmentAddr, err)
	}
	if got, _ := metrictest.Value(t, reg, "penguin_engine_environment_rebinds_total", map[string]string{"reason": "unreachable"}); got != 1 {
		t.Fatalf("environment_rebinds_total{reason=unreachable} = %v, want 1", got)
	}
}
