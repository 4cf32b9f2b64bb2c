// Package bench measures Penguin end to end as a user runs it: the real
// penguin binary as a process (`penguin serve`, all in one, SQLite), a
// zero-delay model (`penguin mockllm`, another process), and a client on
// real gRPC. Every figure is set against a baseline measured in the same
// run, so a loaded or slower machine moves both sides alike.
//
// The benchmarks build the binary themselves (once per `go test`), so the
// package costs nothing in `make test`, which runs no benchmark.
package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"gopkg.in/yaml.v3"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// The task every figure is about (docs/performance.md): a new session,
// one prompt, two model turns (a read_file call, then the answer) and one
// read_file; then the session is left idle.
const (
	prompt      = "Read hello.txt and tell me what it says"
	helloFile   = "hello.txt"
	helloText   = "Hello from the benchmark's workspace.\n"
	answerText  = "hello.txt says: Hello from the benchmark's workspace."
	readArgs    = `{"file_path":"hello.txt"}`
	modelID     = "bench-model"
	benchRoute  = "bench"  // the provider route to the mockllm process
	recordRoute = "record" // the route to the in-process recorder of calibrate
)

// The targets, for the table.
const (
	targetOverhead  = 2 * time.Millisecond
	targetIdleRSS   = 16 << 10
	targetColdStart = 30 * time.Millisecond
	targetFixedRSS  = 30 << 20
	targetGrowth    = 26 << 10
)

// The shape of a run.
const (
	defaultTasks     = 200
	defaultRuns      = 3
	warmupTasks      = 5
	serverStartLimit = time.Minute
	// diskSettle is how long the disk figures wait, before the first
	// measured task and after the last, for the store's background
	// checkpoint (every 250 ms) to run.
	diskSettle = time.Second
)

// PenguinHarness's figures for the same task (the TypeScript harness
// Penguin was modelled on, measured on this kind of machine, not in this
// run; docs/performance.md), shown beside ours for scale.
var referenceFigures = map[string]string{
	"wall overhead p50": "19.1 ms", "wall overhead p99": "32.2 ms", "CPU overhead": "16.0 ms",
	"CreateSession p50": "9.85 ms", "idle session RSS": "85 KiB", "cold start to ready": "382 ms",
	"fixed RSS at ready": "99 MiB", "disk growth": "26 KiB",
}

var penguinBuild build

func TestMain(m *testing.M) {
	code := m.Run()
	for _, bd := range []*build{&penguinBuild, &floorBuild} {
		if bd.dir != "" {
			_ = os.RemoveAll(bd.dir)
		}
	}
	os.Exit(code)
}

// penguinBinary builds cmd/penguin once per test process as `make build`
// does, with the sandbox trampoline beside it as `make build` installs
// them, and returns its path; PENGUIN_BENCH_BINARY names a binary to
// measure instead (another build, to compare two versions on the same
// machine).
func penguinBinary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("PENGUIN_BENCH_BINARY"); p != "" {
		return p
	}
	return filepath.Join(penguinBuild.do(b, "penguin-bench-", "penguin", "./cmd/penguin", sandbox.TrampolineName, "./cmd/penguin-sandbox"), "penguin")
}

// build is a directory of binaries built once per test process.
type build struct {
	once sync.Once
	dir  string // TestMain removes it
	err  error
}

// do builds each pair of names and packages of the repository into one
// temporary directory as they ship (e2etest.GoBuildShipped), the first
// time it is called, and returns the directory.
func (bd *build) do(b *testing.B, prefix string, namesAndPkgs ...string) string {
	b.Helper()
	bd.once.Do(func() {
		if bd.dir, bd.err = os.MkdirTemp("", prefix); bd.err != nil {
			return
		}
		repo, err := filepath.Abs("../..")
		if err != nil {
			bd.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for i := 0; i+1 < len(namesAndPkgs) && bd.err == nil; i += 2 {
			bd.err = e2etest.GoBuildShipped(ctx, repo, filepath.Join(bd.dir, namesAndPkgs[i]), namesAndPkgs[i+1])
		}
	})
	if bd.err != nil {
		b.Fatal(bd.err)
	}
	return bd.dir
}

// envInt reads a positive count from the environment, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q is not a positive count", name, v)
	}
	return n
}

// BenchmarkTask runs the benchmark task against `penguin serve` and prints the
// table of docs/performance.md: per-task wall overhead (p50, p99) and CPU overhead over
// the same two model turns and file read done directly, CreateSession,
// the resident memory each idle session adds, cold start to ready and the
// resident memory at ready. PENGUIN_BENCH_RUNS (default 3) servers are
// started one after the other; each runs PENGUIN_BENCH_TASKS (default 200)
// tasks interleaved with as many direct baselines, alternating which goes
// first. The table gives the median of the runs and their spread.
func BenchmarkTask(b *testing.B) {
	bin := penguinBinary(b)
	tasks := envInt(b, "PENGUIN_BENCH_TASKS", defaultTasks)
	runs := envInt(b, "PENGUIN_BENCH_RUNS", defaultRuns)
	var results []runResult
	for range b.N {
		results = results[:0]
		for r := range runs {
			results = append(results, runOnce(b, bin, r, tasks))
		}
	}
	report(b, results, tasks)
}

// runResult is what one server's run measured.
type runResult struct {
	taskWall, directWall []time.Duration // per task
	createSession        []time.Duration
	unaryFloor           []time.Duration // a health check on the same connection
	serverCPU            time.Duration   // the server's CPU over all measured tasks
	directCPU            time.Duration   // the bench's own CPU over all direct baselines
	idleRSS              int64           // resident bytes each idle session added, over the second half
	coldStart            start           // exec to the first SERVING health answer
	versionExec          start           // exec to exit of `penguin version`
	fixedRSS, fixedAnon  int64           // resident bytes at ready, and of them the process's own
	fixedHuge            int64           // and of them the binary's pages mapped in 2 MiB folios
	mockRSS, mockAnon    int64           // the same of the mockllm process at ready
	commits              float64         // the store's write transactions over all measured tasks; NaN when the binary does not count them
	written              int64           // bytes the server wrote to storage over all measured tasks (write_bytes of /proc/PID/io)
	storeGrowth          int64           // growth of the store's files (the database and its WAL) over all measured tasks
}

// rig is one run's setup: a workspace with hello.txt, the model, the
// server, and the direct baseline calibrated against it.
type rig struct {
	ws     string
	home   string // the server's home, which holds its SQLite store
	mock   *mock
	srv    *server
	direct *directTask
}

// setup starts a model with turns for tasks tasks and as many direct
// baselines (plus the warm-up), and a server with extra flags; it fills
// in res's start-up figures and warms both sides up.
func setup(ctx context.Context, b *testing.B, bin string, tasks int, res *runResult, extra ...string) *rig {
	b.Helper()
	dir := b.TempDir()
	root := filepath.Join(dir, "root")
	r := &rig{ws: filepath.Join(root, "ws"), home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(r.ws, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.ws, helloFile), []byte(helloText), 0o644); err != nil {
		b.Fatal(err)
	}

	// Each task and each direct baseline plays two turns, in order.
	r.mock = startMock(b, bin, dir, 2*2*(tasks+warmupTasks))
	rec := emulator.NewServer(taskScript(1)) // the calibration's model, recording what it is sent
	b.Cleanup(rec.Close)
	providers := filepath.Join(dir, "providers.yaml")
	writeFile(b, providers, fmt.Sprintf("providers:\n  - name: %s\n    type: openai\n    base_url: %s/v1\n    api_key_env: BENCH_KEY\n"+
		"  - name: %s\n    type: openai\n    base_url: %s/v1\n    api_key_env: BENCH_KEY\n",
		benchRoute, r.mock.url, recordRoute, rec.URL))

	res.versionExec = execToExit(b, bin, "version")
	r.srv = startServer(b, bin, r.home, root, providers, res, extra...)
	res.mockRSS, res.mockAnon = rss(b, r.mock.proc.Pid()), anonRSS(b, r.mock.proc.Pid())

	r.direct = calibrate(ctx, b, r.srv, rec, r.mock.url, r.ws)
	for range warmupTasks {
		r.srv.task(ctx, b, benchRoute, r.ws)
		r.direct.run(ctx, b)
	}
	return r
}

// stop stops the server and the model.
func (r *rig) stop() {
	r.srv.proc.Stop(10 * time.Second)
	r.mock.proc.Stop(10 * time.Second)
}

// runOnce sets a run up and measures tasks tasks and as many direct
// baselines, interleaved, alternating which goes first.
func runOnce(b *testing.B, bin string, run, tasks int) runResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var res runResult
	r := setup(ctx, b, bin, tasks, &res, "--metrics-listen", "127.0.0.1:0")
	defer r.stop()
	pid := r.srv.proc.Pid()
	metrics := r.srv.proc.WaitLog("metrics listening", nil, "addr", serverStartLimit)
	// The store's background checkpoint of what the warm-up wrote is
	// let run first, and the last tasks' is waited for at the end.
	time.Sleep(diskSettle)
	commits0, written0, store0 := storeCommits(b, metrics), procCount(b, pid, "io", "write_bytes"), storeSize(b, r.home)
	rss0, cpu0 := rss(b, pid), procCPU(b, pid)
	alloc0, gcs0 := goHeap(b, metrics)
	var rssMid, anonMid int64
	for i := range tasks {
		if i == tasks/2 {
			rssMid, anonMid = rss(b, pid), anonRSS(b, pid)
		}
		task := func() {
			t0 := time.Now()
			cs := r.srv.task(ctx, b, benchRoute, r.ws)
			res.taskWall = append(res.taskWall, time.Since(t0))
			res.createSession = append(res.createSession, cs)
		}
		direct := func() {
			c0, t0 := selfCPU(b), time.Now()
			r.direct.run(ctx, b)
			res.directWall = append(res.directWall, time.Since(t0))
			res.directCPU += selfCPU(b) - c0
		}
		if i%2 == 0 {
			task()
			direct()
		} else {
			direct()
			task()
		}
		res.unaryFloor = append(res.unaryFloor, r.srv.healthRTT(ctx, b))
	}
	res.serverCPU = procCPU(b, pid) - cpu0
	rssEnd, anonEnd := rss(b, pid), anonRSS(b, pid)
	alloc, gcs := goHeap(b, metrics)
	alloc, gcs = alloc-alloc0, gcs-gcs0
	time.Sleep(diskSettle)
	res.commits = storeCommits(b, metrics) - commits0
	res.written = procCount(b, pid, "io", "write_bytes") - written0
	res.storeGrowth = storeSize(b, r.home) - store0
	// The second half's growth: by then the bounded caches (SQLite's
	// page caches, the runtime's pools) have filled, and what is left is
	// what each idle session holds.
	res.idleRSS = (rssEnd - rssMid) / int64(tasks-tasks/2)
	b.Logf("run %d: %d tasks; server CPU %.2f ms/task, direct CPU %.2f ms/task; resident growth %.1f KiB/task over the whole run, %.1f over its second half (anonymous %.1f); %d threads at the end; %.1f store transactions, %.1f KiB written, store files grew %.1f KiB, %.1f KiB allocated and %.3f collections per task",
		run+1, tasks, ms(res.serverCPU)/float64(tasks), ms(res.directCPU)/float64(tasks),
		float64(rssEnd-rss0)/1024/float64(tasks), float64(res.idleRSS)/1024, float64(anonEnd-anonMid)/1024/float64(tasks-tasks/2), procStatusCount(b, pid, "Threads"),
		res.commits/float64(tasks), float64(res.written)/1024/float64(tasks), float64(res.storeGrowth)/1024/float64(tasks),
		alloc/1024/float64(tasks), gcs/float64(tasks))
	return res
}

// goHeap reads the bytes the server has allocated and the collections it
// has run so far, from the Go runtime's metrics on its /metrics at addr.
func goHeap(b *testing.B, addr string) (allocated, collections float64) {
	b.Helper()
	allocated, _ = lookupMetric(b, addr, "go_memstats_alloc_bytes_total")
	collections, _ = lookupMetric(b, addr, "go_gc_duration_seconds_count")
	return allocated, collections
}

// BenchmarkTaskProfile runs the benchmark task back to back for
// PENGUIN_BENCH_PROFILE_SECONDS (default 10) against a server started
// with --pprof-listen, and writes to the directory PENGUIN_BENCH_PROFILE
// names (made if missing) its CPU profile, the allocations of those seconds, and the heap
// and goroutines the idle sessions then hold (read them with `go tool
// pprof`); with PENGUIN_BENCH_TRACE set, an execution trace of the same
// seconds too (trace.out, for `go tool trace`; see docs/performance.md
// for the binary it needs). Without PENGUIN_BENCH_PROFILE it is skipped: a profiled server
// is not the one users run.
func BenchmarkTaskProfile(b *testing.B) {
	out := os.Getenv("PENGUIN_BENCH_PROFILE")
	if out == "" {
		b.Skip("set PENGUIN_BENCH_PROFILE to a directory to profile the task")
	}
	// Made before the profiled seconds, not found missing after them.
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	bin := penguinBinary(b)
	seconds := envInt(b, "PENGUIN_BENCH_PROFILE_SECONDS", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for range b.N {
		// A task takes well over 2 ms; the model's script must outlast
		// the profile.
		var res runResult
		r := setup(ctx, b, bin, seconds*1000/2, &res, "--pprof-listen", "127.0.0.1:0")
		addr := r.srv.proc.WaitLog("profiles listening", nil, "addr", serverStartLimit)
		var wg sync.WaitGroup
		fetch := map[string]string{"profile": "profile.pb.gz", "allocs": "allocs.pb.gz"}
		if os.Getenv("PENGUIN_BENCH_TRACE") != "" {
			fetch["trace"] = "trace.out"
		}
		done := make(chan struct{}, len(fetch))
		for p, file := range fetch {
			wg.Go(func() {
				defer func() { done <- struct{}{} }()
				fetchProfile(ctx, b, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, p, seconds), filepath.Join(out, file))
			})
		}
		n := 0
	loop:
		for {
			select {
			case <-done:
				break loop
			default:
			}
			r.srv.task(ctx, b, benchRoute, r.ws)
			n++
		}
		wg.Wait()
		// What the idle sessions those tasks left hold, after a collection.
		fetchProfile(ctx, b, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr), filepath.Join(out, "heap.pb.gz"))
		fetchProfile(ctx, b, fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=1", addr), filepath.Join(out, "goroutines.txt"))
		b.Logf("%d tasks in %d s; profiles in %s", n, seconds, out)
		r.stop()
	}
}

// fetchProfile saves the profile at url to path.
func fetchProfile(ctx context.Context, b *testing.B, url, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Error(err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", url, resp.Status, data)
	}
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		b.Error(err)
	}
}

// taskScript is the model's side of n tasks: a read_file call, then the
// answer, n times over.
func taskScript(n int) emulator.Script {
	s := emulator.Script{}
	for i := range n {
		s.Turns = append(s.Turns,
			emulator.Turn{Name: fmt.Sprintf("read-%d", i), ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: readArgs}},
				Usage: emulator.Usage{Input: 1200, Output: 20}},
			emulator.Turn{Name: fmt.Sprintf("answer-%d", i), Text: answerText, Usage: emulator.Usage{Input: 1260, Output: 14}})
	}
	return s
}

func writeFile(b *testing.B, path, content string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		b.Fatal(err)
	}
}

// mock is a `penguin mockllm` process.
type mock struct {
	proc *netns.Proc
	url  string
}

func startMock(b *testing.B, bin, dir string, turns int) *mock {
	b.Helper()
	script, err := yaml.Marshal(taskScript(turns / 2))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "script.yaml")
	writeFile(b, path, string(script))
	cmd := exec.Command(bin, "mockllm", "--listen", "127.0.0.1:0", "--script", path)
	cmd.Env = e2etest.BaseEnv(b)
	p := netns.Start(b, "mockllm", cmd)
	return &mock{proc: p, url: p.WaitLog("mockllm listening", nil, "url", serverStartLimit)}
}

// start is what starting a process cost: the time from its exec to the
// point measured (its first SERVING health answer, or its exit) and the
// page faults it had taken by then (minflt, the faults served from memory:
// on a machine where each costs 12 to 20 µs, the count that best explains
// the time, and nearly exact from run to run).
type start struct {
	took   time.Duration
	faults int64
}

// execToExit is the cost of starting the binary at all: bin with args (a
// command that only prints its version), from exec to exit.
func execToExit(b *testing.B, bin string, args ...string) start {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = e2etest.BaseEnv(b)
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	took := time.Since(t0)
	return start{took: took, faults: cmd.ProcessState.SysUsage().(*syscall.Rusage).Minflt}
}

// server is a `penguin serve` process and a client of it.
type server struct {
	proc   *netns.Proc
	engine penguinv1.EngineServiceClient
	health healthpb.HealthClient
}

// startServer starts `penguin serve` as a user would (default log level,
// the gateway on) and measures its cold start (to the first SERVING
// health answer, on a new connection) and its resident memory then.
func startServer(b *testing.B, bin, home, root, providers string, res *runResult, extra ...string) *server {
	b.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--providers", providers, "--root", root, "--home", home}, extra...)...)
	cmd.Env = append(e2etest.BaseEnv(b), "BENCH_KEY=unused")
	cmd.Env = slices.DeleteFunc(cmd.Env, func(s string) bool { return strings.HasPrefix(s, "PENGUIN_LOG_LEVEL=") })
	s, cold := startReady(b, "penguin serve", cmd, "gRPC server listening", map[string]string{"server": "penguin"})
	res.coldStart = cold
	res.fixedRSS, res.fixedAnon = rss(b, s.proc.Pid()), anonRSS(b, s.proc.Pid())
	res.fixedHuge = procCount(b, s.proc.Pid(), "smaps_rollup", "FilePmdMapped") << 10
	return s
}

// startReady starts cmd, a server that logs msg (with the fields of
// match) and its address in the field addr once it listens, and
// measures its cold start: from the exec to its first SERVING health
// answer on a new connection (connect), and the page faults it took by
// then.
func startReady(b *testing.B, name string, cmd *exec.Cmd, msg string, match map[string]string) (*server, start) {
	b.Helper()
	t0 := time.Now()
	p := netns.Start(b, name, cmd)
	s := connect(b, p, p.WaitLog(msg, match, "addr", serverStartLimit))
	took := time.Since(t0)
	return s, start{took: took, faults: procFaults(b, p.Pid())}
}

// connect is a client of the server process p at addr, on a new
// connection, once the server answers SERVING to a health check.
func connect(b *testing.B, p *netns.Proc, addr string) *server {
	b.Helper()
	conn, err := grpcclient.New(addr, grpcclient.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	s := &server{proc: p, engine: penguinv1.NewEngineServiceClient(conn), health: healthpb.NewHealthClient(conn)}
	ctx, cancel := context.WithTimeout(context.Background(), serverStartLimit)
	defer cancel()
	for {
		resp, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err != nil {
			b.Fatalf("health check: %v", err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return s
		}
	}
}

// task runs the task on route and checks that it did what was asked: the
// file's text came back from read_file and the answer was given. It
// returns how long CreateSession took.
func (s *server) task(ctx context.Context, b *testing.B, route, ws string) time.Duration {
	created, err := s.tryTask(ctx, route, ws)
	if err != nil {
		b.Fatal(err)
	}
	return created
}

// tryTask is task, returning what went wrong instead of failing the
// benchmark, for goroutines other than the benchmark's own.
func (s *server) tryTask(ctx context.Context, route, ws string) (time.Duration, error) {
	created, _, err := s.runTask(ctx, route, ws, nil)
	return created, err
}

// runTask is tryTask, which also returns the session's id and hands
// every event streamed to keep, when it is not nil.
func (s *server) runTask(ctx context.Context, route, ws string, keep func(*penguinv1.RunEvent)) (time.Duration, string, error) {
	t0 := time.Now()
	sess, err := s.engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: route, ModelId: modelID}, Workspace: ws,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY,
	})
	if err != nil {
		return 0, "", fmt.Errorf("CreateSession: %w", err)
	}
	created := time.Since(t0)
	stream, err := s.engine.Run(ctx, &penguinv1.RunRequest{SessionId: sess.GetSession().GetSessionId(), Prompt: prompt})
	if err != nil {
		return 0, "", fmt.Errorf("Run: %w", err)
	}
	var read, answered bool
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, "", fmt.Errorf("Run: %w", err)
		}
		if keep != nil {
			keep(resp.GetEvent())
		}
		m := resp.GetEvent().GetMessage()
		if o := m.GetToolCallOutput(); o != nil {
			read = strings.Contains(o.GetOutput(), strings.TrimSpace(helloText))
		}
		if t := m.GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			answered = t.GetText() == answerText
		}
	}
	if !read || !answered {
		return 0, "", fmt.Errorf("session %s: the task did not read the file (%v) or answer (%v)", sess.GetSession().GetSessionId(), read, answered)
	}
	return created, sess.GetSession().GetSessionId(), nil
}

// healthRTT is one unary round trip to the server on the task's
// connection: the floor under CreateSession.
func (s *server) healthRTT(ctx context.Context, b *testing.B) time.Duration {
	t0 := time.Now()
	if _, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// directTask is the baseline: the same two model requests the server
// sends (recorded by calibrate), streamed with go-openai straight to the
// same model, and the file read with one system call.
type directTask struct {
	client   *goopenai.Client
	requests [2]goopenai.ChatCompletionRequest
	bodies   [2][]byte // the requests as the server sent them
	file     string
}

// calibrate runs one task on the recording route and keeps the two
// request bodies the server sent, for the direct baseline to send to the
// mockllm process.
func calibrate(ctx context.Context, b *testing.B, srv *server, rec *emulator.Server, mockURL, ws string) *directTask {
	b.Helper()
	srv.task(ctx, b, recordRoute, ws)
	reqs := rec.Requests()
	if len(reqs) != 2 {
		b.Fatalf("the calibration task sent %d model requests, want 2", len(reqs))
	}
	cfg := goopenai.DefaultConfig("unused")
	cfg.BaseURL = mockURL + "/v1"
	cfg.HTTPClient = &http.Client{}
	d := &directTask{client: goopenai.NewClientWithConfig(cfg), file: filepath.Join(ws, helloFile)}
	for i, r := range reqs {
		d.bodies[i] = r.RawBody
		if err := json.Unmarshal(r.RawBody, &d.requests[i]); err != nil {
			b.Fatalf("request %d: %v", i, err)
		}
		if !d.requests[i].Stream || len(d.requests[i].Messages) == 0 {
			b.Fatalf("request %d is not a streamed chat completion: %s", i, r.RawBody)
		}
	}
	return d
}

// run sends the two requests in turn, reading each stream to its end,
// with the file read between them.
func (d *directTask) run(ctx context.Context, b *testing.B) {
	for i := range d.requests {
		s, err := d.client.CreateChatCompletionStream(ctx, d.requests[i])
		if err != nil {
			b.Fatalf("direct request %d: %v", i, err)
		}
		var text strings.Builder
		calls := 0
		for {
			chunk, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatalf("direct request %d: %v", i, err)
			}
			for _, c := range chunk.Choices {
				text.WriteString(c.Delta.Content)
				calls += len(c.Delta.ToolCalls)
			}
		}
		s.Close()
		if i == 0 {
			if calls == 0 {
				b.Fatal("the direct first turn has no tool call")
			}
			data, err := os.ReadFile(d.file)
			if err != nil || string(data) != helloText {
				b.Fatalf("direct read: %v %q", err, data)
			}
		} else if text.String() != answerText {
			b.Fatalf("direct answer %q", text.String())
		}
	}
}

// procCPU is a process's user plus system CPU time so far, from
// /proc/PID/stat (utime and stime, its fields 14 and 15, in clock ticks
// of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(procStat(b, pid, 14)+procStat(b, pid, 15)) * tick
}

// procFaults is the page faults a process has taken so far that needed
// no I/O (minflt, field 10 of /proc/PID/stat), all its threads together.
func procFaults(b *testing.B, pid int) int64 { return procStat(b, pid, 10) }

// procStat reads field n (counted from 1, as proc(5) numbers them) of
// /proc/PID/stat, a number.
func procStat(b *testing.B, pid, n int) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The command name, field 2, may hold spaces: the fields are counted
	// from the state, field 3, after its closing parenthesis.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	v, err := strconv.ParseInt(f[n-3], 10, 64)
	if err != nil {
		b.Fatalf("/proc/%d/stat field %d: %v", pid, n, err)
	}
	return v
}

// selfCPU is this process's user plus system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is a process's resident set size, from /proc/PID/status.
func rss(b *testing.B, pid int) int64 { return procStatus(b, pid, "VmRSS") }

// anonRSS is the part of a process's resident set that is its own
// (heap, stacks): RSS less the pages of files it maps, of which the
// binary's are most and are shared with every process running it.
func anonRSS(b *testing.B, pid int) int64 { return procStatus(b, pid, "RssAnon") }

// procStatus reads one size field of /proc/PID/status, in bytes.
func procStatus(b *testing.B, pid int, field string) int64 {
	return procStatusCount(b, pid, field) << 10
}

// procStatusCount reads one number of /proc/PID/status (sizes are in KiB).
func procStatusCount(b *testing.B, pid int, field string) int64 {
	return procCount(b, pid, "status", field)
}

// procCount reads one number of /proc/PID/file, a file of "Field: N"
// lines (sizes are in KiB in status and smaps_rollup, in bytes in io).
func procCount(b *testing.B, pid int, file, field string) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("%s %q: %v", field, v, err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/%s", field, pid, file)
	return 0
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// row is one line of the table: the figure of each run, its baseline of
// each run, and how to print them.
type row struct {
	name     string
	unit     string // "ms", "KiB", "MiB", or "" for a count
	ours     []float64
	baseline []float64 // in the same unit; nil when there is none
	baseName string
	target   float64 // on ours; 0 when none
	metric   string  // the ReportMetric unit of the median
}

// perRun is f of each run's result.
func perRun[R any](results []R, f func(r R) float64) []float64 {
	out := make([]float64, len(results))
	for i, r := range results {
		out[i] = f(r)
	}
	return out
}

func report(b *testing.B, results []runResult, tasks int) {
	per := func(f func(r runResult) float64) []float64 { return perRun(results, f) }
	kib := func(n int64) float64 { return float64(n) / 1024 }
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	rows := []row{
		{name: "wall overhead p50", unit: "ms", metric: "wall-overhead-p50-ms", target: ms(targetOverhead),
			ours:     per(func(r runResult) float64 { return ms(percentile(r.taskWall, 50) - percentile(r.directWall, 50)) }),
			baseline: per(func(r runResult) float64 { return ms(percentile(r.directWall, 50)) }), baseName: "direct task p50"},
		{name: "wall overhead p99", unit: "ms", metric: "wall-overhead-p99-ms", target: ms(targetOverhead),
			ours:     per(func(r runResult) float64 { return ms(percentile(r.taskWall, 99) - percentile(r.directWall, 99)) }),
			baseline: per(func(r runResult) float64 { return ms(percentile(r.directWall, 99)) }), baseName: "direct task p99"},
		{name: "CPU overhead", unit: "ms", metric: "cpu-overhead-ms", target: ms(targetOverhead),
			ours:     per(func(r runResult) float64 { return (ms(r.serverCPU) - ms(r.directCPU)) / float64(tasks) }),
			baseline: per(func(r runResult) float64 { return ms(r.directCPU) / float64(tasks) }), baseName: "direct task CPU"},
		{name: "CreateSession p50", unit: "ms", metric: "create-session-p50-ms",
			ours:     per(func(r runResult) float64 { return ms(percentile(r.createSession, 50)) }),
			baseline: per(func(r runResult) float64 { return ms(percentile(r.unaryFloor, 50)) }), baseName: "unary call p50"},
		{name: "idle session RSS", unit: "KiB", metric: "idle-session-KiB", target: kib(targetIdleRSS),
			ours: per(func(r runResult) float64 { return kib(r.idleRSS) })},
		{name: "cold start to ready", unit: "ms", metric: "cold-start-ms", target: ms(targetColdStart),
			ours:     per(func(r runResult) float64 { return ms(r.coldStart.took) }),
			baseline: per(func(r runResult) float64 { return ms(r.versionExec.took) }), baseName: "exec of `penguin version`"},
		{name: "page faults to ready", unit: "", metric: "ready-faults",
			ours:     per(func(r runResult) float64 { return float64(r.coldStart.faults) }),
			baseline: per(func(r runResult) float64 { return float64(r.versionExec.faults) }), baseName: "of `penguin version`"},
		{name: "fixed RSS at ready", unit: "MiB", metric: "fixed-rss-MiB", target: mib(targetFixedRSS),
			ours:     per(func(r runResult) float64 { return mib(r.fixedRSS) }),
			baseline: per(func(r runResult) float64 { return mib(r.mockRSS) }), baseName: "mockllm at ready"},
		{name: "  of it anonymous", unit: "MiB", metric: "fixed-anon-rss-MiB",
			ours:     per(func(r runResult) float64 { return mib(r.fixedAnon) }),
			baseline: per(func(r runResult) float64 { return mib(r.mockAnon) }), baseName: "mockllm at ready"},
		{name: "store transactions", unit: "", metric: "store-transactions",
			ours: per(func(r runResult) float64 { return r.commits / float64(tasks) })},
		{name: "disk growth", unit: "KiB", metric: "store-growth-KiB", target: kib(targetGrowth),
			ours: per(func(r runResult) float64 { return kib(r.storeGrowth) / float64(tasks) })},
		{name: "disk written", unit: "KiB", metric: "disk-written-KiB",
			ours: per(func(r runResult) float64 { return kib(r.written) / float64(tasks) })},
		// A binary the linker has just written is in the page cache in 2
		// MiB folios, each mapped whole (docs/performance.md): this row
		// says how much of the RSS that is.
		{name: "  of it 2 MiB maps", unit: "MiB", metric: "fixed-pmd-file-MiB",
			ours: per(func(r runResult) float64 { return mib(r.fixedHuge) })},
	}
	var t strings.Builder
	fmt.Fprintf(&t, "the benchmark task, %d runs of %d tasks (median of the runs [min–max])\n", len(results), tasks)
	fmt.Fprintf(&t, "%-20s %-26s %-9s %-7s %-52s %s\n", "per task", "Penguin", "target", "met", "baseline, same run", "PenguinHarness")
	for _, r := range rows {
		med := median(r.ours)
		if math.IsNaN(med) { // a binary that does not report the figure
			continue
		}
		b.ReportMetric(med, r.metric)
		target, met := "—", "—"
		if r.target > 0 {
			target = fmt.Sprintf("≤ %g %s", r.target, r.unit)
			met = fmt.Sprintf("%v", slices.Max(r.ours) <= r.target)
			if slices.Max(r.ours) > r.target && med <= r.target {
				met = "median"
			}
		}
		base := "—"
		if r.baseline != nil {
			base = fmt.Sprintf("%s (%s)", strings.TrimSpace(spread(r.baseline)+" "+r.unit), r.baseName)
		}
		fmt.Fprintf(&t, "%-20s %-26s %-9s %-7s %-52s %s\n", r.name, spread(r.ours)+" "+r.unit, target, met, base, referenceFigures[r.name])
	}
	// The benchmark's own log is cut at ten lines; the table goes out
	// whole.
	fmt.Print(t.String())
}

// spread prints the median of xs and their range.
func spread(xs []float64) string {
	return fmt.Sprintf("%s [%s–%s]", figure(median(xs)), figure(slices.Min(xs)), figure(slices.Max(xs)))
}

// figure prints x to three significant digits, and a count of
// thousands or more (page faults) whole rather than with an exponent.
func figure(x float64) string {
	if math.Abs(x) >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// storeCommits reads the store's write transactions so far from the
// server's /metrics at addr; NaN when the binary does not export them.
func storeCommits(b *testing.B, addr string) float64 {
	b.Helper()
	if n, ok := lookupMetric(b, addr, "penguin_engine_store_commits_total"); ok {
		return n
	}
	return math.NaN()
}

// storeSize is the size of the SQLite store's files in home: the
// database, its WAL and the WAL's index.
func storeSize(b *testing.B, home string) int64 {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(home, "penguin.db*"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no store in %s: %v", home, err)
	}
	var n int64
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		n += info.Size()
	}
	return n
}
