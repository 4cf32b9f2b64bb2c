package engine_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// replyModel answers every request with a short text.
type replyModel struct{}

func (replyModel) ServeHTTP(w http.ResponseWriter, _ *http.Request) { streamChat(w, "Done.", "", "") }

// missedAfterShort is the --schedule-missed-after of the tests that want
// the missed policy to apply within seconds.
const missedAfterShort = 4 * time.Second

// startReplica runs `penguin serve engine` as one of several replicas of a
// store, with a short run lease so that what a killed replica held moves
// on within seconds, and due times later than missedAfter handled by their
// schedule's missed policy.
func startReplica(t *testing.T, listen string, b *enginetest.Backends, storeURL, agentDir string, missedAfter time.Duration) (*netns.Proc, string) {
	t.Helper()
	return startEngine(t, listen, b, storeURL, agentDir, "--lease-ttl", "3s", "--schedule-missed-after", missedAfter.String())
}

// agentHome returns a default agent's directory of its own for a replica:
// every replica adopts the same agent, "default", into the store.
func agentHome(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "default")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "system_config.yaml"), []byte(agentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func dialSchedules(t *testing.T, addr string) penguinv1.ScheduleServiceClient {
	conn, err := grpcclient.New(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return penguinv1.NewScheduleServiceClient(conn)
}

// TestSchedulesExactlyOnceAcrossReplicas is the kill test of the issue's
// load shape: 50 schedules due every 5 s for a minute on two engine
// replicas sharing PostgreSQL, a replica SIGKILLed twice right after it
// claimed a due run and restarted: every due time from the first to the
// last has exactly one run (no duplicate, none missing), each started
// run's session holds the prompt exactly once, a disabled schedule never
// fires, and the runs and the sessions agree. It logs the figures: due
// times, runs started, duplicates, misses.
func TestSchedulesExactlyOnceAcrossReplicas(t *testing.T) {
	const (
		schedules = 50
		period    = 5 * time.Second
		span      = time.Minute
	)
	b := enginetest.NewBackendsWithModel(t, replyModel{})
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	url := postgresURL(t)
	ctx := testkit.Context(t, 5*time.Minute)
	// A due time that comes late (a loaded machine, a replica killed after
	// its claim) still runs: only a late start within missedAfter keeps
	// every due time's own run, which is what this test counts.
	const missedAfter = 2 * time.Minute
	procA, addrA := startReplica(t, "127.0.0.1:0", b, url, agentHome(t), missedAfter)
	procB, addrB := startReplica(t, "127.0.0.1:0", b, url, agentHome(t), missedAfter)
	api := dialSchedules(t, addrA)

	// Far enough ahead that the 51 creates are done before it, on a busy
	// machine too.
	start := time.Now().Add(15 * time.Second).Truncate(time.Second)
	for i := range schedules {
		if _, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: fmt.Sprintf("tick-%d", i), Schedule: &penguinv1.Schedule{
			Prompt: fmt.Sprintf("scheduled prompt %d", i), Enabled: true, StartAt: timestamppb.New(start), Period: period.String(),
			Workspace: "ws", Model: enginetest.Model, Overlap: "queue",
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: "off", Schedule: &penguinv1.Schedule{
		Prompt: "never", Enabled: false, StartAt: timestamppb.New(start), Period: "1s", Workspace: "ws", Model: enginetest.Model,
	}}); err != nil {
		t.Fatal(err)
	}
	// A second create of a name answers ALREADY_EXISTS.
	_, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: "tick-0", Schedule: &penguinv1.Schedule{
		Prompt: "again", StartAt: timestamppb.New(start), Period: "1m", Workspace: "ws",
	}})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second tick-0: %v, want ALREADY_EXISTS", err)
	}

	// Kill a replica right after it claims a due run, at a third and at
	// two thirds of the span, restarting it on the same address each time.
	// Whichever replica claims first is killed: which one wins a due time
	// is a race, and one can lose every race for long stretches.
	procs, addrs := []*netns.Proc{procA, procB}, []string{addrA, addrB}
	for k := range 2 {
		time.Sleep(time.Until(start.Add(span * time.Duration(k+1) / 3)))
		claimed := make([]int, len(procs))
		for i, p := range procs {
			claimed[i] = strings.Count(p.Output(), "schedule due")
		}
		victim := -1
		eventually.Within(t, 30*time.Second, "a replica to claim a due run", func() bool {
			for i, p := range procs {
				if strings.Count(p.Output(), "schedule due") > claimed[i] {
					victim = i
					return true
				}
			}
			return false
		})
		procs[victim].Kill()
		procs[victim].Wait(30 * time.Second)
		t.Logf("kill %d: replica %c killed after claiming a run, %v into the span", k+1, 'A'+victim, time.Since(start).Round(time.Second))
		time.Sleep(period)
		procs[victim], _ = startReplica(t, addrs[victim], b, url, agentHome(t), missedAfter)
	}
	time.Sleep(time.Until(start.Add(span)))

	// Stop the cadence, then let pending runs settle (a killed replica's
	// claims lapse after the 3 s lease).
	stopAt := time.Now()
	for i := range schedules {
		name := fmt.Sprintf("tick-%d", i)
		got, err := api.GetSchedule(ctx, &penguinv1.GetScheduleRequest{Agent: "default", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		s := got.GetSchedule()
		s.Enabled = false
		if _, err := api.UpdateSchedule(ctx, &penguinv1.UpdateScheduleRequest{Agent: "default", Name: name, Schedule: &penguinv1.Schedule{
			Prompt: s.GetPrompt(), Enabled: false, StartAt: s.GetStartAt(), Period: s.GetPeriod(), Workspace: "ws", Model: enginetest.Model, Overlap: "queue",
		}}); err != nil {
			t.Fatal(err)
		}
	}
	engine := e2etest.DialEngine(t, addrA, "")
	var expected, dueTimes, started, sessions, dups, misses int
	deadline := time.Now().Add(2 * time.Minute)
	for i := range schedules {
		name := fmt.Sprintf("tick-%d", i)
		var runs []*penguinv1.ScheduleRun
		for {
			resp, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: name, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			runs = resp.GetRuns()
			pending := 0
			for _, r := range runs {
				if r.GetState() == "pending" {
					pending++
				}
			}
			if pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d runs still pending", name, pending)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Every due time from start on, one period apart, until the
		// cadence stopped: none twice, none missing.
		due := map[time.Time]bool{}
		for _, r := range runs {
			at := r.GetDueAt().AsTime()
			if due[at] {
				dups++
				t.Errorf("%s: due time %v ran twice", name, at)
			}
			due[at] = true
			if r.GetState() != "started" {
				t.Errorf("%s: run due %v is %s (%s), want started", name, at, r.GetState(), r.GetReason())
				continue
			}
			started++
			prompts := 0
			for _, ev := range e2etest.History(ctx, t, engine, r.GetSessionId()) {
				if tx := ev.GetMessage().GetText(); tx != nil && tx.GetSender() == penguinv1.Sender_SENDER_SERVER {
					prompts++
					if tx.GetText() != fmt.Sprintf("scheduled prompt %d", i) {
						t.Errorf("%s: session %s got %q", name, r.GetSessionId(), tx.GetText())
					}
				}
			}
			if prompts != 1 {
				t.Errorf("%s: session %s holds the prompt %d times, want once", name, r.GetSessionId(), prompts)
			}
			sess, err := engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: r.GetSessionId()})
			if err != nil {
				t.Fatal(err)
			}
			if sess.GetSession().GetTitle() != name {
				t.Errorf("%s: session title %q", name, sess.GetSession().GetTitle())
			}
			sessions++
		}
		for at := start; !at.After(stopAt.Add(-period)); at = at.Add(period) {
			expected++
			if !due[at.UTC()] {
				misses++
				t.Errorf("%s: due time %v has no run (lost)", name, at.UTC())
			}
		}
		dueTimes += len(due)
	}
	off, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: "off"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(off.GetRuns()); n != 0 {
		t.Errorf("the disabled schedule ran %d times", n)
	}
	// Every session a schedule made is one of its runs'.
	list, err := engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, s := range list.GetSessions() {
		if strings.HasPrefix(s.GetTitle(), "tick-") {
			made++
		}
	}
	if made != sessions {
		t.Errorf("%d sessions made by schedules, %d runs started", made, sessions)
	}
	t.Logf("%d schedules every %v for %v, 2 SIGKILLs of a claiming replica: %d due times passed, %d recorded, %d runs started, %d sessions, %d duplicates, %d misses",
		schedules, period, span, expected, dueTimes, started, made, dups, misses)
}

// TestScheduleBadDefinitions: invalid definitions are refused with the line
// and field, and nothing is stored; so is a model the project cannot call
// (an unknown route, or a model its route does not list).
func TestScheduleBadDefinitions(t *testing.T) {
	b := enginetest.NewBackendsWithModel(t, replyModel{})
	ctx := testkit.Context(t, time.Minute)
	_, addr := startReplica(t, "127.0.0.1:0", b, postgresURL(t), agentHome(t), missedAfterShort)
	api := dialSchedules(t, addr)
	for _, c := range []struct{ yaml, want string }{
		{"prompt: hi\nenabled: true\nperiod: 5x\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\n", "schedule/bad.yaml:3: period:"},
		{"prompt: hi\ncron: \"0 0 30 2 *\"\nworkspace: ws\n", "schedule/bad.yaml:2: cron: \"0 0 30 2 *\" never fires"},
		{"prompt: hi\nstart_at: 2026-01-01T00:00:00Z\nend_at: 2025-01-01T00:00:00Z\nperiod: 1h\nworkspace: ws\n", "schedule/bad.yaml:3: end_at: must be later"},
		{"enabled: true\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\n", "prompt: is required"},
		{"prompt: hi\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\nmodel_id: m\n", "schedule/bad.yaml:5: model_id: give provider and model_id together"},
		{"prompt: hi\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nsession_id: nope\n", "session_id: the project has no session nope"},
		{"prompt: hi\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\ncolour: red\n", "schedule/bad.yaml:5: colour: unknown field"},
		{"prompt: hi\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\nprovider: nope\nmodel_id: m\n", "schedule/bad.yaml: model_id: unknown provider \"nope\""},
		{"prompt: hi\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\nprovider: emu\nmodel_id: zzz\n", "schedule/bad.yaml: model_id: provider \"emu\" has no model \"zzz\"; its models: m"},
		{"prompt: " + strings.Repeat("x", 40<<10) + "\nperiod: 1h\nstart_at: 2026-01-01T00:00:00Z\nworkspace: ws\n", "prompt: is 40960 bytes; at most 32768"},
	} {
		_, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: "bad", Yaml: c.yaml})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
			t.Errorf("%q: got %v, want INVALID_ARGUMENT with %q", c.yaml[:min(len(c.yaml), 40)], err, c.want)
		}
	}
	list, err := api.ListSchedules(ctx, &penguinv1.ListSchedulesRequest{Agent: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(list.GetSchedules()); n != 0 {
		t.Errorf("%d schedules stored after refused creates", n)
	}
}

// TestScheduleWrittenByTheModelFires: the model writes a schedule with
// write_agent_file in a session; the engine picks the file up and fires it
// once, in a new session that gets the prompt and the model's answer.
func TestScheduleWrittenByTheModelFires(t *testing.T) {
	ctx := testkit.Context(t, 2*time.Minute)
	// Far enough ahead that the engine reads the file (every 10 s) before.
	start := time.Now().Add(20 * time.Second).UTC().Truncate(time.Second)
	b := enginetest.NewBackends(t,
		agentTool("write_agent_file", map[string]string{"file_path": "schedule/ping.yaml",
			"content": fmt.Sprintf("prompt: scheduled ping\nenabled: true\nstart_at: %s\nworkspace: ws\nprovider: emu\nmodel_id: m\n", start.Format(time.RFC3339))}),
		emulator.Turn{Text: "Scheduled."},
		emulator.Turn{Text: "pong"},
	)
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, addr := startReplica(t, "127.0.0.1:0", b, postgresURL(t), agentHome(t), missedAfterShort)
	engine := e2etest.DialEngine(t, addr, "")
	created, err := engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL,
	})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := engine.Run(ctx, &penguinv1.RunRequest{SessionId: created.GetSession().GetSessionId(), Prompt: "ping me in a few seconds"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enginetest.Collect(stream); err != nil {
		t.Fatal(err)
	}
	api := dialSchedules(t, addr)
	var run *penguinv1.ScheduleRun
	for run == nil {
		resp, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: "ping"})
		if err == nil && len(resp.GetRuns()) == 1 && resp.GetRuns()[0].GetState() == "started" {
			run = resp.GetRuns()[0]
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the model's schedule did not fire: %v, %v", resp, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !run.GetDueAt().AsTime().Equal(start) {
		t.Errorf("the run was due at %v, want %v", run.GetDueAt().AsTime(), start)
	}
	// The run's session says where it came from: the schedule, by name,
	// of the agent it is listed under.
	sess, err := engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: run.GetSessionId()})
	if err != nil {
		t.Fatal(err)
	}
	if s := sess.GetSession(); s.GetSource() != "schedule" || s.GetTitle() != "ping" || s.GetAgent() != "default" {
		t.Errorf("the run's session: source %q, title %q, agent %q; want schedule, ping, default", s.GetSource(), s.GetTitle(), s.GetAgent())
	}
	// The run's prompt and the model's answer reach its session, once.
	for {
		prompts, pongs := 0, 0
		for _, ev := range e2etest.History(ctx, t, engine, run.GetSessionId()) {
			tx := ev.GetMessage().GetText()
			if tx.GetSender() == penguinv1.Sender_SENDER_SERVER && tx.GetText() == "scheduled ping" {
				prompts++
			}
			if tx.GetRole() == penguinv1.Role_ROLE_ASSISTANT && tx.GetText() == "pong" {
				pongs++
			}
		}
		if prompts > 1 || pongs > 1 {
			t.Fatalf("the scheduled prompt reached the session %d times, its answer %d", prompts, pongs)
		}
		if prompts == 1 && pongs == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("prompt %d, answer %d", prompts, pongs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestScheduleMissedWhileAllReplicasWereDown stops the only replica for
// longer than --schedule-missed-after (4 s) across several due times of
// two schedules: on return, the run_once schedule runs once for them all
// and the skip schedule records them skipped, once, and runs nothing.
func TestScheduleMissedWhileAllReplicasWereDown(t *testing.T) {
	b := enginetest.NewBackendsWithModel(t, replyModel{})
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	url := postgresURL(t)
	ctx := testkit.Context(t, 2*time.Minute)
	proc, addr := startReplica(t, "127.0.0.1:0", b, url, agentHome(t), missedAfterShort)
	api := dialSchedules(t, addr)
	start := time.Now().Add(8 * time.Second).UTC().Truncate(time.Second)
	for _, missed := range []string{"run_once", "skip"} {
		if _, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: missed, Schedule: &penguinv1.Schedule{
			Prompt: "missed " + missed, Enabled: true, StartAt: timestamppb.New(start), Period: "2s", Workspace: "ws", Model: enginetest.Model, Missed: missed,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	proc.Kill()
	proc.Wait(30 * time.Second)
	// Down from before the first due time until well past missed-after.
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	_, addr = startReplica(t, addr, b, url, agentHome(t), missedAfterShort)
	api = dialSchedules(t, addr)
	// The restarted replica claims the missed due times at its first tick
	// or so; on a loaded machine its start and that tick (which reads the
	// definitions first) can take seconds, so the test waits for the
	// record of the first due time rather than for a fixed while.
	runsOf := func(name string) []*penguinv1.ScheduleRun {
		resp, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetRuns()
	}
	eventually.Within(t, 30*time.Second, "the restarted replica to record the missed due times", func() bool {
		for _, missed := range []string{"run_once", "skip"} {
			if !slices.ContainsFunc(runsOf(missed), func(r *penguinv1.ScheduleRun) bool { return r.GetDueAt().AsTime().Equal(start) }) {
				return false
			}
		}
		return true
	})
	for _, missed := range []string{"run_once", "skip"} {
		resp := &penguinv1.ListScheduleRunsResponse{Runs: runsOf(missed)}
		var first *penguinv1.ScheduleRun
		for _, r := range resp.GetRuns() {
			if r.GetDueAt().AsTime().Equal(start) {
				first = r
			}
			if at := r.GetDueAt().AsTime(); at.After(start) && at.Before(start.Add(7*time.Second)) {
				t.Errorf("%s: a missed due time %v has a run of its own (%s)", missed, at, r.GetState())
			}
		}
		switch {
		case first == nil:
			t.Errorf("%s: the missed due times left no record: %v", missed, resp.GetRuns())
		case missed == "skip" && (first.GetState() != "skipped" || !strings.Contains(first.GetReason(), "missed")):
			t.Errorf("skip: %s %q, want skipped as missed", first.GetState(), first.GetReason())
		case missed == "run_once" && first.GetState() == "skipped":
			t.Errorf("run_once: the missed run was skipped: %q", first.GetReason())
		}
	}
}

// slowModel answers every request after a pause, and counts, per schedule
// (by the marker its prompt holds), the requests it got and the most it
// answered at once.
type slowModel struct {
	pause   time.Duration
	markers []string
	mu      sync.Mutex
	now     map[string]int
	most    map[string]int
	total   map[string]int
}

func (m *slowModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := ""
	for _, k := range m.markers {
		if strings.Contains(string(body), k) {
			key = k
		}
	}
	m.mu.Lock()
	m.now[key]++
	m.total[key]++
	m.most[key] = max(m.most[key], m.now[key])
	m.mu.Unlock()
	time.Sleep(m.pause)
	streamChat(w, "Done.", "", "")
	m.mu.Lock()
	m.now[key]--
	m.mu.Unlock()
}

// TestScheduleOverlapPolicies: two schedules due every 2 s whose runs take
// the model 3 s to answer. With overlap: skip, a due time that comes while
// the previous run still runs is recorded skipped and runs nothing; with
// overlap: queue, it runs once the previous one has ended. Either way no
// two runs of a schedule run at once, every due time has exactly one
// record, and the model got one request per started run.
func TestScheduleOverlapPolicies(t *testing.T) {
	const (
		period = 2 * time.Second
		pause  = 3 * time.Second
		// lag is the most a due time waits for a tick to claim it under
		// load: the scheduler's tick of up to one and a half seconds,
		// and half a second for the tick's work.
		lag = 2 * time.Second
	)
	policies := []string{"skip", "queue"}
	model := &slowModel{pause: pause, now: map[string]int{}, most: map[string]int{}, total: map[string]int{}}
	for _, p := range policies {
		model.markers = append(model.markers, "OVERLAP-"+p)
	}
	b := enginetest.NewBackendsWithModel(t, model)
	if err := os.MkdirAll(filepath.Join(b.Root, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t, 3*time.Minute)
	_, addr := startReplica(t, "127.0.0.1:0", b, postgresURL(t), agentHome(t), 2*time.Minute)
	api := dialSchedules(t, addr)
	start := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second)
	def := func(p string, enabled bool) *penguinv1.Schedule {
		return &penguinv1.Schedule{Prompt: "OVERLAP-" + p + " run", Enabled: enabled, StartAt: timestamppb.New(start), Period: period.String(),
			Workspace: "ws", Model: enginetest.Model, Overlap: p}
	}
	for _, p := range policies {
		if _, err := api.CreateSchedule(ctx, &penguinv1.CreateScheduleRequest{Agent: "default", Name: "overlap-" + p, Schedule: def(p, true)}); err != nil {
			t.Fatal(err)
		}
	}
	// Six due times, then the cadence stops; the queue drains after.
	// The stop comes half a period after the sixth due time, so at least
	// the first five are certain to have been claimed (see lag).
	time.Sleep(time.Until(start.Add(6*period - period/2)))
	stopAt := time.Now()
	for _, p := range policies {
		if _, err := api.UpdateSchedule(ctx, &penguinv1.UpdateScheduleRequest{Agent: "default", Name: "overlap-" + p, Schedule: def(p, false)}); err != nil {
			t.Fatal(err)
		}
	}
	engine := e2etest.DialEngine(t, addr, "")
	for _, p := range policies {
		name := "overlap-" + p
		var runs []*penguinv1.ScheduleRun
		eventually.Within(t, time.Minute, name+": every run to leave pending and its task to end", func() bool {
			resp, err := api.ListScheduleRuns(ctx, &penguinv1.ListScheduleRunsRequest{Agent: "default", Name: name, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			runs = resp.GetRuns()
			for _, r := range runs {
				if r.GetState() == "pending" {
					return false
				}
				if r.GetState() == "started" {
					s, err := engine.GetSession(ctx, &penguinv1.GetSessionRequest{SessionId: r.GetSessionId()})
					if err != nil || s.GetSession().GetState() != penguinv1.SessionState_SESSION_STATE_IDLE {
						return false
					}
				}
			}
			return true
		})
		due := map[time.Time]int{}
		started, skipped := 0, 0
		for _, r := range runs {
			due[r.GetDueAt().AsTime()]++
			switch r.GetState() {
			case "started":
				started++
			case "skipped":
				skipped++
				if !strings.Contains(r.GetReason(), "overlap") {
					t.Errorf("%s: run due %v skipped for %q, not for an overlap", name, r.GetDueAt().AsTime(), r.GetReason())
				}
			default:
				t.Errorf("%s: run due %v is %s (%s)", name, r.GetDueAt().AsTime(), r.GetState(), r.GetReason())
			}
		}
		// A due time is claimed at the first scheduler tick after it,
		// up to one and a half ticks (plus the tick's own work) later, so
		// the last due time before the schedules were disabled may have
		// been claimed or not; every earlier one must have exactly one
		// record, and none may come after the disabling.
		sure := stopAt.Add(-lag)
		periods := 0
		for at := start; at.Before(stopAt); at = at.Add(period) {
			switch {
			case due[at] == 1:
				periods++
			case at.Before(sure) || due[at] > 1:
				t.Errorf("%s: due time %v has %d records, want one", name, at, due[at])
			}
		}
		if len(due) != periods {
			t.Errorf("%s: %d due times recorded, %d of them before the schedule was disabled", name, len(due), periods)
		}
		model.mu.Lock()
		most, total := model.most["OVERLAP-"+p], model.total["OVERLAP-"+p]
		model.mu.Unlock()
		if most != 1 || total != started {
			t.Errorf("%s: the model answered %d of its requests at once at most, %d in all, for %d started runs; want 1 at once, one each", name, most, total, started)
		}
		switch {
		case p == "skip" && (skipped == 0 || started < 2):
			t.Errorf("skip: %d started, %d skipped; want runs every other due time or so, the rest skipped", started, skipped)
		case p == "queue" && (skipped != 0 || started != periods):
			t.Errorf("queue: %d started, %d skipped of %d due times; want every one started", started, skipped, periods)
		}
		t.Logf("%s: %d due times, %d started, %d skipped, at most %d at once", name, periods, started, skipped, most)
	}
}
