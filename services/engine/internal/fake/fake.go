// Package fake holds stand-ins for the llm and environment services, for the
// engine's tests: real gRPC servers over an in-memory connection whose
// behaviour is set by function fields, plus a builder of model replies that
// keep the streaming discipline.
package fake

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// Dial serves register's services on an in-memory listener and returns a
// client connection to it. Both are closed when the test ends.
func Dial(t testing.TB, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial bufconn: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return conn
}

// Listen serves register's services on a loopback TCP port and returns its
// address; the server stops when the test ends.
func Listen(t testing.TB, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// LLM is a model gateway whose StreamGenerate is Generate. It records every
// request.
type LLM struct {
	penguinv1.UnimplementedLLMServiceServer

	// Generate answers one request; nil answers "unimplemented".
	Generate func(req *penguinv1.StreamGenerateRequest, stream grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error
	// Models is what ListModels returns.
	Models []*penguinv1.ModelInfo

	mu       sync.Mutex
	requests []*penguinv1.StreamGenerateRequest
}

// StreamGenerate records the request and calls Generate.
func (l *LLM) StreamGenerate(req *penguinv1.StreamGenerateRequest, stream grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	l.mu.Lock()
	l.requests = append(l.requests, req)
	gen := l.Generate
	l.mu.Unlock()
	if gen == nil {
		return status.Error(codes.Unimplemented, "fake llm: no Generate")
	}
	return gen(req, stream)
}

// ListModels returns Models.
func (l *LLM) ListModels(context.Context, *penguinv1.ListModelsRequest) (*penguinv1.ListModelsResponse, error) {
	return &penguinv1.ListModelsResponse{Models: l.Models}, nil
}

// Requests returns the requests received so far.
func (l *LLM) Requests() []*penguinv1.StreamGenerateRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*penguinv1.StreamGenerateRequest(nil), l.requests...)
}

// Script answers requests with replies in order; a request beyond the last
// reply fails the stream.
func Script(replies ...*Reply) func(*penguinv1.StreamGenerateRequest, grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	var mu sync.Mutex
	next := 0
	return func(req *penguinv1.StreamGenerateRequest, stream grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		mu.Lock()
		i := next
		next++
		mu.Unlock()
		if i >= len(replies) {
			return status.Errorf(codes.OutOfRange, "fake llm: no reply scripted for request %d", i+1)
		}
		return replies[i].Send(stream)
	}
}

// Reply is one scripted model answer: frames sent in order, ending with an
// outcome.
type Reply struct {
	frames []*penguinv1.StreamGenerateResponse
	// Before, when set, runs before the first frame is sent (to block, or
	// to observe the request's context).
	Before func(ctx context.Context) error
	// After, when set, runs after the frame with that index is sent.
	After map[int]func(ctx context.Context) error
}

// NewReply starts a reply.
func NewReply() *Reply { return &Reply{} }

func (r *Reply) msg(m *penguinv1.OmniMessage) *Reply {
	r.frames = append(r.frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
	return r
}

// Text streams an assistant text as partials in chunks, then the complete
// message.
func (r *Reply) Text(text string) *Reply {
	r.msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, ""))
	for _, c := range chunks(text) {
		r.msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, c))
	}
	r.msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, ""))
	return r.msg(omni.AssistantText(text))
}

// PartialOnly streams the start and deltas of a text that never completes.
func (r *Reply) PartialOnly(text string) *Reply {
	r.msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, ""))
	for _, c := range chunks(text) {
		r.msg(omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, c))
	}
	return r
}

// ToolCall streams a tool call as partials, then the complete call.
func (r *Reply) ToolCall(id, name, args string) *Reply {
	r.msg(omni.PartialToolCall(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, id, name, ""))
	for _, c := range chunks(args) {
		r.msg(omni.PartialToolCall(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, id, name, c))
	}
	r.msg(omni.PartialToolCall(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, id, name, ""))
	return r.msg(omni.ToolCall(id, name, args))
}

// Usage sends a token_usage with the given request total.
func (r *Reply) Usage(total int64) *Reply {
	return r.msg(omni.TokenUsage(&penguinv1.TokenCounts{}, &penguinv1.TokenCounts{Output: 1, Total: total}))
}

// Outcome ends the reply.
func (r *Reply) Outcome(o *penguinv1.LLMOutcome) *Reply {
	r.frames = append(r.frames, &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: o}})
	return r
}

// Done ends the reply with usage and a completed outcome.
func (r *Reply) Done() *Reply {
	return r.Usage(100).Outcome(&penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_COMPLETED})
}

// Fail ends the reply with a failed outcome of the given status.
func (r *Reply) Fail(st penguinv1.StopReason, msg string) *Reply {
	return r.Outcome(&penguinv1.LLMOutcome{Status: st, Message: msg})
}

// Hook runs f after the frame sent last so far.
func (r *Reply) Hook(f func(ctx context.Context) error) *Reply {
	if r.After == nil {
		r.After = map[int]func(context.Context) error{}
	}
	r.After[len(r.frames)-1] = f
	return r
}

// Send writes the reply to a stream.
func (r *Reply) Send(stream grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	ctx := stream.Context()
	if r.Before != nil {
		if err := r.Before(ctx); err != nil {
			return err
		}
	}
	for i, f := range r.frames {
		if err := stream.Send(f); err != nil {
			return err
		}
		if h := r.After[i]; h != nil {
			if err := h(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func chunks(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 4 {
		out = append(out, s[:4])
		s = s[4:]
	}
	return append(out, s)
}

// Env is an environment service whose tool runs are Execute. Tools lists the
// tools with their permissions.
type Env struct {
	penguinv1.UnimplementedEnvironmentServiceServer

	// Tools is what CreateEnvironment and ListTools report.
	Tools []*penguinv1.ToolInfo
	// Execute runs one tool call; nil echoes the arguments.
	Execute func(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error
	// Watch, when set, serves WatchEnvironment.
	Watch func(req *penguinv1.WatchEnvironmentRequest, stream grpc.ServerStreamingServer[penguinv1.WatchEnvironmentResponse]) error
	// Processes, when set, is what ListProcesses reports.
	Processes func() []*penguinv1.ProcessInfo
	// Describe, when set, serves DescribeWorkspace; unset, the call is
	// unimplemented, as on an environment service that predates it.
	Describe func(req *penguinv1.DescribeWorkspaceRequest) (*penguinv1.DescribeWorkspaceResponse, error)
	// Dispose, when set, is called with the id of every environment
	// DisposeEnvironment disposes of, before it is forgotten.
	Dispose func(ctx context.Context, id string)
	// BeforeListTools, when set, runs at the start of every ListTools,
	// which an engine calls when it prepares a task: a test holds a task
	// there, before its loop starts.
	BeforeListTools func(ctx context.Context)

	mu       sync.Mutex
	envs     map[string]bool
	created  []*penguinv1.CreateEnvironmentRequest
	disposed []string
	n        int
}

// CreateEnvironment records the request and returns a new id.
func (e *Env) CreateEnvironment(_ context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.envs == nil {
		e.envs = map[string]bool{}
	}
	e.n++
	id := fmt.Sprintf("env-%d", e.n)
	e.envs[id] = true
	e.created = append(e.created, req)
	ws := req.GetWorkspace()
	if !strings.HasPrefix(ws, "/") {
		ws = "/fake/" + ws
	}
	return &penguinv1.CreateEnvironmentResponse{EnvironmentId: id, Tools: e.Tools, Workspace: ws}, nil
}

// DescribeWorkspace calls Describe.
func (e *Env) DescribeWorkspace(ctx context.Context, req *penguinv1.DescribeWorkspaceRequest) (*penguinv1.DescribeWorkspaceResponse, error) {
	if e.Describe == nil {
		return e.UnimplementedEnvironmentServiceServer.DescribeWorkspace(ctx, req)
	}
	return e.Describe(req)
}

// GetEnvironmentDefaults answers as an environment service whose host enforces
// workspace-write.
func (e *Env) GetEnvironmentDefaults(context.Context, *penguinv1.GetEnvironmentDefaultsRequest) (*penguinv1.GetEnvironmentDefaultsResponse, error) {
	return &penguinv1.GetEnvironmentDefaultsResponse{
		SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE, Network: penguinv1.NetworkAccess_NETWORK_ACCESS_NONE,
	}, nil
}

// Forget drops an environment, as a restarted environment service would.
func (e *Env) Forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.envs, id)
}

// Created returns the CreateEnvironment requests received.
func (e *Env) Created() []*penguinv1.CreateEnvironmentRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*penguinv1.CreateEnvironmentRequest(nil), e.created...)
}

// Disposed returns the ids DisposeEnvironment was called with.
func (e *Env) Disposed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.disposed...)
}

func (e *Env) known(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.envs[id] {
		return status.Errorf(codes.NotFound, "fake env: unknown environment %q", id)
	}
	return nil
}

// ListTools returns Tools.
func (e *Env) ListTools(ctx context.Context, req *penguinv1.ListToolsRequest) (*penguinv1.ListToolsResponse, error) {
	if e.BeforeListTools != nil {
		e.BeforeListTools(ctx)
	}
	if err := e.known(req.GetEnvironmentId()); err != nil {
		return nil, err
	}
	return &penguinv1.ListToolsResponse{Tools: e.Tools}, nil
}

// GetToolPermission looks the tool up in Tools.
func (e *Env) GetToolPermission(_ context.Context, req *penguinv1.GetToolPermissionRequest) (*penguinv1.GetToolPermissionResponse, error) {
	for _, t := range e.Tools {
		if t.GetDefinition().GetName() == req.GetName() {
			return &penguinv1.GetToolPermissionResponse{Permission: t.GetPermission()}, nil
		}
	}
	return &penguinv1.GetToolPermissionResponse{}, nil
}

// ExecuteTool calls Execute, or echoes the arguments.
func (e *Env) ExecuteTool(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	if err := e.known(req.GetEnvironmentId()); err != nil {
		return err
	}
	if e.Execute != nil {
		return e.Execute(req, stream)
	}
	return Echo(req, stream)
}

// WatchEnvironment calls Watch, or waits for the call to end.
func (e *Env) WatchEnvironment(req *penguinv1.WatchEnvironmentRequest, stream grpc.ServerStreamingServer[penguinv1.WatchEnvironmentResponse]) error {
	if e.Watch != nil {
		return e.Watch(req, stream)
	}
	<-stream.Context().Done()
	return nil
}

// DisposeEnvironment forgets the environment.
func (e *Env) DisposeEnvironment(ctx context.Context, req *penguinv1.DisposeEnvironmentRequest) (*penguinv1.DisposeEnvironmentResponse, error) {
	if e.Dispose != nil {
		e.Dispose(ctx, req.GetEnvironmentId())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ok := e.envs[req.GetEnvironmentId()]
	delete(e.envs, req.GetEnvironmentId())
	e.disposed = append(e.disposed, req.GetEnvironmentId())
	return &penguinv1.DisposeEnvironmentResponse{Disposed: ok}, nil
}

// Echo answers a tool call with "<name>: <arguments>" as one partial and
// the complete output.
func Echo(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	tc := req.GetToolCall()
	return Output(stream, tc.GetToolCallId(), tc.GetName()+": "+tc.GetArguments(), penguinv1.StopReason_STOP_REASON_UNSPECIFIED)
}

// Output sends a tool's output as start, one delta, stop and the complete
// message.
func Output(stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse], id, out string, st penguinv1.StopReason) error {
	msgs := []*penguinv1.OmniMessage{
		omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, id, ""),
		omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, id, out),
		omni.PartialToolCallOutput(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, id, ""),
		omni.ToolCallOutput(id, out, st),
	}
	for _, m := range msgs {
		if err := stream.Send(&penguinv1.ExecuteToolResponse{Message: m}); err != nil {
			return err
		}
	}
	return nil
}

// Tool returns a ToolInfo for a fake tool.
func Tool(name string, perm penguinv1.Permission) *penguinv1.ToolInfo {
	return &penguinv1.ToolInfo{
		Definition: &penguinv1.ToolDefinition{Name: name, Description: "fake " + name, Parameters: `{"type":"object"}`},
		Permission: perm,
	}
}

// ListProcesses calls Processes, or lists none.
func (e *Env) ListProcesses(_ context.Context, req *penguinv1.ListProcessesRequest) (*penguinv1.ListProcessesResponse, error) {
	if e.Processes != nil {
		return &penguinv1.ListProcessesResponse{Processes: e.Processes()}, nil
	}
	return &penguinv1.ListProcessesResponse{}, nil
}
