package envtool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/envtool"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func setup(t *testing.T, env *fake.Env) (penguinv1.EnvironmentServiceClient, string) {
	t.Helper()
	conn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterEnvironmentServiceServer(s, env) })
	c := penguinv1.NewEnvironmentServiceClient(conn)
	resp, err := c.CreateEnvironment(context.Background(), &penguinv1.CreateEnvironmentRequest{Workspace: "w"})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp.GetEnvironmentId()
}

func run(t *testing.T, ex *envtool.Executor) ([]*penguinv1.OmniMessage, *penguinv1.OmniMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var fwd []*penguinv1.OmniMessage
	out := ex.Execute(ctx, &penguinv1.ToolCall{Name: "t", Arguments: "{}", ToolCallId: "c1"}, func(m *penguinv1.OmniMessage) { fwd = append(fwd, m) })
	c := omni.NewChecker()
	for _, m := range append(fwd, out) {
		if err := c.Check(m); err != nil {
			t.Fatalf("the executor broke the streaming discipline: %v", err)
		}
	}
	return fwd, out
}

func TestBrokenStreamIsClosedAndReported(t *testing.T) {
	env := &fake.Env{Execute: func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		id := req.GetToolCall().GetToolCallId()
		_ = s.Send(&penguinv1.ExecuteToolResponse{Message: omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, id, "")})
		_ = s.Send(&penguinv1.ExecuteToolResponse{Message: omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, id, "half")})
		return status.Error(codes.Internal, "boom")
	}}
	c, id := setup(t, env)
	_, out := run(t, &envtool.Executor{Target: func() (envtool.Client, string) { return c, id }})
	o := out.GetToolCallOutput()
	if o.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || o.GetOutput()[:4] != "half" {
		t.Fatalf("output = %v", o)
	}
}

func TestGoneEnvironmentIsRecreatedOnce(t *testing.T) {
	env := &fake.Env{}
	c, id := setup(t, env)
	env.Forget(id)
	current := id
	recreated := 0
	ex := &envtool.Executor{
		Target: func() (envtool.Client, string) { return c, current },
		Recreate: func(ctx context.Context, _ envtool.Reason, _ string) error {
			recreated++
			resp, err := c.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "w"})
			current = resp.GetEnvironmentId()
			return err
		},
	}
	_, out := run(t, ex)
	if recreated != 1 || out.GetToolCallOutput().GetOutput() != "t: {}" {
		t.Fatalf("recreated %d times, output %v", recreated, out)
	}
}

func TestUnreachableEnvironmentFailsTheCall(t *testing.T) {
	env := &fake.Env{}
	c, _ := setup(t, env)
	_, out := run(t, &envtool.Executor{Target: func() (envtool.Client, string) { return c, "nope" }})
	if out.GetToolCallOutput().GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED {
		t.Fatalf("output = %v", out)
	}
}

// TestLostReplicaFailsTheCallThenRecreates checks the environment whose
// replica went away in the middle of a call: the call ends with a failed
// output that keeps what was streamed and says what happened, and the
// next call first gets a fresh environment (once), then runs there.
func TestLostReplicaFailsTheCallThenRecreates(t *testing.T) {
	gone := &fake.Env{Execute: func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		id := req.GetToolCall().GetToolCallId()
		_ = s.Send(&penguinv1.ExecuteToolResponse{Message: omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, id, "")})
		_ = s.Send(&penguinv1.ExecuteToolResponse{Message: omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, id, "started")})
		return status.Error(codes.Unavailable, "connection reset by peer")
	}}
	oldClient, oldID := setup(t, gone)
	fresh := &fake.Env{}
	newClient, newID := setup(t, fresh)

	client, id := oldClient, oldID
	var reasons []envtool.Reason
	ex := &envtool.Executor{
		Target: func() (envtool.Client, string) { return client, id },
		Recreate: func(_ context.Context, why envtool.Reason, _ string) error {
			reasons = append(reasons, why)
			client, id = newClient, newID
			return nil
		},
	}
	fwd, out := run(t, ex)
	o := out.GetToolCallOutput()
	if o.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.HasPrefix(o.GetOutput(), "started") ||
		!strings.Contains(o.GetOutput(), "cannot be reached") || !strings.Contains(o.GetOutput(), "fresh environment") {
		t.Fatalf("output of the interrupted call = %v", o)
	}
	if len(fwd) == 0 || len(reasons) != 0 {
		t.Fatalf("forwarded %d frames, recreated %v; want the partials and no recreation yet", len(fwd), reasons)
	}
	_, out = run(t, ex)
	if len(reasons) != 1 || reasons[0] != envtool.Unreachable || out.GetToolCallOutput().GetOutput() != "t: {}" {
		t.Fatalf("second call: recreated %v, output %v", reasons, out)
	}
	_, _ = run(t, ex)
	if len(reasons) != 1 {
		t.Fatalf("recreated again on a healthy environment: %v", reasons)
	}
}

// TestUnreachableWithoutRecreateSaysSo checks a lost replica when the
// executor cannot make a new environment: the call fails and says the
// environment's replica cannot be reached.
func TestUnreachableWithoutRecreateSaysSo(t *testing.T) {
	env := &fake.Env{Execute: func(*penguinv1.ExecuteToolRequest, grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		return status.Error(codes.Unavailable, "no route to host")
	}}
	c, id := setup(t, env)
	_, out := run(t, &envtool.Executor{Target: func() (envtool.Client, string) { return c, id }})
	o := out.GetToolCallOutput()
	if o.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(o.GetOutput(), "cannot be reached (no route to host)") || strings.Contains(o.GetOutput(), "fresh") {
		t.Fatalf("output = %v", o)
	}
}
