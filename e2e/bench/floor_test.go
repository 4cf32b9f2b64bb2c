package bench_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/e2e/bench/floor"
	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// PenguinHarness's constants the overhead is set against (the issue asks
// for at most a tenth of them).
const (
	harnessWall = 19.1 // ms, wall overhead p50
	harnessCPU  = 16.0 // ms, CPU overhead
)

var floorBuild build

// floorBinary builds e2e/bench/floorserver once per test process, as
// Penguin's binary is built.
func floorBinary(b *testing.B) string {
	return filepath.Join(floorBuild.do(b, "penguin-floor-", "floorserver", "./e2e/bench/floorserver"), "floorserver")
}

// BenchmarkTaskFloor measures the floor under the task's per-task
// overhead beside Penguin, in the same run, against the same mockllm and
// with the same client: the floor server of e2e/bench/floor (a real gRPC
// server with penguin's windows, the same two streamed model calls with
// Penguin's request bodies, the same read beneath an os.Root, the same
// events recorded in SQLite with the store's settings in as many
// transactions, and nothing else), the same floor server recording
// nothing (the store's share), and `penguin serve` as BenchmarkTask runs
// it. Each of PENGUIN_BENCH_RUNS runs starts the three and measures
// PENGUIN_BENCH_TASKS tasks of each and as many direct baselines,
// interleaved in a rotating order; overheads are computed as
// BenchmarkTask computes them. After each run it checks that each floor
// server did the work: its own counts (tasks, model calls, reads,
// commits), the rows of its database, and the model's count of the
// requests it answered. With PENGUIN_BENCH_FLOOR_PROFILE set to a
// directory, each floor server writes a CPU profile of its whole run
// there, and Penguin's is taken over the measured tasks and the idle
// seconds after them, PENGUIN_BENCH_PROFILE_SECONDS (default 30) in all
// (a profiled server is slower: take figures from runs without it).
func BenchmarkTaskFloor(b *testing.B) {
	bin, floorBin := penguinBinary(b), floorBinary(b)
	tasks := envInt(b, "PENGUIN_BENCH_TASKS", defaultTasks)
	runs := envInt(b, "PENGUIN_BENCH_RUNS", defaultRuns)
	var results []floorRun
	for range b.N {
		results = results[:0]
		for r := range runs {
			results = append(results, floorRunOnce(b, bin, floorBin, r, tasks))
		}
	}
	floorReport(b, results, tasks)
}

// The servers of a floor run, in the order of floorRun.servers.
const (
	srvFloor = iota
	srvBare
	srvPenguin
	nServers
)

var serverNames = [nServers]string{"floor", "floor, no SQLite", "Penguin"}

// floorRun is what one run measured.
type floorRun struct {
	servers    [nServers]measured
	directWall []time.Duration
	directCPU  time.Duration
	// floorLog is the floor's database after the run; penguinLog the
	// payload bytes of one Penguin session's events.
	floorLog   floor.Log
	penguinLog int64
}

// measured is one server's figures over the measured tasks, and what
// starting it cost.
type measured struct {
	wall, created []time.Duration
	cpu           time.Duration
	written       int64
	commits       float64 // NaN when not counted
	// ready is the server's cold start (startReady); exec the exec of its
	// binary printing its version, for the servers that have one of their
	// own (zero for the floor without SQLite, which is the floor's binary).
	ready, exec start
}

// floorRunOnce starts Penguin (with its model, calibrated, as
// BenchmarkTask does), takes the floor's plan from a Penguin task, starts
// both floor servers against the same model, and measures.
func floorRunOnce(b *testing.B, bin, floorBin string, run, tasks int) floorRun {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The model's script: setup's warm-up (5 tasks and 5 direct
	// baselines), the task the plan is taken from, both floors' warm-up,
	// then four tasks an iteration, two turns each. setup gives 4(n+5)
	// turns for n.
	requests := 4*warmupTasks + 2 + 2*2*warmupTasks + 8*tasks
	var penguinStart runResult
	flags := []string{"--metrics-listen", "127.0.0.1:0"}
	penguinProfile := profilePath(b, "penguin", run)
	if penguinProfile != "" {
		flags = append(flags, "--pprof-listen", "127.0.0.1:0")
	}
	r := setup(ctx, b, bin, (requests+3)/4-warmupTasks, &penguinStart, flags...)
	defer r.stop()
	metrics := r.srv.proc.WaitLog("metrics listening", nil, "addr", serverStartLimit)

	dir := b.TempDir()
	plan, penguinBytes := takePlan(ctx, b, r)
	planPath := filepath.Join(dir, "plan.json")
	data, err := json.Marshal(plan)
	if err != nil {
		b.Fatal(err)
	}
	writeFile(b, planPath, string(data))
	dbPath := filepath.Join(dir, "floor.db")
	var srvs [nServers]*server
	res := floorRun{penguinLog: penguinBytes}
	res.servers[srvFloor].exec = execToExit(b, floorBin, "--version")
	srvs[srvFloor], res.servers[srvFloor].ready = startFloor(b, floorBin, "floor", r.mock.url, planPath, dbPath, profilePath(b, "floor", run))
	srvs[srvBare], res.servers[srvBare].ready = startFloor(b, floorBin, "floor without SQLite", r.mock.url, planPath, "", profilePath(b, "floor-bare", run))
	srvs[srvPenguin] = r.srv
	res.servers[srvPenguin].ready, res.servers[srvPenguin].exec = penguinStart.coldStart, penguinStart.versionExec
	for _, s := range srvs[:srvPenguin] {
		for range warmupTasks {
			s.task(ctx, b, benchRoute, r.ws)
		}
	}
	time.Sleep(diskSettle)

	var cpu0 [nServers]time.Duration
	var written0 [nServers]int64
	for i, s := range srvs {
		cpu0[i], written0[i] = procCPU(b, s.proc.Pid()), procCount(b, s.proc.Pid(), "io", "write_bytes")
	}
	commits0 := storeCommits(b, metrics)
	// Penguin's profile covers the measured tasks and the idle seconds
	// after them: PENGUIN_BENCH_PROFILE_SECONDS must outlast the tasks.
	profiled := make(chan struct{})
	if penguinProfile != "" {
		addr := r.srv.proc.WaitLog("profiles listening", nil, "addr", serverStartLimit)
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, envInt(b, "PENGUIN_BENCH_PROFILE_SECONDS", 30))
		go func() {
			defer close(profiled)
			fetchProfile(ctx, b, url, penguinProfile)
		}()
	} else {
		close(profiled)
	}
	t0 := time.Now()
	for i := range tasks {
		// The four in turn, each first once every four iterations.
		for k := range nServers + 1 {
			j := (i + k) % (nServers + 1)
			if j == nServers {
				c0, t0 := selfCPU(b), time.Now()
				r.direct.run(ctx, b)
				res.directWall = append(res.directWall, time.Since(t0))
				res.directCPU += selfCPU(b) - c0
				continue
			}
			t0 := time.Now()
			cs := srvs[j].task(ctx, b, benchRoute, r.ws)
			m := &res.servers[j]
			m.wall = append(m.wall, time.Since(t0))
			m.created = append(m.created, cs)
		}
	}
	for i, s := range srvs {
		res.servers[i].cpu = procCPU(b, s.proc.Pid()) - cpu0[i]
	}
	took := time.Since(t0)
	<-profiled
	time.Sleep(diskSettle)
	for i, s := range srvs {
		res.servers[i].written = procCount(b, s.proc.Pid(), "io", "write_bytes") - written0[i]
	}
	res.servers[srvPenguin].commits = storeCommits(b, metrics) - commits0

	// Did the floors do the work they were measured for?
	done := warmupTasks + tasks
	for i, s := range srvs[:srvPenguin] {
		c := stopFloor(b, s.proc)
		want := floor.Counts{Tasks: int64(done), ModelCalls: int64(2 * done), Reads: int64(done)}
		if i == srvFloor {
			want.Commits = int64(floor.CommitsPerTask * done)
		}
		if c != want {
			b.Fatalf("run %d: %s did %+v, want %+v", run+1, serverNames[i], c, want)
		}
		res.servers[i].commits = float64(c.Commits) * float64(tasks) / float64(done)
	}
	if res.floorLog, err = floor.ReadLog(ctx, dbPath); err != nil {
		b.Fatal(err)
	}
	if l := res.floorLog; l.Sessions != int64(done) || l.Events != 13*l.Sessions || l.Leases != 0 || l.Titled != l.Sessions || l.Bound != l.Sessions {
		b.Fatalf("run %d: the floor's log holds %+v, want %d sessions, titled and bound, 13 events each and no lease", run+1, l, done)
	}
	if n := strings.Count(r.mock.proc.Output(), `"msg":"emulator request"`); n != requests {
		b.Fatalf("run %d: the model answered %d requests, want %d", run+1, n, requests)
	}
	b.Logf("run %d: %d tasks of each in %s", run+1, tasks, took.Round(time.Millisecond))
	for i, m := range res.servers {
		b.Logf("run %d: %s: CPU %.2f ms/task, %.1f KiB written/task, %.2f commits/task", run+1, serverNames[i],
			ms(m.cpu)/float64(tasks), float64(m.written)/1024/float64(tasks), m.commits/float64(tasks))
	}
	return res
}

// takePlan runs one Penguin task and takes from it and from Penguin's
// database what the floor needs of the agent (floor.Plan); it checks
// that the floor's second request and read are the bytes Penguin's are.
// It also returns the bytes of that session's events in Penguin's log.
func takePlan(ctx context.Context, b *testing.B, r *rig) (*floor.Plan, int64) {
	b.Helper()
	plan := &floor.Plan{Request: r.direct.bodies[0]}
	var tools *penguinv1.OmniMessage
	_, id, err := r.srv.runTask(ctx, benchRoute, r.ws, func(ev *penguinv1.RunEvent) {
		if m := ev.GetMessage(); m.GetToolListReady() != nil {
			tools = m
		}
	})
	if err == nil && tools != nil {
		plan.ToolList, err = proto.Marshal(tools)
	}
	if err != nil || tools == nil {
		b.Fatalf("the plan's task: %v (tool list: %v)", err, tools != nil)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(r.home, "penguin.db")+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	// The session_meta's row keeps its body, and its system prompt is a
	// part kept once per project (services/engine/store, payloads.go);
	// the bytes a session adds to the log are its rows' bodies.
	var (
		bytes, events    int64
		metaBody, prompt []byte
	)
	if err := db.QueryRowContext(ctx, `SELECT (SELECT body FROM events WHERE session_id = ?1 AND kind = 'session_meta'),
		(SELECT p.body FROM events AS e JOIN shared_payloads AS p ON p.digest = e.shared
			WHERE e.session_id = ?1 AND e.kind = 'session_meta'),
		(SELECT config FROM sessions WHERE id = ?1), (SELECT sum(length(body)) FROM events WHERE session_id = ?1),
		(SELECT count(*) FROM events WHERE session_id = ?1)`, id).Scan(&metaBody, &prompt, &plan.Config, &bytes, &events); err != nil {
		b.Fatalf("session %s in Penguin's log: %v", id, err)
	}
	// Protobuf decodes a concatenation as a merge: body and part are the
	// whole session_meta, encoded again as the engine encoded it.
	meta := new(penguinv1.OmniMessage)
	if err := proto.Unmarshal(append(metaBody, prompt...), meta); err != nil || meta.GetSessionMeta() == nil {
		b.Fatalf("session %s's session_meta in Penguin's log: %v", id, err)
	}
	if plan.SessionMeta, err = proto.Marshal(meta); err != nil {
		b.Fatal(err)
	}
	if events != 13 {
		b.Fatalf("Penguin's log holds %d events of the plan's task; the floor records 13", events)
	}

	// The floor's second request from the recorded first, with the
	// recorded call and output, must be the recorded second.
	second := r.direct.requests[1]
	if len(second.Messages) != 4 || len(second.Messages[2].ToolCalls) != 1 {
		b.Fatalf("the recorded second request is not the first's with a tool call and its output: %s", r.direct.bodies[1])
	}
	call, output := second.Messages[2].ToolCalls[0], second.Messages[3].Content
	head, tail, err := floor.SplitRequest(plan.Request)
	if err != nil {
		b.Fatal(err)
	}
	if got := floor.NextRequest(head, tail, call.ID, call.Function.Name, call.Function.Arguments, output); string(got) != string(r.direct.bodies[1]) {
		b.Fatalf("the floor's second request differs from Penguin's:\n%s\nwant\n%s", got, r.direct.bodies[1])
	}
	if got := floor.NumberLines(helloText); got != output {
		b.Fatalf("the floor's read_file gives %q, Penguin's %q", got, output)
	}
	return plan, bytes
}

// profilePath is where a server of run writes its CPU profile:
// name-runN.pb.gz in the directory PENGUIN_BENCH_FLOOR_PROFILE names
// (made if missing), or nowhere when it is not set.
func profilePath(b *testing.B, name string, run int) string {
	dir := os.Getenv("PENGUIN_BENCH_FLOOR_PROFILE")
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, fmt.Sprintf("%s-run%d.pb.gz", name, run+1))
}

// startFloor starts a floor server recording in db (nothing when empty;
// a new file when it is set), profiled into profile when it is set, and
// connects to it as to Penguin, measuring its cold start as Penguin's is
// measured.
func startFloor(b *testing.B, bin, name, modelURL, plan, db, profile string) (*server, start) {
	b.Helper()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--model-url", modelURL+"/v1", "--plan", plan, "--db", db, "--cpu-profile", profile)
	cmd.Env = e2etest.BaseEnv(b)
	s, cold := startReady(b, name, cmd, "floor listening", nil)
	b.Cleanup(func() { s.proc.Stop(10 * time.Second) })
	return s, cold
}

// stopFloor stops a floor server and returns what it said it did.
func stopFloor(b *testing.B, p *netns.Proc) floor.Counts {
	b.Helper()
	p.Stop(10 * time.Second)
	count := func(field string) int64 {
		v, err := strconv.ParseFloat(p.WaitLog("floor stopped", nil, field, time.Second), 64)
		if err != nil {
			b.Fatalf("%s: %s: %v", p.Name(), field, err)
		}
		return int64(v)
	}
	if code := p.Wait(time.Second); code != 0 {
		b.Fatalf("%s exited with %d:\n%s", p.Name(), code, p.Output())
	}
	return floor.Counts{Tasks: count("tasks"), ModelCalls: count("model_calls"), Reads: count("reads"), Commits: count("commits")}
}

// floorReport prints the three servers' figures side by side, each the
// median of the runs and their range, and their ratios to
// PenguinHarness's constants.
func floorReport(b *testing.B, results []floorRun, tasks int) {
	per := func(f func(r floorRun) float64) []float64 { return perRun(results, f) }
	type figure struct {
		heading            string // a line printed before the row, when set
		name, unit, metric string
		of                 func(r floorRun, s int) float64
		base               func(r floorRun) float64 // the direct task's, when there is one
		harness            float64                  // PenguinHarness's constant, when there is one
	}
	wallP := func(p int) func(r floorRun, s int) float64 {
		return func(r floorRun, s int) float64 {
			return ms(percentile(r.servers[s].wall, p) - percentile(r.directWall, p))
		}
	}
	figures := []figure{
		{name: "wall overhead p50", unit: "ms", metric: "wall-overhead-p50-ms", of: wallP(50), harness: harnessWall,
			base: func(r floorRun) float64 { return ms(percentile(r.directWall, 50)) }},
		{name: "wall overhead p99", unit: "ms", metric: "wall-overhead-p99-ms", of: wallP(99),
			base: func(r floorRun) float64 { return ms(percentile(r.directWall, 99)) }},
		{name: "CPU overhead", unit: "ms", metric: "cpu-overhead-ms", harness: harnessCPU,
			of:   func(r floorRun, s int) float64 { return (ms(r.servers[s].cpu) - ms(r.directCPU)) / float64(tasks) },
			base: func(r floorRun) float64 { return ms(r.directCPU) / float64(tasks) }},
		{name: "CreateSession p50", unit: "ms", metric: "create-session-p50-ms",
			of: func(r floorRun, s int) float64 { return ms(percentile(r.servers[s].created, 50)) }},
		{name: "store transactions", metric: "store-transactions",
			of: func(r floorRun, s int) float64 { return r.servers[s].commits / float64(tasks) }},
		{name: "disk written", unit: "KiB", metric: "disk-written-KiB",
			of: func(r floorRun, s int) float64 { return float64(r.servers[s].written) / 1024 / float64(tasks) }},
		// Each server's cold start (a new store file, for those with one),
		// and the exec of each binary printing its version (`penguin
		// version`, `floorserver --version`): what starting a process of
		// that binary costs before it does anything.
		{heading: "at start", name: "cold start to ready", unit: "ms", metric: "cold-start-ms",
			of: func(r floorRun, s int) float64 { return ms(r.servers[s].ready.took) }},
		{name: "page faults to ready", metric: "ready-faults",
			of: func(r floorRun, s int) float64 { return float64(r.servers[s].ready.faults) }},
		{name: "exec of version", unit: "ms", metric: "exec-version-ms",
			of: func(r floorRun, s int) float64 { return orNaN(ms(r.servers[s].exec.took)) }},
		{name: "  its page faults", metric: "exec-version-faults",
			of: func(r floorRun, s int) float64 { return orNaN(float64(r.servers[s].exec.faults)) }},
	}
	var t strings.Builder
	fmt.Fprintf(&t, "the floor beside Penguin, %d runs of %d tasks each (median of the runs [min–max])\n", len(results), tasks)
	fmt.Fprintf(&t, "%-20s", "per task")
	for _, n := range serverNames {
		fmt.Fprintf(&t, " %-26s", n)
	}
	fmt.Fprintf(&t, " %-26s %s\n", "direct task, same run", "PenguinHarness")
	ratios := map[string][nServers][]float64{}
	for _, f := range figures {
		if f.heading != "" {
			fmt.Fprintf(&t, "%s\n", f.heading)
		}
		fmt.Fprintf(&t, "%-20s", f.name)
		var rs [nServers][]float64
		for s := range nServers {
			xs := per(func(r floorRun) float64 { return f.of(r, s) })
			if math.IsNaN(median(xs)) {
				fmt.Fprintf(&t, " %-26s", "—")
				continue
			}
			b.ReportMetric(median(xs), strings.ReplaceAll(serverNames[s], ", no SQLite", "-bare")+"-"+f.metric)
			fmt.Fprintf(&t, " %-26s", strings.TrimSpace(spread(xs)+" "+f.unit))
			if f.harness > 0 {
				for _, x := range xs {
					rs[s] = append(rs[s], x/f.harness)
				}
			}
		}
		base, harness := "—", "—"
		if f.base != nil {
			base = spread(per(f.base)) + " " + f.unit
		}
		if f.harness > 0 {
			harness = fmt.Sprintf("%g %s", f.harness, f.unit)
			ratios[f.name] = rs
		}
		fmt.Fprintf(&t, " %-26s %s\n", base, harness)
	}
	for _, f := range figures {
		rs, ok := ratios[f.name]
		if !ok {
			continue
		}
		fmt.Fprintf(&t, "%-20s", f.name+" ÷ PH")
		for s := range nServers {
			fmt.Fprintf(&t, " %-26s", spread(rs[s]))
		}
		fmt.Fprintf(&t, " target ≤ 0.1\n")
	}
	fmt.Fprintf(&t, "log payload bytes a session: floor %.0f to %.0f, Penguin %.0f to %.0f\n",
		slices.Min(per(func(r floorRun) float64 { return float64(r.floorLog.PayloadBytes) / float64(r.floorLog.Sessions) })),
		slices.Max(per(func(r floorRun) float64 { return float64(r.floorLog.PayloadBytes) / float64(r.floorLog.Sessions) })),
		slices.Min(per(func(r floorRun) float64 { return float64(r.penguinLog) })), slices.Max(per(func(r floorRun) float64 { return float64(r.penguinLog) })))
	// Penguin above its floor, run by run.
	fmt.Fprintf(&t, "Penguin − floor: wall p50 %s ms, CPU %s ms\n",
		spread(per(func(r floorRun) float64 { return wallP(50)(r, srvPenguin) - wallP(50)(r, srvFloor) })),
		spread(per(func(r floorRun) float64 {
			return ms(r.servers[srvPenguin].cpu-r.servers[srvFloor].cpu) / float64(tasks)
		})))
	fmt.Print(t.String())
}

// orNaN is x, or NaN when x is zero: a figure a server does not have.
func orNaN(x float64) float64 {
	if x == 0 {
		return math.NaN()
	}
	return x
}
