package scaleout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
)

// The ports every service listens on, each on its own host's address.
const (
	llmPort     = 7421
	envPort     = 7422
	enginePort  = 7423
	metricsPort = 9090
	mockPort    = 7429
)

// envName is the DNS name the engines reach the environment replicas by,
// as a headless Service gives one address per pod.
const envName = "environment.penguin.test"

// leaseTTL is the engines' run lease: short, so a dead replica's sessions
// are free again within seconds.
const leaseTTL = 3 * time.Second

// hostsScript is the model of the separate-hosts test. Every turn is
// matched by a marker in the last message, so that the sessions' requests
// get their own answers whichever engine sends them.
const hostsScript = `turns:
  - match: "S1-ONE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s1","cmd":"echo s1-first-ok"}'}]
  - match: "s1-first-ok"
    text: "S1 first run done."
    usage: {input: 200, output: 6}
  - match: "S2-ONE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s2","cmd":"echo s2-first-ok"}'}]
  - match: "s2-first-ok"
    text: "S2 first run done."
  - match: "S1-TWO"
    text: "S1 second run done on the other engine."
  - match: "S3-ONE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s3","cmd":"echo s3-approved"}'}]
  - match: "S3-steer"
    text: "S3 done; I read the steering."
  - match: "S4-ONE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s4","cmd":"echo s4-started; sleep 120"}'}]
  - match: "S1-THREE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s1 long","cmd":"echo s1-started; sleep 120"}'}]
  - match: "s1-started"
    text: "The command's host went away."
  - match: "S1-FOUR"
    tool_calls: [{name: exec_command, arguments: '{"description":"s1 again","cmd":"echo s1-fresh-env"}'}]
  - match: "s1-fresh-env"
    text: "S1 runs on a fresh environment."
  - match: "S2-TWO"
    tool_calls: [{name: exec_command, arguments: '{"description":"s2 long","cmd":"echo s2-started; sleep 120"}'}]
  - match: "S2-THREE"
    tool_calls: [{name: exec_command, arguments: '{"description":"s2 after","cmd":"echo s2-after"}'}]
  - match: "s2-after"
    text: "S2 resumed on the other engine."
  - match: "S2-FOUR"
    text: "S2 goes on."
`

// cluster is the deployment of TestSeparateHosts: one host per replica.
type cluster struct {
	token      string
	workspace  string
	db         *pgxpool.Pool // the test's own connection to PostgreSQL
	schema     string        // the store's schema
	envs       map[string]*replica
	engines    map[string]*replica
	llm        *replica
	clients    map[string]penguinv1.EngineServiceClient // by engine host name
	envByAddr  map[string]*replica
	engineList []string
}

// replica is one service process on its own host.
type replica struct {
	host *netns.Host
	proc *netns.Proc
	addr string // the gRPC address, on the host's own IP
}

// TestSeparateHosts runs Penguin as a scaled-out deployment: two engine
// replicas, two environment replicas and one llm replica, each on a host
// of its own (a network namespace with its own address), with PostgreSQL
// reached over the network and the environments found through one DNS
// name with an address per replica. Sessions run across the engines;
// calls for a run reach the replica that owns it; an environment replica
// and then an engine replica are killed with SIGKILL in the middle of
// work, and every committed message survives and the sessions go on.
func TestSeparateHosts(t *testing.T) {
	n := netns.New(t)
	ctx := testkit.Context(t, 150*time.Second)
	c := &cluster{token: randomHex(16), envs: map[string]*replica{}, engines: map[string]*replica{}, clients: map[string]penguinv1.EngineServiceClient{}, envByAddr: map[string]*replica{}}

	// PostgreSQL on the test machine's loopback, reached by the engines
	// through a forwarder on the bridge, on a schema of this test's own.
	storeURL := c.freshSchema(ctx, t, n)

	// A workspace directory every environment replica can serve (in a
	// cluster, each pod has its own; here they share the disk).
	root := t.TempDir()
	c.workspace = filepath.Join(root, "ws")
	if err := os.MkdirAll(c.workspace, 0o755); err != nil {
		t.Fatal(err)
	}

	llmHost := n.AddHost("llm")
	envHosts := []*netns.Host{n.AddHost("env-a"), n.AddHost("env-b")}
	engineHosts := []*netns.Host{n.AddHost("engine-a"), n.AddHost("engine-b")}

	mock := c.start(t, llmHost, "mockllm", nil, "mockllm", "--listen", fmt.Sprintf("127.0.0.1:%d", mockPort),
		"--script", writeFile(t, t.TempDir(), "script.yaml", hostsScript))
	mock.WaitLog("mockllm listening", nil, "", 30*time.Second)
	providers := providersFile(t, fmt.Sprintf("http://127.0.0.1:%d", mockPort))
	c.llm = c.serve(t, llmHost, llmPort, []string{"MOCK_API_KEY=unused"}, "llm", "--providers", providers)
	var envAddrs []netip.Addr
	for _, h := range envHosts {
		r := c.serve(t, h, envPort, nil, "environment", "--root", root)
		c.envs[h.Name] = r
		c.envByAddr[r.addr] = r
		envAddrs = append(envAddrs, h.IP)
	}
	// The engines' agent leaves durable tasks off: this test takes a dead
	// replica's session over by hand (a new Run once the lease has run
	// out). A durable task's resumption by itself is tested by e2e/engine
	// (kills and restarts) and by the Kubernetes suite's rollout.
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "system_config.yaml"), []byte("durable_tasks: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range engineHosts {
		h.SetHosts(map[string][]netip.Addr{envName: envAddrs})
		r := c.serve(t, h, enginePort, nil, "engine",
			"--llm", c.llm.addr, "--environment", fmt.Sprintf("%s:%d", envName, envPort),
			"--store", storeURL, "--lease-ttl", leaseTTL.String(), "--home", t.TempDir(), "--agent-state", agentDir)
		c.engines[h.Name] = r
		c.engineList = append(c.engineList, h.Name)
	}
	for _, r := range c.all() {
		if err := netns.WaitServing(ctx, r.addr, ""); err != nil {
			t.Fatalf("%s: %v", r.host.Name, err)
		}
	}
	for name, r := range c.engines {
		c.clients[name] = e2etest.DialEngine(t, r.addr, c.token)
	}
	a, b := c.clients["engine-a"], c.clients["engine-b"]

	var s1, s2 string
	t.Run("sessions across engines", func(t *testing.T) {
		s1 = newSessionMode(ctx, t, a, c.workspace, penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL)
		s2 = newSessionMode(ctx, t, b, c.workspace, penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL)
		if r := runToEnd(ctx, t, a, s1, "S1-ONE: say hello"); !strings.Contains(r.text(), "s1-first-ok") {
			t.Fatalf("S1's tool did not run:\n%s", r.text())
		}
		if r := runToEnd(ctx, t, b, s2, "S2-ONE: say hello"); !strings.Contains(r.text(), "s2-first-ok") {
			t.Fatalf("S2's tool did not run:\n%s", r.text())
		}
		// A session is not bound to an engine: its next run goes to the
		// other one, which rebuilds the context from the shared log.
		runToEnd(ctx, t, b, s1, "S1-TWO: and again")
		// Each session is bound to the environment replica that created
		// its environment, at the address that replica advertised.
		for _, id := range []string{s1, s2} {
			addr := c.envAddr(ctx, t, id)
			if c.envByAddr[addr] == nil {
				t.Fatalf("session %s is bound to environment address %q, not to a replica's advertised address", id, addr)
			}
			t.Logf("session %s is bound to the environment replica at %s", id, addr)
		}
	})

	t.Run("calls reach the owning engine", func(t *testing.T) {
		s3 := newSessionMode(ctx, t, a, c.workspace, penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK)
		run := startRun(ctx, t, a, s3, "S3-ONE: ask first")
		ask := run.waitEvent(t, 30*time.Second, "an approval request", func(ev *penguinv1.RunEvent) bool { return ev.GetApprovalRequest() != nil })
		callID := ask.GetApprovalRequest().GetToolCall().GetToolCallId()

		// Another replica cannot start a run on the session...
		if _, err := runErr(ctx, b, s3, "S3-other"); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("Run on engine-b while engine-a runs the session: %v, want FailedPrecondition", err)
		}
		// ...but Attach, Steer and Approve sent to it reach engine-a.
		attach, err := b.Attach(ctx, &penguinv1.AttachRequest{SessionId: s3, UntilIdle: true})
		if err != nil {
			t.Fatal(err)
		}
		type attachResult struct {
			evs []*penguinv1.RunEvent
			err error // how the stream ended; nil at its end
		}
		attached := make(chan attachResult, 1)
		first := make(chan struct{})
		go func() {
			var evs []*penguinv1.RunEvent
			for {
				resp, err := attach.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						err = nil
					}
					attached <- attachResult{evs, err}
					return
				}
				if evs = append(evs, resp.GetEvent()); len(evs) == 1 {
					close(first)
				}
			}
		}()
		// The Attach is under way (and so was passed on to engine-a: on
		// engine-b it would have been refused) before the run goes on.
		select {
		case <-first:
		case res := <-attached:
			t.Fatalf("the Attach through engine-b ended at once: %v", res.err)
		case <-time.After(30 * time.Second):
			t.Fatal("the Attach through engine-b sent nothing")
		}
		if _, err := b.Steer(ctx, &penguinv1.SteerRequest{SessionId: s3, Text: "S3-steer: mind the output"}); err != nil {
			t.Fatalf("Steer through engine-b: %v", err)
		}
		if _, err := b.Approve(ctx, &penguinv1.ApproveRequest{SessionId: s3, ToolCallId: callID, Decision: penguinv1.Decision_DECISION_ALLOW}); err != nil {
			t.Fatalf("Approve through engine-b: %v", err)
		}
		r := run.wait(t, 60*time.Second)
		if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || !strings.Contains(r.text(), "s3-approved") || !strings.Contains(r.text(), "I read the steering") {
			t.Fatalf("S3 ended %v (%v):\n%s", r.final, r.err, r.text())
		}
		var sawOutput, sawIdle bool
		select {
		case res := <-attached:
			for _, ev := range res.evs {
				sawOutput = sawOutput || strings.Contains(ev.GetMessage().GetToolCallOutput().GetOutput(), "s3-approved")
				sawIdle = sawIdle || ev.GetState().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE
			}
			if res.err != nil || !sawOutput || !sawIdle {
				t.Fatalf("the Attach through engine-b ended with %v after %d events; saw the output %v, the idle state %v", res.err, len(res.evs), sawOutput, sawIdle)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the Attach through engine-b did not end when the session went idle")
		}

		// Abort sent to engine-b stops the run engine-a owns.
		s4 := newSessionMode(ctx, t, a, c.workspace, penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL)
		run = startRun(ctx, t, a, s4, "S4-ONE: wait")
		run.waitEvent(t, 30*time.Second, "s4's command output", partialOutput("s4-started"))
		resp, err := b.Abort(ctx, &penguinv1.AbortRequest{SessionId: s4, Reason: "stopped from engine-b"})
		if err != nil || !resp.GetAborted() {
			t.Fatalf("Abort through engine-b: %v %v", resp, err)
		}
		if r := run.wait(t, 30*time.Second); r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_ABORTED {
			t.Fatalf("S4 ended %v (%v), want aborted", r.final, r.err)
		}
	})

	t.Run("an environment replica dies mid-command", func(t *testing.T) {
		run := startRun(ctx, t, b, s1, "S1-THREE: run the long one")
		run.waitEvent(t, 30*time.Second, "s1's command output", partialOutput("s1-started"))
		dead := c.envByAddr[c.envAddr(ctx, t, s1)]
		if dead == nil {
			t.Fatalf("S1 is bound to %q, not to a replica's advertised address", c.envAddr(ctx, t, s1))
		}
		before := e2etest.History(ctx, t, b, s1)
		dead.proc.Kill()

		// The tool call ends with an output that says what happened, and
		// the task goes on to its end.
		r := run.wait(t, 60*time.Second)
		if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			t.Fatalf("S1 ended %v (%v):\n%s", r.final, r.err, r.text())
		}
		out := lastToolOutput(r.events)
		if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(out.GetOutput(), "s1-started") ||
			!strings.Contains(strings.ToLower(out.GetOutput()), "environment") {
			t.Fatalf("the interrupted tool call ended %v with %q; want a failed output that says the environment is gone", out.GetStopReason(), out.GetOutput())
		}
		// The next run gets a fresh environment on the other replica.
		r = runToEnd(ctx, t, a, s1, "S1-FOUR: once more")
		if !strings.Contains(r.text(), "s1-fresh-env") {
			t.Fatalf("S1's tool did not run on a fresh environment:\n%s", r.text())
		}
		if addr := c.envAddr(ctx, t, s1); addr == dead.addr || c.envByAddr[addr] == nil {
			t.Fatalf("S1 is bound to %q after %s died", addr, dead.addr)
		}
		requirePrefix(t, before, e2etest.History(ctx, t, a, s1))
	})

	t.Run("an engine replica dies mid-run", func(t *testing.T) {
		run := startRun(ctx, t, a, s2, "S2-TWO: run the long one")
		run.waitEvent(t, 30*time.Second, "s2's command output", partialOutput("s2-started"))
		before := e2etest.History(ctx, t, b, s2)
		c.engines["engine-a"].proc.Kill()
		if r := run.wait(t, 30*time.Second); r.err == nil {
			t.Fatalf("the Run stream of the killed engine ended cleanly: %v", r.final)
		}

		// The dead replica's lease holds the session until it runs out
		// (no second run can start meanwhile); then the session resumes
		// on engine-b from the log.
		killed := time.Now()
		refused := 0
		var started *runStream
		var lastErr error
		wctx, cancel := context.WithTimeout(ctx, 4*leaseTTL)
		err := eventually.Wait(wctx, func() bool {
			started, lastErr = runErr(ctx, b, s2, "S2-THREE: carry on")
			if status.Code(lastErr) == codes.FailedPrecondition {
				refused++
				return false
			}
			return true
		})
		cancel()
		if err != nil || lastErr != nil {
			t.Fatalf("Run on engine-b after engine-a died: %v", lastErr)
		}
		r := started.wait(t, 60*time.Second)
		t.Logf("engine-b took the session over %s after engine-a died (lease %s; %d runs refused before)", time.Since(killed).Round(10*time.Millisecond), leaseTTL, refused)
		if refused == 0 {
			t.Errorf("engine-b started a run at once although engine-a's lease (%s) was still live", leaseTTL)
		}
		if r.err != nil || r.final.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED || !strings.Contains(r.text(), "s2-after") {
			t.Fatalf("S2 resumed on engine-b ended %v (%v):\n%s", r.final, r.err, r.text())
		}
		runToEnd(ctx, t, b, s2, "S2-FOUR: and on")
		after := e2etest.History(ctx, t, b, s2)
		requirePrefix(t, before, after)
		// Every tool call of the log, the interrupted one included, has
		// exactly one output.
		calls, outputs := map[string]int{}, map[string]int{}
		for _, ev := range after {
			if tc := ev.GetMessage().GetToolCall(); tc != nil {
				calls[tc.GetToolCallId()]++
			}
			if o := ev.GetMessage().GetToolCallOutput(); o != nil {
				outputs[o.GetToolCallId()]++
			}
		}
		for id, n := range calls {
			if n != 1 || outputs[id] != 1 {
				t.Errorf("tool call %s: %d calls and %d outputs in the log", id, n, outputs[id])
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		for _, check := range []struct {
			host string
			want []string
		}{
			{"llm", []string{"penguin_llm_requests_total", "penguin_llm_tokens_total", "penguin_llm_streams_active"}},
			{"engine-b", []string{"penguin_engine_runs_total", "penguin_engine_turns_total", "penguin_engine_sessions_created_total", "penguin_engine_approvals_total", "penguin_engine_forwarded_calls_total"}},
		} {
			body := scrape(ctx, t, c.host(check.host), metricsPort)
			for _, m := range check.want {
				if !strings.Contains(body, "\n"+m) {
					t.Errorf("%s's /metrics lacks %s", check.host, m)
				}
			}
		}
		for _, r := range c.envs {
			select {
			case <-r.proc.Exited():
				continue
			default:
			}
			body := scrape(ctx, t, r.host, metricsPort)
			for _, m := range []string{"penguin_environment_tool_runs_total", "penguin_environment_environments_active", "penguin_environment_command_sessions_active"} {
				if !strings.Contains(body, "\n"+m) {
					t.Errorf("%s's /metrics lacks %s", r.host.Name, m)
				}
			}
		}
	})
}

// start runs a penguin command on host h with the cluster's token.
func (c *cluster) start(t *testing.T, h *netns.Host, name string, env []string, args ...string) *netns.Proc {
	t.Helper()
	cmd := h.Command(penguinBin, args...)
	cmd.Env = append(append(e2etest.BaseEnv(t), "PENGUIN_AUTH_TOKEN="+c.token), env...)
	return netns.Start(t, name+" on "+h.Name, cmd)
}

// serve runs `penguin serve SERVICE` on host h, listening and advertising
// on the host's own address, with metrics on the metrics port.
func (c *cluster) serve(t *testing.T, h *netns.Host, port int, env []string, service string, args ...string) *replica {
	t.Helper()
	addr := h.Addr(port)
	full := append([]string{"serve", service, "--listen", addr, "--metrics-listen", h.Addr(metricsPort)}, args...)
	if service != "llm" {
		full = append(full, "--advertise", addr)
	}
	return &replica{host: h, proc: c.start(t, h, "serve "+service, env, full...), addr: addr}
}

func (c *cluster) all() []*replica {
	out := []*replica{c.llm}
	for _, r := range c.envs {
		out = append(out, r)
	}
	for _, r := range c.engines {
		out = append(out, r)
	}
	return out
}

func (c *cluster) host(name string) *netns.Host {
	for _, r := range c.all() {
		if r.host.Name == name {
			return r.host
		}
	}
	panic("no host " + name)
}

// freshSchema creates a schema of the test's own on the test PostgreSQL,
// dropped when the test ends, and returns the store URL by which the
// engines reach it through a forwarder on n's bridge.
func (c *cluster) freshSchema(ctx context.Context, t *testing.T, n *netns.Network) string {
	t.Helper()
	private := pgtest.URL(t, "penguin_scaleout")
	u, err := url.Parse(private)
	if err != nil {
		t.Fatal(err)
	}
	// The test reads the schema directly; the engines reach PostgreSQL
	// through the forwarder.
	admin, err := pgxpool.New(ctx, private)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	c.db, c.schema = admin, u.Query().Get("search_path")
	u.Host = n.Forward(u.Host)
	return u.String()
}

// envAddr returns the address of the environment replica session id is
// bound to, as the store records it.
func (c *cluster) envAddr(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	var addr string
	err := c.db.QueryRow(ctx, `SELECT environment_addr FROM `+pgx.Identifier{c.schema, "sessions"}.Sanitize()+` WHERE id = $1`, id).Scan(&addr)
	if err != nil {
		t.Fatalf("read the environment address of %s: %v", id, err)
	}
	return addr
}

// newSessionMode creates a session on the emulator's route with approval
// mode mode and no sandbox.
func newSessionMode(ctx context.Context, t testing.TB, engine penguinv1.EngineServiceClient, ws string, mode penguinv1.ApprovalMode) string {
	t.Helper()
	resp, err := engine.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model:        &penguinv1.ModelRef{Provider: "mock", ModelId: "scripted"},
		Workspace:    ws,
		ApprovalMode: mode,
		SandboxMode:  penguinv1.SandboxMode_SANDBOX_MODE_NONE,
	})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return resp.GetSession().GetSessionId()
}

// runErr starts a Run and waits for its first event, so that a refusal
// (which gRPC reports at the first Recv) comes back as an error.
func runErr(ctx context.Context, engine penguinv1.EngineServiceClient, id, prompt string) (*runStream, error) {
	stream, err := engine.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: prompt})
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	rs := &runStream{events: make(chan *penguinv1.RunEvent, 1024), done: make(chan runResult, 1)}
	rs.events <- first.GetEvent()
	go func() {
		r := readRun(stream, rs.events)
		r.events = append([]*penguinv1.RunEvent{first.GetEvent()}, r.events...)
		rs.done <- r
	}()
	return rs, nil
}

// partialOutput matches a streamed piece of tool output containing s.
func partialOutput(s string) func(*penguinv1.RunEvent) bool {
	return func(ev *penguinv1.RunEvent) bool {
		return strings.Contains(ev.GetMessage().GetPartialToolCallOutput().GetOutput(), s)
	}
}

// lastToolOutput returns the last complete tool output among events.
func lastToolOutput(events []*penguinv1.RunEvent) *penguinv1.ToolCallOutput {
	var out *penguinv1.ToolCallOutput
	for _, ev := range events {
		if o := ev.GetMessage().GetToolCallOutput(); o != nil {
			out = o
		}
	}
	return out
}

// requirePrefix fails unless every event of before is in after, at the
// same place with the same sequence number and content.
func requirePrefix(t *testing.T, before, after []*penguinv1.RunEvent) {
	t.Helper()
	if len(after) < len(before) {
		t.Fatalf("the history shrank from %d to %d events", len(before), len(after))
	}
	for i, ev := range before {
		if !proto.Equal(ev, after[i]) {
			t.Fatalf("committed event %d changed:\nbefore %v\nafter  %v", i, ev, after[i])
		}
	}
}

// scrape reads the Prometheus metrics of host h.
func scrape(ctx context.Context, t *testing.T, h *netns.Host, port int) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.Addr(port)+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", h.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", h.Name, resp.StatusCode, err)
	}
	return string(body)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
