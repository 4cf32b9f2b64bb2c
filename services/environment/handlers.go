package environment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/termtext"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/framing"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func notFound(id string) error {
	return status.Errorf(codes.NotFound, "no environment %q on this replica (it was disposed, or never created here)", id)
}

// toStatus maps an internal error to a status at the RPC boundary.
func toStatus(err error) error {
	switch {
	case errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errInvalid.Error()+": "))
	case errors.Is(err, sandbox.ErrUnsupported), errors.Is(err, errUnconfinedRefused):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Internal, "the environment could not be created; see the service log")
	}
}

// CreateEnvironment implements penguinv1.EnvironmentServiceServer.
func (s *Service) CreateEnvironment(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, error) {
	if s.closing.Load() {
		return nil, errShuttingDown
	}
	e, err := s.create(ctx, req)
	if err != nil {
		if !errors.Is(err, errInvalid) && !errors.Is(err, sandbox.ErrUnsupported) {
			s.log.Error("creating an environment failed", "workspace", req.GetWorkspace(), "error", err)
		}
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.envs[e.id] = e
	s.mu.Unlock()
	s.metrics.created.Inc()
	p := e.commands.policy
	s.log.Info("environment created", "environment", e.id, "label", e.label, "workspace", e.workspace, "tools", len(e.order), "sandbox", p.Mode, "network", p.Network)
	return &penguinv1.CreateEnvironmentResponse{
		EnvironmentId: e.id,
		Address:       s.opts.Advertise,
		Tools:         e.toolInfos(),
		Mcp:           e.mcpEnd,
		Workspace:     e.workspace,
		SandboxMode:   modeToProto[p.Mode],
		Network:       networkToProto[p.Network],
	}, nil
}

// ListTools implements penguinv1.EnvironmentServiceServer.
func (s *Service) ListTools(ctx context.Context, req *penguinv1.ListToolsRequest) (*penguinv1.ListToolsResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	return &penguinv1.ListToolsResponse{Tools: e.toolInfos()}, nil
}

// GetToolPermission implements penguinv1.EnvironmentServiceServer.
func (s *Service) GetToolPermission(ctx context.Context, req *penguinv1.GetToolPermissionRequest) (*penguinv1.GetToolPermissionResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	resp := &penguinv1.GetToolPermissionResponse{}
	if spec, ok := e.tools[req.GetName()]; ok {
		resp.Permission = spec.Tool.Permission()
	}
	return resp, nil
}

// ExecuteTool implements penguinv1.EnvironmentServiceServer. Everything
// that goes wrong with the call itself (an unknown environment or tool,
// bad arguments, a failing tool) comes back as a failed tool_call_output.
func (s *Service) ExecuteTool(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	call := req.GetToolCall()
	if call == nil || call.GetToolCallId() == "" {
		return status.Error(codes.InvalidArgument, "tool_call with a tool_call_id is required: the output must name the call it answers")
	}
	ctx := stream.Context()
	// The frames go to the caller as they are, not copied, when it is in
	// this process: nothing here changes or reads a frame once it is
	// sent (framing makes each anew), and a read_file's four frames were
	// four proto.Clones of the in-process channel.
	grpcserver.HandOver(ctx)
	// The call's complete output says how it ended, for the metrics.
	ended := penguinv1.StopReason_STOP_REASON_UNSPECIFIED
	var e *Environment
	cutByShutdown := false
	send := func(m *penguinv1.OmniMessage) error {
		if s.closing.Load() && e != nil && e.ctx.Err() != nil && ctx.Err() == nil {
			// The replica is shutting down and takes the call's processes
			// with it: what the call would say about that is not sent, and
			// the caller hears Unavailable instead (below), as if the
			// replica had gone, so that its next call runs elsewhere.
			cutByShutdown = true
			return nil
		}
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 && o.GetToolCallId() == call.GetToolCallId() {
			ended = o.GetStopReason()
		}
		return stream.Send(&penguinv1.ExecuteToolResponse{Message: m})
	}
	e, ok := s.get(req.GetEnvironmentId())
	if !ok || !e.enter() {
		if s.closing.Load() {
			return errShuttingDown
		}
		framing.Reply(ctx, call.GetToolCallId(),
			fmt.Sprintf("Unknown environment %q: it was disposed, or never created on this replica. The tool did not run.", req.GetEnvironmentId()),
			penguinv1.StopReason_STOP_REASON_FAILED, framing.Options{}, send)
		return nil
	}
	defer e.leave()
	if spec, known := e.tools[call.GetName()]; known && !spec.ReadsOnly {
		// The call may write to the workspace (see writeTracker).
		defer s.writes.begin()()
	}
	// Disposing the environment aborts its running calls.
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	started := time.Now()
	e.execute(callCtx, call, send)
	_, known := e.tools[call.GetName()]
	if cutByShutdown {
		ended = penguinv1.StopReason_STOP_REASON_FAILED
	}
	s.metrics.observe(call.GetName(), known, ended, time.Since(started))
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if cutByShutdown {
		return errShuttingDown
	}
	return nil
}

// errShuttingDown answers the calls that a replica being stopped cannot
// serve: new environments, and tool calls whose environment it disposed
// (or is disposing). Unavailable tells the engine to go to another replica.
var errShuttingDown = status.Error(codes.Unavailable, "the environment replica is shutting down; its environments and their processes are gone")

// ListProcesses implements penguinv1.EnvironmentServiceServer.
func (s *Service) ListProcesses(ctx context.Context, req *penguinv1.ListProcessesRequest) (*penguinv1.ListProcessesResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	resp := &penguinv1.ListProcessesResponse{}
	for _, p := range e.commands.list() {
		state := penguinv1.ProcessState_PROCESS_STATE_RUNNING
		switch p.State {
		case command.Exited:
			state = penguinv1.ProcessState_PROCESS_STATE_EXITED
		case command.Killed:
			state = penguinv1.ProcessState_PROCESS_STATE_KILLED
		}
		resp.Processes = append(resp.Processes, &penguinv1.ProcessInfo{
			ProcessId: p.ID, Command: e.vault.String(p.Command), State: state, ExitCode: int32(p.ExitCode),
			Pid: int32(p.Pid), StartedAtMs: p.Started.UnixMilli(), Background: p.Background,
			OutputTail: outputTail(e.vault, p.Tail, p.TailCut),
		})
	}
	return resp, nil
}

// WatchEnvironment implements penguinv1.EnvironmentServiceServer. The
// stream ends when the environment is disposed or the call is cancelled.
func (s *Service) WatchEnvironment(req *penguinv1.WatchEnvironmentRequest, stream grpc.ServerStreamingServer[penguinv1.WatchEnvironmentResponse]) error {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return notFound(req.GetEnvironmentId())
	}
	w := e.notices.subscribe()
	defer e.notices.unsubscribe(w)
	// Headers go out now, so a caller knows the watch is in place before
	// the first notice.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		batch, open := e.notices.take(w)
		for _, n := range batch {
			if err := stream.Send(n); err != nil {
				return err
			}
		}
		if !open {
			if e.notices.isClosed() {
				return nil // disposed
			}
			return status.Error(codes.ResourceExhausted, "this watcher fell too far behind and was dropped; watch again")
		}
		select {
		case <-w.wake:
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}

// DisposeEnvironment implements penguinv1.EnvironmentServiceServer. It is
// idempotent: an unknown id answers disposed=false.
func (s *Service) DisposeEnvironment(ctx context.Context, req *penguinv1.DisposeEnvironmentRequest) (*penguinv1.DisposeEnvironmentResponse, error) {
	s.mu.Lock()
	e, ok := s.envs[req.GetEnvironmentId()]
	delete(s.envs, req.GetEnvironmentId())
	s.mu.Unlock()
	if !ok {
		return &penguinv1.DisposeEnvironmentResponse{Disposed: false}, nil
	}
	e.dispose()
	s.log.Info("environment disposed", "environment", e.id)
	return &penguinv1.DisposeEnvironmentResponse{Disposed: true}, nil
}

// outputTail is what ListProcesses shows of a command's last output: the
// whole lines of it (a line cut by the tail's bound is left out), each as
// a terminal leaves it (what follows its last carriage return: a progress
// bar's last state), escape sequences and control characters removed,
// valid UTF-8 as proto strings must be, and no vault value in it: values
// are replaced before the cut and again once the lines are clean.
func outputTail(v *redact.Vault, tail []byte, cut bool) string {
	text := v.String(string(tail))
	if cut {
		// The tail may start inside a value, whose end no matcher can
		// recognise: as much as a value's longest form spans goes.
		text = text[min(v.MaxHeld(), len(text)):]
	}
	if len(text) > command.TailBytes {
		text = text[len(text)-command.TailBytes:]
		cut = true
	}
	if cut {
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	lines := strings.Split(strings.ToValidUTF8(text, ""), "\n")
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = termtext.Clean(l)
	}
	// Again once clean: escape sequences may have split a value.
	return v.String(strings.TrimRight(strings.Join(lines, "\n"), "\n"))
}
