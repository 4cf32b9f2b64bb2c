// Package engine serves penguin.v1.EngineService: thin gRPC handlers over
// the session runtime (package session), which owns sessions, their logs,
// their live event streams and the agent loop. Errors become gRPC status
// codes here and nowhere else.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/attach"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sessions is what the handlers need of the session runtime.
type Sessions interface {
	Create(ctx context.Context, spec session.CreateSpec) (*penguinv1.Session, error)
	// ReadForNew reads what creating a session of spec asks of the
	// store, with userID's memberships, in one statement; Create takes it
	// from spec.Read.
	ReadForNew(ctx context.Context, spec session.CreateSpec, userID string) (*store.NewSessionRead, error)
	Get(ctx context.Context, id string) (*penguinv1.Session, error)
	List(ctx context.Context, pageSize int, token string, projects ...string) ([]*penguinv1.Session, string, error)
	Delete(ctx context.Context, id string) error
	Fork(ctx context.Context, id string, upTo int64) (*penguinv1.Session, error)
	Run(ctx context.Context, id string, spec session.RunSpec, send func(*penguinv1.RunEvent) error) error
	Attach(ctx context.Context, id string, after int64, untilIdle bool, send func(*penguinv1.RunEvent) error) error
	Approve(ctx context.Context, id, toolCallID string, origin []string, d penguinv1.Decision) error
	Steer(ctx context.Context, id, text string, images []string) error
	Abort(ctx context.Context, id, reason string) (bool, error)
	RetryNow(ctx context.Context, id string) (bool, error)
	Compact(ctx context.Context, id string, mode penguinv1.CompactionMode) (penguinv1.StopReason, string, error)
	History(ctx context.Context, id string, after int64, limit int) ([]*penguinv1.RunEvent, bool, error)
	Export(ctx context.Context, id string, index int, send func(line string, index int) error) error
	Defaults(ctx context.Context) (*penguinv1.GetSessionDefaultsResponse, error)
	Update(ctx context.Context, id string, u session.Update) (*penguinv1.Session, error)
	Processes(ctx context.Context, id string) ([]*penguinv1.ProcessInfo, error)
	KillProcess(ctx context.Context, id, processID string) (string, error)
	WorkspaceChanges(ctx context.Context, id string) ([]*penguinv1.TurnChange, error)
	WorkspaceDiff(ctx context.Context, id string, seq int64, pageSize int, token string) (*penguinv1.TurnChange, string, error)
	UndoChange(ctx context.Context, id string, seq int64, redo, force bool) (*session.UndoResult, error)
	WorkspaceFiles(ctx context.Context, id, dir string) (*penguinv1.ListWorkspaceFilesResponse, error)
	WorkspaceFile(ctx context.Context, id, name string) (*penguinv1.ReadWorkspaceFileResponse, error)
}

// Server implements penguinv1.EngineServiceServer.
type Server struct {
	penguinv1.UnimplementedEngineServiceServer
	sessions Sessions
	log      *slog.Logger
	// fwd, when set, passes calls for runs other replicas own to them.
	fwd *Forwarding
	// guard decides who may touch which session. Without one (a test
	// serving a bare session runtime) every call is allowed; Setup always
	// sets it.
	guard *access.Guard
}

// New returns a Server over sessions; log receives internal errors, which
// clients see only as a generic message (nil discards them).
func New(sessions Sessions, log *slog.Logger, opts ...Option) *Server {
	s := &Server{sessions: sessions, log: logger.OrDiscard(log)}
	for _, o := range opts {
		o(s)
	}
	return s
}

func need(id string) error {
	if id == "" {
		return status.Error(codes.InvalidArgument, "session_id is required")
	}
	return nil
}

// allow checks that the call names a session and that its caller may act
// on it at lvl: a session of a project the caller may not read is
// NotFound, exactly as one that does not exist.
func (s *Server) allow(ctx context.Context, id string, lvl access.Level) error {
	_, err := s.allowed(ctx, id, lvl)
	return err
}

// allowed is allow that also returns the session's row the check read,
// or nil when there is no check.
func (s *Server) allowed(ctx context.Context, id string, lvl access.Level) (*store.Session, error) {
	if err := need(id); err != nil {
		return nil, err
	}
	if s.guard == nil {
		return nil, nil
	}
	return s.guard.Session(ctx, id, lvl)
}

// audit records an action on a session in the audit log.
func (s *Server) audit(ctx context.Context, id, action, detail string) {
	if s.guard != nil {
		s.guard.AuditSession(ctx, id, action, detail)
	}
}

// CreateSession creates a session. Behind a Guard, the caller's
// memberships that decide the session's project are read in one
// statement with what the session needs of the store (its agent's
// version, its model's settings), which Create then takes from there.
func (s *Server) CreateSession(ctx context.Context, req *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
	spec := session.CreateSpec{
		Model: req.GetModel(), Workspace: req.GetWorkspace(), ApprovalMode: req.GetApprovalMode(),
		ThinkingLevel: req.GetThinkingLevel(), AgentState: req.GetAgentState(), SystemPrompt: req.GetSystemPrompt(),
		MaxTurns: req.GetMaxTurns(), SandboxMode: req.GetSandboxMode(), ProjectID: req.GetProjectId(),
	}
	if s.guard != nil {
		project, err := s.guard.ProjectForNew(ctx, spec.ProjectID, func(ctx context.Context, userID string) ([]store.Member, error) {
			read, err := s.sessions.ReadForNew(ctx, spec, userID)
			if err != nil {
				return nil, err
			}
			spec.Read = read
			return read.Memberships, nil
		})
		if err != nil {
			return nil, err
		}
		spec.ProjectID = project
	}
	sess, err := s.sessions.Create(ctx, spec)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.CreateSessionResponse{Session: sess}, nil
}

// GetSessionDefaults says what a new session gets by default.
func (s *Server) GetSessionDefaults(ctx context.Context, _ *penguinv1.GetSessionDefaultsRequest) (*penguinv1.GetSessionDefaultsResponse, error) {
	d, err := s.sessions.Defaults(ctx)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return d, nil
}

// UpdateSession renames, pins or archives a session.
func (s *Server) UpdateSession(ctx context.Context, req *penguinv1.UpdateSessionRequest) (*penguinv1.UpdateSessionResponse, error) {
	if err := need(req.GetSessionId()); err != nil {
		return nil, err
	}
	sess, err := s.sessions.Update(ctx, req.GetSessionId(), session.Update{
		Title: req.Title, Pinned: req.Pinned, Archived: req.Archived, ApprovalMode: req.ApprovalMode, ThinkingLevel: req.ThinkingLevel,
	})
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.UpdateSessionResponse{Session: sess}, nil
}

// ListSessionProcesses lists the commands of a session's environment.
func (s *Server) ListSessionProcesses(ctx context.Context, req *penguinv1.ListSessionProcessesRequest) (*penguinv1.ListSessionProcessesResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	ps, err := s.sessions.Processes(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.ListSessionProcessesResponse{Processes: ps}, nil
}

// KillSessionProcess stops one command of a session's environment.
func (s *Server) KillSessionProcess(ctx context.Context, req *penguinv1.KillSessionProcessRequest) (*penguinv1.KillSessionProcessResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	msg, err := s.sessions.KillProcess(ctx, req.GetSessionId(), req.GetProcessId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.KillSessionProcessResponse{Message: msg}, nil
}

// ListWorkspaceChanges lists what a session's turns changed in its
// workspace.
func (s *Server) ListWorkspaceChanges(ctx context.Context, req *penguinv1.ListWorkspaceChangesRequest) (*penguinv1.ListWorkspaceChangesResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	cs, err := s.sessions.WorkspaceChanges(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	for i, c := range cs {
		if ch := c.GetChange(); len(ch.GetFiles()) > session.ListedFiles {
			// A new message: the change may be the log's own.
			cut := &penguinv1.WorkspaceChange{Kind: ch.GetKind(), Before: ch.GetBefore(), After: ch.GetAfter(), Files: ch.GetFiles()[:session.ListedFiles],
				TurnSequence: ch.GetTurnSequence(), Incomplete: ch.GetIncomplete(), Forced: ch.GetForced()}
			cs[i] = &penguinv1.TurnChange{Sequence: c.GetSequence(), Time: c.GetTime(), Change: cut, Undone: c.GetUndone(), Prompt: c.GetPrompt(), FileCount: c.GetFileCount()}
		}
	}
	return &penguinv1.ListWorkspaceChangesResponse{Changes: cs}, nil
}

// GetWorkspaceDiff returns one turn's change with its diffs.
func (s *Server) GetWorkspaceDiff(ctx context.Context, req *penguinv1.GetWorkspaceDiffRequest) (*penguinv1.GetWorkspaceDiffResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	if req.GetSequence() < 0 {
		return nil, status.Error(codes.InvalidArgument, "sequence must be a change's sequence number (0: the last change)")
	}
	c, next, err := s.sessions.WorkspaceDiff(ctx, req.GetSessionId(), req.GetSequence(), int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.GetWorkspaceDiffResponse{Change: c, NextPageToken: next}, nil
}

// UndoWorkspaceChange undoes or redoes one turn's change of the
// workspace.
func (s *Server) UndoWorkspaceChange(ctx context.Context, req *penguinv1.UndoWorkspaceChangeRequest) (*penguinv1.UndoWorkspaceChangeResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	if req.GetSequence() < 0 {
		return nil, status.Error(codes.InvalidArgument, "sequence must be a change's sequence number (0: the last change)")
	}
	res, err := s.sessions.UndoChange(ctx, req.GetSessionId(), req.GetSequence(), req.GetRedo(), req.GetForce())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	action := "undo"
	if req.GetRedo() {
		action = "redo"
	}
	s.audit(ctx, req.GetSessionId(), action, fmt.Sprintf("workspace change at sequence %d", res.TurnSequence))
	return &penguinv1.UndoWorkspaceChangeResponse{Change: res.Change, Sequence: res.Sequence, TurnSequence: res.TurnSequence, Overwritten: res.Overwritten}, nil
}

// ListSessionFiles lists one directory of a session's workspace.
func (s *Server) ListSessionFiles(ctx context.Context, req *penguinv1.ListSessionFilesRequest) (*penguinv1.ListSessionFilesResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	resp, err := s.sessions.WorkspaceFiles(ctx, req.GetSessionId(), req.GetDir())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.ListSessionFilesResponse{Entries: resp.GetEntries(), Truncated: resp.GetTruncated()}, nil
}

// GetSessionFile reads one file of a session's workspace.
func (s *Server) GetSessionFile(ctx context.Context, req *penguinv1.GetSessionFileRequest) (*penguinv1.GetSessionFileResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	f, err := s.sessions.WorkspaceFile(ctx, req.GetSessionId(), req.GetPath())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.GetSessionFileResponse{File: f}, nil
}

// GetSession describes a session.
func (s *Server) GetSession(ctx context.Context, req *penguinv1.GetSessionRequest) (*penguinv1.GetSessionResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	sess, err := s.sessions.Get(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.GetSessionResponse{Session: sess}, nil
}

// ListSessions pages through sessions.
func (s *Server) ListSessions(ctx context.Context, req *penguinv1.ListSessionsRequest) (*penguinv1.ListSessionsResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, status.Error(codes.InvalidArgument, "page_size must not be negative")
	}
	var projects []string // nil: every project's
	switch p := req.GetProjectId(); {
	case p != "" && s.guard != nil:
		// One project: the caller must read it, and an unreadable one
		// answers as a missing one would.
		if err := s.guard.Check(ctx, p, access.Read, "project", p); err != nil {
			return nil, err
		}
		projects = []string{p}
	case p != "":
		projects = []string{p}
	case s.guard != nil:
		var err error
		if projects, err = s.guard.Readable(ctx); err != nil {
			return nil, err
		}
	}
	list, next, err := s.sessions.List(ctx, int(req.GetPageSize()), req.GetPageToken(), projects...)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.ListSessionsResponse{Sessions: list, NextPageToken: next}, nil
}

// DeleteSession deletes a session.
func (s *Server) DeleteSession(ctx context.Context, req *penguinv1.DeleteSessionRequest) (*penguinv1.DeleteSessionResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	s.audit(ctx, req.GetSessionId(), "session.delete", "")
	if err := s.sessions.Delete(ctx, req.GetSessionId()); err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.DeleteSessionResponse{}, nil
}

// ForkSession copies a session.
func (s *Server) ForkSession(ctx context.Context, req *penguinv1.ForkSessionRequest) (*penguinv1.ForkSessionResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	sess, err := s.sessions.Fork(ctx, req.GetSessionId(), req.GetUpToSequence())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.ForkSessionResponse{Session: sess}, nil
}

// Run starts a task and streams its events.
func (s *Server) Run(req *penguinv1.RunRequest, stream grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
	ctx := stream.Context()
	row, err := s.allowed(ctx, req.GetSessionId(), access.Write)
	if err != nil {
		return err
	}
	if err := attach.CheckImages(req.GetImages()); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	spec := session.RunSpec{
		Prompt: req.GetPrompt(), Images: req.GetImages(), Thinking: req.GetThinkingLevel(), Mode: req.GetApprovalMode(),
		Skills: req.GetSkills(), Row: row,
	}
	if g := req.GetGoal(); g != nil {
		spec.Goal = &session.GoalSpec{Budget: g.GetBudget()}
	}
	err = s.sessions.Run(ctx, req.GetSessionId(), spec, func(ev *penguinv1.RunEvent) error { return stream.Send(&penguinv1.RunResponse{Event: ev}) })
	if err != nil {
		return s.status(ctx, err)
	}
	return nil
}

// Attach replays and follows a session's events.
func (s *Server) Attach(req *penguinv1.AttachRequest, stream grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
	ctx := stream.Context()
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return err
	}
	return s.followRun(ctx, req, func(ev *penguinv1.RunEvent) error {
		return stream.Send(&penguinv1.AttachResponse{Event: ev})
	})
}

// Approve answers a pending approval.
func (s *Server) Approve(ctx context.Context, req *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	if resp, ok, err := forward(ctx, s, "Approve", req.GetSessionId(), req, penguinv1.EngineServiceClient.Approve); ok {
		return resp, err
	}
	if err := s.sessions.Approve(ctx, req.GetSessionId(), req.GetToolCallId(), req.GetOrigin(), req.GetDecision()); err != nil {
		return nil, s.status(ctx, err)
	}
	s.audit(ctx, req.GetSessionId(), "session.approve", "tool call "+req.GetToolCallId()+": "+req.GetDecision().String())
	return &penguinv1.ApproveResponse{}, nil
}

// Steer queues a message, text and images, for the running task.
func (s *Server) Steer(ctx context.Context, req *penguinv1.SteerRequest) (*penguinv1.SteerResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	if err := attach.CheckImages(req.GetImages()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if resp, ok, err := forward(ctx, s, "Steer", req.GetSessionId(), req, penguinv1.EngineServiceClient.Steer); ok {
		return resp, err
	}
	if err := s.sessions.Steer(ctx, req.GetSessionId(), req.GetText(), req.GetImages()); err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.SteerResponse{}, nil
}

// Abort interrupts the running task.
func (s *Server) Abort(ctx context.Context, req *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	if resp, ok, err := forward(ctx, s, "Abort", req.GetSessionId(), req, penguinv1.EngineServiceClient.Abort); ok {
		return resp, err
	}
	ok, err := s.sessions.Abort(ctx, req.GetSessionId(), req.GetReason())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.AbortResponse{Aborted: ok}, nil
}

// RetryNow skips a reconnect wait.
func (s *Server) RetryNow(ctx context.Context, req *penguinv1.RetryNowRequest) (*penguinv1.RetryNowResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	if resp, ok, err := forward(ctx, s, "RetryNow", req.GetSessionId(), req, penguinv1.EngineServiceClient.RetryNow); ok {
		return resp, err
	}
	ok, err := s.sessions.RetryNow(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.RetryNowResponse{Retried: ok}, nil
}

// Compact compacts an idle session.
func (s *Server) Compact(ctx context.Context, req *penguinv1.CompactRequest) (*penguinv1.CompactResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Write); err != nil {
		return nil, err
	}
	st, msg, err := s.sessions.Compact(ctx, req.GetSessionId(), req.GetMode())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.CompactResponse{Status: st, Message: msg}, nil
}

// GetHistory pages through persisted events.
func (s *Server) GetHistory(ctx context.Context, req *penguinv1.GetHistoryRequest) (*penguinv1.GetHistoryResponse, error) {
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return nil, err
	}
	if req.GetLimit() < 0 || req.GetAfterSequence() < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit and after_sequence must not be negative")
	}
	evs, more, err := s.sessions.History(ctx, req.GetSessionId(), req.GetAfterSequence(), int(req.GetLimit()))
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &penguinv1.GetHistoryResponse{Events: evs, More: more}, nil
}

// ExportTrace streams a session's log as JSONL trace lines: one model
// context, or all of them with each line's context index.
func (s *Server) ExportTrace(req *penguinv1.ExportTraceRequest, stream grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error {
	ctx := stream.Context()
	if err := s.allow(ctx, req.GetSessionId(), access.Read); err != nil {
		return err
	}
	err := s.sessions.Export(ctx, req.GetSessionId(), int(req.GetContextIndex()), func(line string, index int) error {
		return stream.Send(&penguinv1.ExportTraceResponse{Line: line, ContextIndex: int32(index)})
	})
	if err != nil {
		return s.status(ctx, err)
	}
	return nil
}

// status maps an error to a gRPC status. The messages of the session and
// store layers are written for clients; anything unclassified is logged
// and reported without its text.
func (s *Server) status(ctx context.Context, err error) error {
	if _, ok := status.FromError(err); ok && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, session.ErrNotFound), errors.Is(err, store.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, session.ErrBusy), errors.Is(err, session.ErrNotRunning), errors.Is(err, session.ErrPrecondition):
		code = codes.FailedPrecondition
	case errors.Is(err, session.ErrInvalid), errors.Is(err, store.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, store.ErrConflict):
		code = codes.Aborted
	case errors.Is(err, session.ErrFellBehind):
		code = codes.ResourceExhausted
	case errors.Is(err, session.ErrUnavailable), errors.Is(err, store.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, store.ErrCorrupt):
		code = codes.DataLoss
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "the call was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "the call's deadline passed")
	}
	if code == codes.Unknown {
		s.log.ErrorContext(ctx, "engine request failed", "error", err)
		return status.Error(codes.Internal, "internal error in the engine; see its log")
	}
	return status.Error(code, err.Error())
}
