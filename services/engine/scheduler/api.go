package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/schedule"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// API serves penguinv1.ScheduleService. The caller's access to the
// request's project was checked before a handler runs (access.Guard's
// Authorize, by the request's project field); a handler checks what that
// cannot see: that a schedule's target session is of the same project.
type API struct {
	penguinv1.UnimplementedScheduleServiceServer
	s *Scheduler
}

// API returns the ScheduleService of this scheduler.
func (s *Scheduler) API() *API { return &API{s: s} }

// defaultRuns is how many runs ListScheduleRuns returns by default.
const defaultRuns = 50

func projectOf(p string) string {
	if p == "" {
		return agentmirror.DefaultProject
	}
	return p
}

// ListSchedules implements ScheduleService.
func (a *API) ListSchedules(ctx context.Context, req *penguinv1.ListSchedulesRequest) (*penguinv1.ListSchedulesResponse, error) {
	rows, err := a.s.opts.Store.ListSchedules(ctx, projectOf(req.GetProject()), req.GetAgent())
	if err != nil {
		return nil, storeStatus(err)
	}
	out := &penguinv1.ListSchedulesResponse{}
	for _, r := range rows {
		pb, err := a.describe(ctx, r)
		if err != nil {
			return nil, err
		}
		out.Schedules = append(out.Schedules, pb)
	}
	return out, nil
}

// GetSchedule implements ScheduleService.
func (a *API) GetSchedule(ctx context.Context, req *penguinv1.GetScheduleRequest) (*penguinv1.GetScheduleResponse, error) {
	pb, err := a.get(ctx, projectOf(req.GetProject()), req.GetAgent(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &penguinv1.GetScheduleResponse{Schedule: pb}, nil
}

func (a *API) get(ctx context.Context, project, agent, name string) (*penguinv1.Schedule, error) {
	row, err := a.s.opts.Store.GetSchedule(ctx, project, agent, name)
	if err != nil {
		return nil, storeStatus(err)
	}
	return a.describe(ctx, row)
}

// describe turns a stored schedule into its message, with its latest run
// and, for an invalid file, what is wrong with it.
func (a *API) describe(ctx context.Context, r *store.Schedule) (*penguinv1.Schedule, error) {
	pb := &penguinv1.Schedule{Name: r.Name, Agent: r.Agent, Yaml: string(r.Definition)}
	if d, err := schedule.Parse(r.Name, r.Definition); err != nil {
		pb.Error = err.Error()
	} else {
		fill(pb, d)
	}
	if !r.NextDue.IsZero() {
		pb.NextRun = timestamppb.New(r.NextDue)
	}
	runs, err := a.s.opts.Store.ListRuns(ctx, r.Project, r.Agent, r.Name, 1)
	if err != nil {
		return nil, storeStatus(err)
	}
	if len(runs) > 0 {
		pb.LastRun = runMessage(runs[0])
	}
	return pb, nil
}

// fill copies a definition's fields into its message.
func fill(pb *penguinv1.Schedule, d *schedule.Definition) {
	pb.Prompt, pb.Enabled, pb.Period, pb.Cron, pb.Timezone = d.Prompt, d.Enabled, d.Period, d.Cron, d.TimeZone
	pb.SessionId, pb.Workspace, pb.Missed, pb.Overlap = d.SessionID, d.Workspace, d.MissedPolicy(), d.OverlapPolicy()
	pb.Cadence = d.Cadence()
	if !d.StartAt.IsZero() {
		pb.StartAt = timestamppb.New(d.StartAt)
	}
	if !d.EndAt.IsZero() {
		pb.EndAt = timestamppb.New(d.EndAt)
	}
	if d.Provider != "" {
		pb.Model = &penguinv1.ModelRef{Provider: d.Provider, ModelId: d.ModelID}
	}
}

func runMessage(r *store.ScheduleRun) *penguinv1.ScheduleRun {
	return &penguinv1.ScheduleRun{
		Id: r.ID, Name: r.Name, Agent: r.Agent, DueAt: timestamppb.New(r.DueAt), State: r.State, Reason: r.Reason,
		SessionId: r.SessionID, UpdatedAt: timestamppb.New(r.UpdatedAt),
	}
}

// definition is the file text a create or update asks for: its yaml, or
// its schedule's fields written as the file.
func definition(yaml string, pb *penguinv1.Schedule) ([]byte, error) {
	if yaml != "" {
		if pb != nil {
			return nil, status.Error(codes.InvalidArgument, "give the definition as yaml or as schedule, not both")
		}
		return []byte(yaml), nil
	}
	if pb == nil {
		return nil, status.Error(codes.InvalidArgument, "the definition is missing: give schedule or yaml")
	}
	d := &schedule.Definition{
		Prompt: pb.GetPrompt(), Enabled: pb.GetEnabled(), Period: pb.GetPeriod(), Cron: pb.GetCron(), TimeZone: pb.GetTimezone(),
		SessionID: pb.GetSessionId(), Workspace: pb.GetWorkspace(), Provider: pb.GetModel().GetProvider(), ModelID: pb.GetModel().GetModelId(),
		Missed: pb.GetMissed(), Overlap: pb.GetOverlap(),
	}
	if pb.StartAt != nil {
		d.StartAt = pb.GetStartAt().AsTime()
	}
	if pb.EndAt != nil {
		d.EndAt = pb.GetEndAt().AsTime()
	}
	b, err := schedule.Marshal(d)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "schedule: %v", err)
	}
	return b, nil
}

// check validates a definition for project: the file, its model, which
// the project must be able to call, and its target session, which must be
// of the project.
func (a *API) check(ctx context.Context, project, name string, data []byte) error {
	d, err := schedule.Parse(name, data)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if d.Provider != "" {
		err := a.s.opts.Sessions.CheckModel(ctx, project, &penguinv1.ModelRef{Provider: d.Provider, ModelId: d.ModelID})
		var bad *session.ModelError
		if errors.As(err, &bad) {
			return status.Errorf(codes.InvalidArgument, "%s: model_id: %s", schedule.FileName(name), bad.Reason)
		}
		if err != nil {
			return status.Errorf(codes.Unavailable, "%s: the model could not be checked, so the schedule was not saved: %v", schedule.FileName(name), err)
		}
	}
	if d.SessionID != "" {
		row, err := a.s.opts.Store.GetSession(ctx, d.SessionID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && row.ProjectID != project) {
			return status.Errorf(codes.InvalidArgument, "%s: session_id: the project has no session %s", schedule.FileName(name), d.SessionID)
		}
		if err != nil {
			return storeStatus(err)
		}
	}
	return nil
}

// CreateSchedule implements ScheduleService.
func (a *API) CreateSchedule(ctx context.Context, req *penguinv1.CreateScheduleRequest) (*penguinv1.CreateScheduleResponse, error) {
	pb, err := a.write(ctx, projectOf(req.GetProject()), req.GetAgent(), req.GetName(), req.GetYaml(), req.GetSchedule(), true)
	if err != nil {
		return nil, err
	}
	return &penguinv1.CreateScheduleResponse{Schedule: pb}, nil
}

// UpdateSchedule implements ScheduleService.
func (a *API) UpdateSchedule(ctx context.Context, req *penguinv1.UpdateScheduleRequest) (*penguinv1.UpdateScheduleResponse, error) {
	pb, err := a.write(ctx, projectOf(req.GetProject()), req.GetAgent(), req.GetName(), req.GetYaml(), req.GetSchedule(), false)
	if err != nil {
		return nil, err
	}
	return &penguinv1.UpdateScheduleResponse{Schedule: pb}, nil
}

// write creates (create) or replaces a schedule's file, conditionally on
// the file being absent or as read, and records it at once.
func (a *API) write(ctx context.Context, project, agent, name, yaml string, pb *penguinv1.Schedule, create bool) (*penguinv1.Schedule, error) {
	if agent == "" {
		return nil, status.Error(codes.InvalidArgument, "agent is required")
	}
	if err := schedule.CheckName(name); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	data, err := definition(yaml, pb)
	if err != nil {
		return nil, err
	}
	if err := a.check(ctx, project, name, data); err != nil {
		return nil, err
	}
	path := schedule.FileName(name)
	cond := store.Absent
	if !create {
		if cond, err = a.fileVersion(ctx, project, agent, path); err != nil {
			return nil, err
		}
	}
	ag, err := a.s.opts.Agents.Store().ChangeAgent(ctx, project, agent, []store.AgentChange{{Path: path, Data: data, IfVersion: cond}})
	switch {
	case errors.Is(err, store.ErrConflict) && create:
		return nil, status.Errorf(codes.AlreadyExists, "agent %s already has a schedule %s", agent, name)
	case err != nil:
		return nil, storeStatus(err)
	}
	now, err := a.s.opts.Store.Now(ctx)
	if err != nil {
		return nil, storeStatus(err)
	}
	if err := a.s.put(ctx, project, agent, name, data, ag.Version, now); err != nil {
		return nil, storeStatus(err)
	}
	return a.get(ctx, project, agent, name)
}

// fileVersion returns the version of an agent's file; NOT_FOUND when the
// agent or the file does not exist.
func (a *API) fileVersion(ctx context.Context, project, agent, path string) (int64, error) {
	_, files, err := a.s.opts.Agents.Store().ReadAgent(ctx, project, agent)
	if err != nil {
		return 0, storeStatus(err)
	}
	i := slices.IndexFunc(files, func(f store.AgentFile) bool { return f.Path == path })
	if i < 0 {
		return 0, status.Errorf(codes.NotFound, "agent %s has no %s", agent, path)
	}
	return files[i].Version, nil
}

// DeleteSchedule implements ScheduleService.
func (a *API) DeleteSchedule(ctx context.Context, req *penguinv1.DeleteScheduleRequest) (*penguinv1.DeleteScheduleResponse, error) {
	project, path := projectOf(req.GetProject()), schedule.FileName(req.GetName())
	v, err := a.fileVersion(ctx, project, req.GetAgent(), path)
	if err != nil {
		return nil, err
	}
	if _, err := a.s.opts.Agents.Store().ChangeAgent(ctx, project, req.GetAgent(), []store.AgentChange{{Path: path, Delete: true, IfVersion: v}}); err != nil {
		return nil, storeStatus(err)
	}
	if err := a.s.opts.Store.DeleteSchedule(ctx, project, req.GetAgent(), req.GetName()); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, storeStatus(err)
	}
	return &penguinv1.DeleteScheduleResponse{}, nil
}

// RunSchedule implements ScheduleService.
func (a *API) RunSchedule(ctx context.Context, req *penguinv1.RunScheduleRequest) (*penguinv1.RunScheduleResponse, error) {
	project := projectOf(req.GetProject())
	row, err := a.s.opts.Store.GetSchedule(ctx, project, req.GetAgent(), req.GetName())
	if err != nil {
		return nil, storeStatus(err)
	}
	d, err := schedule.Parse(row.Name, row.Definition)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "the schedule's file is invalid: %v", err)
	}
	now, err := a.s.opts.Store.Now(ctx)
	if err != nil {
		return nil, storeStatus(err)
	}
	run := a.s.newRun(row, now, now)
	if err := a.s.target(ctx, row, d, run); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := a.s.opts.Store.AddRun(ctx, run); err != nil {
		return nil, storeStatus(err)
	}
	return &penguinv1.RunScheduleResponse{Run: runMessage(run)}, nil
}

// ListScheduleRuns implements ScheduleService.
func (a *API) ListScheduleRuns(ctx context.Context, req *penguinv1.ListScheduleRunsRequest) (*penguinv1.ListScheduleRunsResponse, error) {
	if req.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit must not be negative")
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultRuns
	}
	project := projectOf(req.GetProject())
	if req.GetName() != "" {
		if _, err := a.s.opts.Store.GetSchedule(ctx, project, req.GetAgent(), req.GetName()); err != nil {
			return nil, storeStatus(err)
		}
	}
	runs, err := a.s.opts.Store.ListRuns(ctx, project, req.GetAgent(), req.GetName(), limit)
	if err != nil {
		return nil, storeStatus(err)
	}
	out := &penguinv1.ListScheduleRunsResponse{}
	for _, r := range runs {
		out.Runs = append(out.Runs, runMessage(r))
	}
	return out, nil
}

// storeStatus maps a store error to a status.
func storeStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, store.ErrConflict):
		code = codes.Aborted
	case errors.Is(err, store.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, store.ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, fmt.Sprint(err))
}
