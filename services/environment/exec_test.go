package environment_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
	"github.com/penguin-agent/penguin/services/environment"
)

func TestExecCommand(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()

	r := h.exec(env, "exec_command", `{"description":"greet","cmd":"echo hello; echo oops >&2; pwd"}`)
	wantStop(t, r, ok, "hello\noops\n"+ws+"\n", "[exit code 0]")
	r = h.exec(env, "exec_command", `{"cmd":"echo partial; exit 7"}`)
	wantStop(t, r, failed, "partial", "[exit code 7]")
	r = h.exec(env, "exec_command", `{"cmd":"true"}`)
	wantStop(t, r, ok, "[no output]\n[exit code 0]")
	// tty false runs on pipes: the command sees no terminal.
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"[ -t 1 ] && echo tty || echo pipe","tty":false}`), ok, "pipe\n", "[exit code 0]")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"[ -t 1 ] && echo tty || echo pipe"}`), ok, "tty\n", "[exit code 0]")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"true","tty":"no"}`), failed, "tty")

	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"pwd","workdir":"sub"}`), ok, filepath.Join(ws, "sub"))
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"pwd","workdir":"nope"}`), failed, `workdir "nope" does not exist`)
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"pwd","workdir":"/"}`), failed, "not inside the workspace")

	// Streaming: the deltas arrive while the command runs.
	r = h.exec(env, "exec_command", `{"cmd":"for i in 1 2 3; do echo tick $i; sleep 0.2; done"}`)
	wantStop(t, r, ok, "tick 1\ntick 2\ntick 3\n")
	if len(r.deltas()) < 3 {
		t.Fatalf("expected streamed deltas, got %q", r.deltas())
	}

	// A command that outlives its foreground window moves to the
	// background and is driven by input_command.
	// The window is generous for a loaded machine; the command outlives
	// it by far.
	r = h.exec(env, "exec_command", `{"cmd":"echo started; sleep 4; echo finished","yield_time_ms":1500}`)
	wantStop(t, r, ok, "started", "[still running as process_id ")
	pid := strings.TrimSuffix(strings.Fields(r.text()[strings.Index(r.text(), "process_id "):])[1], ":")
	procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(procs.GetProcesses()) != 1 || procs.GetProcesses()[0].GetProcessId() != pid ||
		procs.GetProcesses()[0].GetState() != penguinv1.ProcessState_PROCESS_STATE_RUNNING || procs.GetProcesses()[0].GetPid() == 0 {
		t.Fatalf("ListProcesses: %v %v", procs, err)
	}
	r = h.exec(env, "input_command", args(map[string]any{"process_id": pid}))
	wantStop(t, r, ok, "finished", "[exit code 0]")
	if strings.Contains(r.text(), "started") {
		t.Fatalf("input_command repeated delivered output:\n%s", r.text())
	}
	wantStop(t, h.exec(env, "input_command", args(map[string]any{"process_id": pid})), failed, "no command session")

	// kill_command hands back what nobody has read yet.
	r = h.exec(env, "exec_command", `{"cmd":"echo one; sleep 4; echo two; touch marker; sleep 1000","yield_time_ms":1500}`)
	wantStop(t, r, ok, "one", "[still running as process_id ")
	if strings.Contains(r.text(), "two") {
		t.Fatalf("the command was too fast for this test:\n%s", r.text())
	}
	pid = strings.TrimSuffix(strings.Fields(r.text()[strings.Index(r.text(), "process_id "):])[1], ":")
	eventually(t, 20*time.Second, "the command to print its second line", func() bool {
		_, err := os.Stat(filepath.Join(ws, "marker"))
		return err == nil
	})
	r = h.exec(env, "kill_command", args(map[string]any{"process_id": pid}))
	wantStop(t, r, ok, "two\n", "[killed process_id "+pid)
	if strings.Contains(r.text(), "one") {
		t.Fatalf("kill_command repeated delivered output:\n%s", r.text())
	}
	wantStop(t, h.exec(env, "kill_command", args(map[string]any{"process_id": pid})), failed, "no command session")
}

func TestInteractiveSession(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	r := h.exec(env, "exec_command", `{"cmd":"python3 -i -q","yield_time_ms":1000}`)
	wantStop(t, r, ok, "[still running as process_id ")
	pid := strings.TrimSuffix(strings.Fields(r.text()[strings.Index(r.text(), "process_id "):])[1], ":")

	// Poll until the output contains want, the way a model would.
	prior := r.text()
	until := func(chars, want string) string {
		t.Helper()
		var seen strings.Builder
		seen.WriteString(prior)
		prior = ""
		deadline := time.Now().Add(30 * time.Second)
		first := true
		for !strings.Contains(seen.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q after input %q; output:\n%s", want, chars, seen.String())
			}
			a := map[string]any{"process_id": pid, "yield_time_ms": 300}
			if first && chars != "" {
				a["chars"] = chars
			}
			first = false
			seen.WriteString(h.exec(env, "input_command", args(a)).text())
		}
		return seen.String()
	}
	until("", ">>> ")
	until("print(6*7)\n", "42")
	until("import time; time.sleep(1000)\n", "")
	until("\u0003", "KeyboardInterrupt")
	until("print('still alive')\n", "still alive")
	r = h.exec(env, "kill_command", args(map[string]any{"process_id": pid}))
	wantStop(t, r, ok, "[killed process_id "+pid)
	procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(procs.GetProcesses()) != 0 {
		t.Fatalf("killed session still listed: %v %v", procs, err)
	}

	// bash itself, interactive in the terminal.
	r = h.exec(env, "exec_command", `{"cmd":"bash --norc -i","yield_time_ms":500}`)
	pid = strings.TrimSuffix(strings.Fields(r.text()[strings.Index(r.text(), "process_id "):])[1], ":")
	until("echo $((40+2))\n", "42")
	until("exit 3\n", "[exit code 3]")
}

// childPids starts a command that leaves background children, and returns
// the command's own pid (its process group) and the children's.
const orphanScript = `echo leader $$; sleep 1000 & echo child $!; (sleep 1000 & echo grandchild $!; wait) & sleep 1000 & echo child $!; wait`

// unconfined is an environment of sandbox mode none, whose commands see
// the host's pids: the tests of process tracking check those pids in
// /proc. The confined counterparts are in confine_test.go.
func unconfined() *penguinv1.CreateEnvironmentRequest {
	return &penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE}
}

// trackings runs a test with both ways of tracking commands.
func trackings(t *testing.T, f func(t *testing.T, opts environment.Options)) {
	t.Run("cgroup", func(t *testing.T) { f(t, environment.Options{}) })
	t.Run("pgroup", func(t *testing.T) { f(t, environment.Options{NoCgroups: true}) })
}

func TestTimeoutEndsTheProcessGroup(t *testing.T) { trackings(t, testTimeoutEndsTheProcessGroup) }

func testTimeoutEndsTheProcessGroup(t *testing.T, opts environment.Options) {
	h := start(t, opts)
	timeout := int64(1200)
	env := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE, Tools: &penguinv1.ToolConfig{
		Builtin: []*penguinv1.ToolSpec{{Name: "exec_command", TimeoutMs: &timeout}},
	}}).GetEnvironmentId()
	start := time.Now()
	// The window is capped a second below the timeout: a 1.2 s timeout
	// leaves no room for one, so the timeout ends the command.
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": orphanScript}))
	wantStop(t, r, timedOut, "[timed out after 1.2s]", "[the command and its process group were killed]")
	if time.Since(start) > 20*time.Second {
		t.Fatalf("the timeout took %s", time.Since(start))
	}
	checkNoSurvivors(t, r.text())
}

func TestAbortEndsTheProcessGroup(t *testing.T) { trackings(t, testAbortEndsTheProcessGroup) }

func testAbortEndsTheProcessGroup(t *testing.T, opts environment.Options) {
	h := start(t, opts)
	env := h.create(unconfined()).GetEnvironmentId()
	ctx, cancel := context.WithCancel(testkit.Context(t, 60*time.Second))
	defer cancel()
	stream, err := h.client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: env, ToolCall: &penguinv1.ToolCall{
		Name: "exec_command", ToolCallId: "abort-1", Arguments: args(map[string]any{"cmd": orphanScript, "yield_time_ms": 60000}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	checker := omni.NewChecker()
	for strings.Count(seen.String(), "child") < 3 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("stream ended before the children started: %v\n%s", err, seen.String())
		}
		if err := checker.Check(resp.GetMessage()); err != nil {
			t.Fatal(err)
		}
		seen.WriteString(resp.GetMessage().GetPartialToolCallOutput().GetOutput())
	}
	cancel()
	if _, err := stream.Recv(); err == nil || errors.Is(err, io.EOF) {
		// A frame already in flight is fine; the stream must end with the
		// cancellation.
		for err == nil {
			_, err = stream.Recv()
		}
	}
	checkNoSurvivors(t, seen.String())
}

// checkNoSurvivors waits until no process of the command remains: the
// leader's process group and session, and each child listed in out.
func checkNoSurvivors(t *testing.T, out string) {
	t.Helper()
	leaders := intsAfter(out, "leader ")
	children := append(intsAfter(out, "child "), intsAfter(out, "grandchild ")...)
	if len(leaders) != 1 || len(children) != 3 {
		t.Fatalf("the command did not report its processes:\n%s", out)
	}
	eventually(t, 15*time.Second, "the process group to end", func() bool {
		if len(proctest.GroupMembers(t, leaders[0])) > 0 {
			return false
		}
		for _, c := range children {
			if processAlive(c) {
				return false
			}
		}
		return true
	})
}

func TestBackgroundCompletionIsAnnounced(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	ctx := testkit.Context(t, 60*time.Second)
	watch, err := h.client.WatchEnvironment(ctx, &penguinv1.WatchEnvironmentRequest{EnvironmentId: env})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Header(); err != nil {
		t.Fatal(err)
	}
	r := h.exec(env, "exec_command", `{"cmd":"echo working; sleep 0.3; echo done; exit 4","run_in_background":true}`)
	wantStop(t, r, ok, "Started in the background as process_id 1")
	n, err := watch.Recv()
	if err != nil {
		t.Fatal(err)
	}
	done := n.GetBackgroundDone()
	if done.GetProcessId() != "1" || done.GetExitCode() != 4 || done.GetOutput() != "working\ndone\n" ||
		done.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(done.GetCommand(), "exit 4") {
		t.Fatalf("notice %v", done)
	}

	// A completion while nobody watches waits for the next watcher.
	r = h.exec(env, "exec_command", `{"cmd":"echo quiet","run_in_background":true}`)
	wantStop(t, r, ok, "process_id 2")
	eventually(t, 20*time.Second, "the second command to finish", func() bool {
		p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
		if err != nil {
			return false
		}
		for _, pi := range p.GetProcesses() {
			if pi.GetProcessId() == "2" {
				return pi.GetState() == penguinv1.ProcessState_PROCESS_STATE_EXITED
			}
		}
		return false
	})
	// The first watcher is still attached and receives it directly.
	n, err = watch.Recv()
	if err != nil || n.GetBackgroundDone().GetProcessId() != "2" || n.GetBackgroundDone().GetOutput() != "quiet\n" {
		t.Fatalf("second notice %v %v", n, err)
	}

	// A killed background command sends no report; disposal ends the watch.
	r = h.exec(env, "exec_command", `{"cmd":"sleep 1000","run_in_background":true}`)
	wantStop(t, r, ok, "process_id 3")
	wantStop(t, h.exec(env, "kill_command", `{"process_id":"3"}`), ok, "[killed process_id 3")
	if _, err := h.client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env}); err != nil {
		t.Fatal(err)
	}
	if n, err := watch.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after dispose the watch got %v, %v; want the end of the stream", n, err)
	}
}

func TestPendingNoticeReachesLateWatcher(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	ctx := testkit.Context(t, 60*time.Second)
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo early","run_in_background":true}`), ok)
	eventually(t, 20*time.Second, "the command to finish", func() bool {
		p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
		return err == nil && len(p.GetProcesses()) == 1 && p.GetProcesses()[0].GetState() == penguinv1.ProcessState_PROCESS_STATE_EXITED
	})
	watch, err := h.client.WatchEnvironment(ctx, &penguinv1.WatchEnvironmentRequest{EnvironmentId: env})
	if err != nil {
		t.Fatal(err)
	}
	n, err := watch.Recv()
	if err != nil || n.GetBackgroundDone().GetOutput() != "early\n" {
		t.Fatalf("late watcher got %v %v", n, err)
	}
}

func TestSessionCap(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	for i := 1; i <= 64; i++ {
		wantStop(t, h.exec(env, "exec_command", `{"cmd":"sleep 1000","run_in_background":true}`), ok)
	}
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo one too many"}`), failed, "all 64 command sessions hold commands running in the background", "kill_command")
	wantStop(t, h.exec(env, "kill_command", `{"process_id":"10"}`), ok)
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo room again"}`), ok, "room again")
	// A finished session is evicted to make room; running ones never are.
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo bg","run_in_background":true}`), ok)
	ctx := testkit.Context(t, 30*time.Second)
	eventually(t, 20*time.Second, "the background echo to finish", func() bool {
		p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
		if err != nil {
			return false
		}
		for _, pi := range p.GetProcesses() {
			if pi.GetState() == penguinv1.ProcessState_PROCESS_STATE_EXITED {
				return true
			}
		}
		return false
	})
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo evicted one"}`), ok, "evicted one")
	p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(p.GetProcesses()) != 63 {
		t.Fatalf("sessions after eviction: %d %v", len(p.GetProcesses()), err)
	}
	for _, pi := range p.GetProcesses() {
		if pi.GetState() != penguinv1.ProcessState_PROCESS_STATE_RUNNING {
			t.Fatalf("a finished session survived eviction: %v", pi)
		}
	}
}

func TestDisposeEndsEverything(t *testing.T) { trackings(t, testDisposeEndsEverything) }

func testDisposeEndsEverything(t *testing.T, opts environment.Options) {
	h := start(t, opts)
	env := h.create(unconfined()).GetEnvironmentId()
	var leaders []int
	for i := 0; i < 3; i++ {
		r := h.exec(env, "exec_command", `{"cmd":"echo leader $$; sleep 1000 & sleep 1000","yield_time_ms":1500}`)
		leaders = append(leaders, intsAfter(r.text(), "leader ")...)
	}
	// A finished command that left a daemon-like child behind.
	r := h.exec(env, "exec_command", `{"cmd":"echo leader $$; nohup sleep 1000 >/dev/null 2>&1 & sleep 0.5"}`)
	wantStop(t, r, ok, "[exit code 0]")
	leaders = append(leaders, intsAfter(r.text(), "leader ")...)
	if len(leaders) != 4 {
		t.Fatalf("leaders %v", leaders)
	}
	if len(proctest.GroupMembers(t, leaders[3])) == 0 {
		t.Fatal("the nohup child did not survive its shell, so the test proves nothing")
	}
	// A call still running when the environment goes away is aborted.
	ctx := testkit.Context(t, 60*time.Second)
	running := make(chan result, 1)
	runErr := make(chan error, 1)
	go func() {
		r, err := h.tryExec(ctx, env, "exec_command", `{"cmd":"sleep 1000","yield_time_ms":60000}`)
		running <- r
		runErr <- err
	}()
	eventually(t, 20*time.Second, "the long call to start", func() bool {
		p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
		return err == nil && len(p.GetProcesses()) == 4
	})
	if _, err := h.client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env}); err != nil {
		t.Fatal(err)
	}
	r = <-running
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	wantStop(t, r, aborted)
	for _, l := range leaders {
		if m := proctest.GroupMembers(t, l); len(m) > 0 {
			t.Fatalf("processes of %d survived disposal: %v", l, m)
		}
	}
}

func TestCommandsQueueForAFreeSession(t *testing.T) {
	h := start(t, environment.Options{MaxSessions: 2})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	type outcome struct {
		r   result
		err error
	}
	results := make(chan outcome, 6)
	ctx := testkit.Context(t, 60*time.Second)
	for i := 0; i < 6; i++ {
		go func() {
			r, err := h.tryExec(ctx, env, "exec_command", args(map[string]any{"cmd": "sleep 0.3; echo done-" + itoa(i)}))
			results <- outcome{r, err}
		}()
	}
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		r := o.r
		wantStop(t, r, ok, "[exit code 0]")
		seen[strings.Fields(r.text())[0]] = true
	}
	if len(seen) != 6 {
		t.Fatalf("outputs %v", seen)
	}
}

// TestKillUnderAReadingCall kills a command from a second call while the
// call that started it is still waiting for it in the foreground: that call
// ends as aborted and says the command was killed, with no exit code.
func TestKillUnderAReadingCall(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	ctx := testkit.Context(t, 60*time.Second)
	type outcome struct {
		r   result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := h.tryExec(ctx, env, "exec_command", `{"cmd":"echo started; sleep 1000","yield_time_ms":60000}`)
		done <- outcome{r, err}
	}()
	var pid string
	eventually(t, 20*time.Second, "the command to run", func() bool {
		p, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: env})
		if err != nil || len(p.GetProcesses()) != 1 {
			return false
		}
		pid = p.GetProcesses()[0].GetProcessId()
		return true
	})
	wantStop(t, h.exec(env, "kill_command", args(map[string]any{"process_id": pid})), ok, "[killed process_id "+pid)
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	wantStop(t, got.r, aborted, "[the command was killed]")
	if strings.Contains(got.r.text(), "[exit code") {
		t.Fatalf("a killed command reported an exit code:\n%s", got.r.text())
	}
}

// TestShutdownEndsRunningCallsAsUnavailable closes the service under a
// running command: the call's stream keeps what the command printed and
// ends with Unavailable, as a call to a replica that went away does (the
// engine then runs the session's next call in a fresh environment
// elsewhere), not as a command someone killed.
func TestShutdownEndsRunningCallsAsUnavailable(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	ctx := testkit.Context(t, 60*time.Second)
	type outcome struct {
		r   result
		err error
	}
	done := make(chan outcome, 1)
	started := make(chan struct{})
	go func() {
		// The call is read here rather than with tryExec, so the service
		// is closed only once "started" has reached the caller.
		stream, err := h.client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{
			EnvironmentId: env,
			ToolCall: &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: "exec_command",
				Arguments: `{"cmd":"echo started; sleep 1000","yield_time_ms":60000}`, ToolCallId: nextCallID()},
		})
		var r result
		signal := started
		for err == nil {
			var resp *penguinv1.ExecuteToolResponse
			if resp, err = stream.Recv(); err == nil {
				r.frames = append(r.frames, resp.GetMessage())
				if signal != nil && strings.Contains(strings.Join(r.deltas(), ""), "started") {
					close(signal)
					signal = nil
				}
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
			r.out = r.frames[len(r.frames)-1].GetToolCallOutput()
		}
		done <- outcome{r, err}
	}()
	select {
	case <-started:
	case got := <-done:
		t.Fatalf("the call ended before the command printed: %v %q", got.err, got.r.deltas())
	}
	h.svc.Close()
	got := <-done
	if status.Code(got.err) != codes.Unavailable || !strings.Contains(got.err.Error(), "shutting down") {
		t.Fatalf("the cut call ended with %v (output %q), want Unavailable saying the replica is shutting down", got.err, got.r.text())
	}
	if streamed := strings.Join(got.r.deltas(), ""); !strings.Contains(streamed, "started") || strings.Contains(streamed, "killed") || got.r.out != nil {
		t.Fatalf("the cut call streamed %q and ended with output %v; want what the command printed and nothing after it", streamed, got.r.out)
	}
	// The replica takes nothing new while it stops.
	if _, err := h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("CreateEnvironment while shutting down: %v, want Unavailable", err)
	}
	if _, err := h.tryExec(ctx, env, "exec_command", `{"cmd":"echo again"}`); status.Code(err) != codes.Unavailable {
		t.Fatalf("a tool call for the disposed environment while shutting down: %v, want Unavailable", err)
	}
}
