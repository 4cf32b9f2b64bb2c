package gateway

import (
	"net/http"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// scheduleRoutes registers the schedule routes with api: one
// ScheduleService call each, under an agent of a project, and the
// project's schedules of every agent.
func (g *Gateway) scheduleRoutes(api func(string, http.HandlerFunc)) {
	type s = penguinv1.ScheduleServiceClient
	const p = "/api/projects/{project}/agents/{agent}/schedules"
	api("GET /api/projects/{project}/schedules", rpcRoute(g, g.opts.Schedules, "schedule", s.ListSchedules, http.StatusOK))
	api("GET "+p, rpcRoute(g, g.opts.Schedules, "schedule", s.ListSchedules, http.StatusOK))
	api("POST "+p, rpcRoute(g, g.opts.Schedules, "schedule", s.CreateSchedule, http.StatusCreated))
	api("GET "+p+"/{name}", rpcRoute(g, g.opts.Schedules, "schedule", s.GetSchedule, http.StatusOK))
	api("PUT "+p+"/{name}", rpcRoute(g, g.opts.Schedules, "schedule", s.UpdateSchedule, http.StatusOK))
	api("DELETE "+p+"/{name}", rpcRoute(g, g.opts.Schedules, "schedule", s.DeleteSchedule, http.StatusOK))
	api("POST "+p+"/{name}/run", rpcRoute(g, g.opts.Schedules, "schedule", s.RunSchedule, http.StatusOK))
	api("GET "+p+"/{name}/runs", rpcRoute(g, g.opts.Schedules, "schedule", s.ListScheduleRuns, http.StatusOK))
}
