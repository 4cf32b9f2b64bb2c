package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// The schedule commands: penguin schedules list, create, update, delete,
// run-now and history, each one ScheduleService call. A definition comes
// from a YAML file (--file, "-" for stdin: the agent's schedule/<name>.yaml
// as the model writes it) or from flags; update with flags changes only
// the fields they name. The engine validates it and names the line of a
// problem. Only a serving engine (`penguin serve`, `penguin serve engine`)
// fires schedules: against the embedded server these commands manage the
// definitions of the data directory.

// scheduleFlags are the definition flags of create and update.
type scheduleFlags struct {
	file                                                          string
	prompt, period, cron, timezone, startAt, endAt                string
	session, workspace, provider, model, missed, overlap, enabled string
}

func (f *scheduleFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.file, "file", "", "the definition as YAML (the file schedule/<name>.yaml), - for stdin; the other flags then do not apply")
	fs.StringVar(&f.prompt, "prompt", "", "the prompt each run sends")
	fs.StringVar(&f.period, "period", "", "the time between runs, such as 30m, 12h or 7d, counted from --start-at")
	fs.StringVar(&f.cron, "cron", "", `a cron expression such as "0 9 * * 1-5", instead of --period`)
	fs.StringVar(&f.timezone, "timezone", "", "the time zone of --cron, such as Europe/Paris (default UTC)")
	fs.StringVar(&f.startAt, "start-at", "", "the first run (RFC 3339, such as 2026-08-01T09:00:00Z), or now")
	fs.StringVar(&f.endAt, "end-at", "", "the time after which it stops (RFC 3339)")
	fs.StringVar(&f.session, "session", "", "run in this existing session instead of a new one per run")
	fs.StringVar(&f.workspace, "workspace", "", "the workspace of a new session per run")
	fs.StringVar(&f.provider, "provider", "", "the model's provider route; give it with --model, or neither for the agent's default model")
	fs.StringVar(&f.model, "model", "", "the model id; give it with --provider")
	fs.StringVar(&f.missed, "missed", "", "a run every engine missed: run_once (default) or skip")
	fs.StringVar(&f.overlap, "overlap", "", "a run due while the previous one still runs: skip (default) or queue")
	fs.StringVar(&f.enabled, "enabled", "", "true or false: whether it fires on its cadence (create: default true)")
}

// request returns the YAML or the schedule the flags give, over base (the
// current definition, for update). changed reports a flag that was set.
func (f *scheduleFlags) request(c *cobra.Command, base *penguinv1.Schedule) (string, *penguinv1.Schedule, error) {
	if f.file != "" {
		for _, name := range []string{"prompt", "period", "cron", "timezone", "start-at", "end-at", "session", "workspace", "provider", "model", "missed", "overlap", "enabled"} {
			if c.Flags().Changed(name) {
				return "", nil, usageErrorf("--file gives the whole definition; leave out --%s", name)
			}
		}
		var data []byte
		var err error
		if f.file == "-" {
			data, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
		} else {
			data, err = os.ReadFile(f.file)
		}
		return string(data), nil, err
	}
	s := base
	if s == nil {
		s = &penguinv1.Schedule{Enabled: true}
	}
	set := func(name string, dst *string, v string) {
		if c.Flags().Changed(name) {
			*dst = v
		}
	}
	set("prompt", &s.Prompt, f.prompt)
	set("period", &s.Period, f.period)
	set("cron", &s.Cron, f.cron)
	set("timezone", &s.Timezone, f.timezone)
	set("session", &s.SessionId, f.session)
	set("workspace", &s.Workspace, f.workspace)
	set("missed", &s.Missed, f.missed)
	set("overlap", &s.Overlap, f.overlap)
	for _, t := range []struct {
		flag, v string
		dst     **timestamppb.Timestamp
	}{{"start-at", f.startAt, &s.StartAt}, {"end-at", f.endAt, &s.EndAt}} {
		if !c.Flags().Changed(t.flag) {
			continue
		}
		switch t.v {
		case "":
			*t.dst = nil
		case "now":
			*t.dst = timestamppb.New(time.Now().Add(time.Second))
		default:
			at, err := time.Parse(time.RFC3339, t.v)
			if err != nil {
				return "", nil, usageErrorf("--%s %q: give an RFC 3339 time such as 2026-08-01T09:00:00Z, or now", t.flag, t.v)
			}
			*t.dst = timestamppb.New(at)
		}
	}
	if c.Flags().Changed("provider") || c.Flags().Changed("model") {
		if (f.provider == "") != (f.model == "") {
			return "", nil, usageErrorf("give --provider and --model together, or neither for the agent's default model")
		}
		s.Model = nil
		if f.provider != "" {
			s.Model = &penguinv1.ModelRef{Provider: f.provider, ModelId: f.model}
		}
	}
	if c.Flags().Changed("enabled") {
		switch f.enabled {
		case "true":
			s.Enabled = true
		case "false":
			s.Enabled = false
		default:
			return "", nil, usageErrorf("--enabled %q: give true or false", f.enabled)
		}
	}
	// What the engine reports of a schedule is not part of a definition.
	s.NextRun, s.LastRun, s.Error, s.Cadence, s.Yaml, s.Name, s.Agent = nil, nil, "", "", "", "", ""
	return "", s, nil
}

func newSchedulesCmd() *cobra.Command {
	var create, update scheduleFlags
	createCmd := &cobra.Command{Use: "create NAME", Short: "create a schedule (from --file, or from the flags)", Args: nArgs("penguin schedules create NAME (--file F | --prompt P --period 1h --start-at now --workspace W ...)", 1, 1), RunE: func(c *cobra.Command, args []string) error {
		a := ac(c)
		yaml, s, err := create.request(c, nil)
		if err != nil {
			return err
		}
		resp, err := a.schedules.CreateSchedule(c.Context(), &penguinv1.CreateScheduleRequest{Project: a.project, Agent: a.agent, Name: args[0], Yaml: yaml, Schedule: s})
		if err != nil {
			return err
		}
		printSchedules(a.out, []*penguinv1.Schedule{resp.GetSchedule()})
		return nil
	}}
	create.add(createCmd.Flags())
	updateCmd := &cobra.Command{Use: "update NAME", Short: "change a schedule: the fields the flags name, or the whole definition from --file", Args: nArgs("penguin schedules update NAME (--file F | --enabled false | --prompt P ...)", 1, 1), RunE: func(c *cobra.Command, args []string) error {
		a := ac(c)
		var base *penguinv1.Schedule
		if update.file == "" {
			got, err := a.schedules.GetSchedule(c.Context(), &penguinv1.GetScheduleRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			if err != nil {
				return err
			}
			if got.GetSchedule().GetError() != "" {
				return fmt.Errorf("the schedule's file is invalid (%s); give the whole definition with --file", got.GetSchedule().GetError())
			}
			base = got.GetSchedule()
		}
		yaml, s, err := update.request(c, base)
		if err != nil {
			return err
		}
		resp, err := a.schedules.UpdateSchedule(c.Context(), &penguinv1.UpdateScheduleRequest{Project: a.project, Agent: a.agent, Name: args[0], Yaml: yaml, Schedule: s})
		if err != nil {
			return err
		}
		printSchedules(a.out, []*penguinv1.Schedule{resp.GetSchedule()})
		return nil
	}}
	update.add(updateCmd.Flags())
	var limit int32
	historyCmd := &cobra.Command{Use: "history NAME", Short: "list a schedule's past runs, newest first", Args: nArgs("penguin schedules history NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
		a := ac(c)
		resp, err := a.schedules.ListScheduleRuns(c.Context(), &penguinv1.ListScheduleRunsRequest{Project: a.project, Agent: a.agent, Name: args[0], Limit: limit})
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DUE\tSTATE\tSESSION\tREASON")
		for _, r := range resp.GetRuns() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", when(r.GetDueAt()), r.GetState(), r.GetSessionId(), r.GetReason())
		}
		return tw.Flush()
	}}
	historyCmd.Flags().Int32Var(&limit, "limit", 0, "at most this many runs (default 50)")
	return agentGroup("schedules", "list, create, update, delete, run and review an agent's schedules", true,
		&cobra.Command{Use: "list", Short: "list the agent's schedules with their next and last runs", Args: noArgs, RunE: func(c *cobra.Command, _ []string) error {
			a := ac(c)
			resp, err := a.schedules.ListSchedules(c.Context(), &penguinv1.ListSchedulesRequest{Project: a.project, Agent: a.agent})
			if err != nil {
				return err
			}
			printSchedules(a.out, resp.GetSchedules())
			return nil
		}},
		createCmd, updateCmd,
		&cobra.Command{Use: "delete NAME", Short: "delete a schedule (its history stays)", Args: nArgs("penguin schedules delete NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			_, err := a.schedules.DeleteSchedule(c.Context(), &penguinv1.DeleteScheduleRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			return err
		}},
		&cobra.Command{Use: "run-now NAME", Short: "run a schedule once now, out of its cadence", Args: nArgs("penguin schedules run-now NAME", 1, 1), RunE: func(c *cobra.Command, args []string) error {
			a := ac(c)
			resp, err := a.schedules.RunSchedule(c.Context(), &penguinv1.RunScheduleRequest{Project: a.project, Agent: a.agent, Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "run %s queued for session %s\n", resp.GetRun().GetId(), resp.GetRun().GetSessionId())
			return nil
		}},
		historyCmd,
	)
}

// printSchedules writes schedules as a table; an invalid one shows what
// is wrong with it.
func printSchedules(w io.Writer, list []*penguinv1.Schedule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tENABLED\tCADENCE\tNEXT RUN\tLAST RUN")
	for _, s := range list {
		cadence := s.GetCadence()
		if s.GetError() != "" {
			cadence = "invalid: " + s.GetError()
		}
		last := "-"
		if r := s.GetLastRun(); r != nil {
			last = r.GetState() + " " + when(r.GetDueAt())
			if r.GetSessionId() != "" {
				last += " " + r.GetSessionId()
			}
		}
		fmt.Fprintf(tw, "%s\t%t\t%s\t%s\t%s\n", s.GetName(), s.GetEnabled(), cadence, when(s.GetNextRun()), last)
	}
	_ = tw.Flush()
}

// when writes a time in UTC, or "-".
func when(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}
