package environment_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/command"
)

// BenchmarkExecTrue measures exec_command of `true`, through gRPC to its
// final output, against its budget measured in the same run: bash -c true
// run directly with os/exec plus a bare gRPC stream round trip (a plain
// grpc-go server on the same kind of connection whose ExecuteTool answers
// at once with one message). The three run in turn in every iteration,
// rotating which goes first, so that drift hits them alike; the metrics
// are the p50s, the ratio to the direct run, the added time, and issue
// 14's figure: added-to-budget-p50-µs (the service less both) ≤ 100. The
// variants: sandbox none, and
// the confined default (workspace-write without network), each with the
// shell snapshot (the default: bash -c in the environment the login
// profile left once) and with login_shell (bash -lc, the profile every
// time); "pgroup" tracks by process group instead of a cgroup; "pipes"
// runs the command on pipes (tty false) instead of a terminal, whose
// opening and hang-up cost what pipes do not. Confined
// commands start through penguin-sandbox, as beside an installed penguin;
// PENGUIN_BENCH_SELF=PATH measures another trampoline (a penguin binary,
// which starts with "sandbox-exec" too).
func BenchmarkExecTrue(b *testing.B) {
	none := penguinv1.SandboxMode_SANDBOX_MODE_NONE
	ww := penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE
	b.Run("none", func(b *testing.B) {
		benchExecTrue(b, environment.Options{}, &penguinv1.CreateEnvironmentRequest{SandboxMode: none})
	})
	b.Run("none-login-shell", func(b *testing.B) {
		benchExecTrue(b, environment.Options{}, &penguinv1.CreateEnvironmentRequest{SandboxMode: none, LoginShell: true})
	})
	b.Run("none-pgroup", func(b *testing.B) {
		benchExecTrue(b, environment.Options{NoCgroups: true}, &penguinv1.CreateEnvironmentRequest{SandboxMode: none})
	})
	b.Run("none-pipes", func(b *testing.B) {
		benchExecTrueArgs(b, environment.Options{}, &penguinv1.CreateEnvironmentRequest{SandboxMode: none}, `{"cmd":"true","tty":false}`)
	})
	b.Run("confined", func(b *testing.B) {
		requireConfinement(b)
		benchExecTrue(b, environment.Options{}, &penguinv1.CreateEnvironmentRequest{SandboxMode: ww})
	})
	b.Run("confined-login-shell", func(b *testing.B) {
		requireConfinement(b)
		benchExecTrue(b, environment.Options{}, &penguinv1.CreateEnvironmentRequest{SandboxMode: ww, LoginShell: true})
	})
}

func benchExecTrue(b *testing.B, opts environment.Options, req *penguinv1.CreateEnvironmentRequest) {
	benchExecTrueArgs(b, opts, req, `{"cmd":"true"}`)
}

// benchExecTrueArgs is benchExecTrue with exec_command's arguments given.
func benchExecTrueArgs(b *testing.B, opts environment.Options, req *penguinv1.CreateEnvironmentRequest, arguments string) {
	opts.Self = os.Getenv("PENGUIN_BENCH_SELF") // empty: penguin-sandbox
	h := start(b, opts)
	env := h.create(req).GetEnvironmentId()
	bare, _ := serve(b, bareEnv{})
	ctx := testkit.Context(b, 10*time.Minute)
	directEnv := proctest.Env(b)
	direct := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command("bash", "-c", "true")
		cmd.Env = directEnv
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	viaService := func() time.Duration {
		t0 := time.Now()
		r, err := h.tryExec(ctx, env, "exec_command", arguments)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(r.text(), "[exit code 0]") {
			b.Fatalf("output %q", r.text())
		}
		return time.Since(t0)
	}
	stream := func() time.Duration {
		t0 := time.Now()
		r, err := bareCall(ctx, bare)
		if err != nil || !strings.Contains(r, "[exit code 0]") {
			b.Fatalf("bare stream: %q %v", r, err)
		}
		return time.Since(t0)
	}
	compareP50(b, direct, viaService, stream)
}

// bareEnv is an environment service with nothing behind it: ExecuteTool
// answers at once with the final output of a command that printed nothing.
// Served by serve, like the harness's service, it is the bare gRPC stream.
type bareEnv struct {
	penguinv1.UnimplementedEnvironmentServiceServer
}

func (bareEnv) ExecuteTool(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	return s.Send(&penguinv1.ExecuteToolResponse{Message: &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{
		ToolCallOutput: &penguinv1.ToolCallOutput{ToolCallId: req.GetToolCall().GetToolCallId(), Output: "[exit code 0]"},
	}}})
}

// bareCall is one ExecuteTool call on the bare service, read to its end.
func bareCall(ctx context.Context, c penguinv1.EnvironmentServiceClient) (string, error) {
	s, err := c.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: "bare", ToolCall: &penguinv1.ToolCall{
		Role: penguinv1.Role_ROLE_ASSISTANT, Name: "exec_command", Arguments: `{"cmd":"true"}`, ToolCallId: nextCallID(),
	}})
	if err != nil {
		return "", err
	}
	var out string
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = resp.GetMessage().GetToolCallOutput().GetOutput()
	}
}

// compareP50 runs direct (the baseline), viaService and, when it is not
// nil, floor (a second baseline: what any call to a service costs) in turn
// b.N times after one warm-up each, rotating which goes first so that
// drift hits them alike. It reports the p50s, the service's ratio to the
// direct run and the time it adds; with a floor, the time the service
// adds beyond both; and the CPU time each took per run, this process's and
// its children's (the trampolines, shells and commands, once reaped),
// which a loaded machine disturbs far less than wall time.
func compareP50(b *testing.B, direct, viaService, floor func() time.Duration) {
	sides := []func() time.Duration{direct, viaService}
	if floor != nil {
		sides = append(sides, floor)
	}
	for _, f := range sides {
		f()
	}
	wall := make([][]time.Duration, len(sides))
	cpu := make([]time.Duration, len(sides))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range sides {
			k := (i + j) % len(sides)
			c0 := cpuTime(b)
			wall[k] = append(wall[k], sides[k]())
			cpu[k] += cpuTime(b) - c0
		}
	}
	b.StopTimer()
	pd, ps := p50(wall[0]), p50(wall[1])
	b.ReportMetric(float64(pd.Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(ps.Microseconds()), "service-p50-µs")
	b.ReportMetric(float64(ps)/float64(pd), "p50-ratio")
	b.ReportMetric(float64((ps - pd).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "direct-cpu-µs")
	b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "service-cpu-µs")
	if floor != nil {
		pf := p50(wall[2])
		b.ReportMetric(float64(pf.Microseconds()), "bare-stream-p50-µs")
		b.ReportMetric(float64((ps - pd - pf).Microseconds()), "added-to-budget-p50-µs")
	}
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// outputBytes is the size of the bandwidth benchmark's output: 64 MiB by
// default, PENGUIN_BENCH_OUTPUT_BYTES to change it (1073741824 for the
// full 1 GiB, which needs several GiB of memory: the complete output is
// one message).
func outputBytes(b *testing.B) int64 {
	if v := os.Getenv("PENGUIN_BENCH_OUTPUT_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("PENGUIN_BENCH_OUTPUT_BYTES=%q is not a positive byte count", v)
		}
		return n
	}
	return 64 << 20
}

// BenchmarkOutputBandwidth runs a command that writes n bytes through
// exec_command, in a terminal (the default) and on pipes (tty false), with
// the whole output streamed through gRPC (truncation off) and with the
// default output cap (the head streamed, the rest archived), each in an
// environment with the default sandbox (confined where the host can
// enforce it); pipes-capped-unconfined is pipes-capped with sandbox none,
// where the command runs as the baseline's does, so that the costs of
// streaming and of confinement can be told apart. Its baseline,
// in the same iteration, is the ceiling of the transport: the same command
// in a bare terminal or pipe drained by a plain Go read loop. The two
// phases of a call are reported apart, never mixed into one figure: the
// command's output (from the call to the last delta: stream-MB/s, whose
// ratio to the ceiling is the headline) and the complete tool_call_output
// that the contract sends after it (complete-ms). The target is
// ratio-to-raw ≥ 0.8 for pipes-capped. The command writing into /dev/null
// is measured too, as what no reader can beat. raw-cpu-ms and
// service-cpu-ms are the CPU time of a run, this process's and the
// command's (yes, head and their shell, once reaped), on each side: on a
// busy machine they move far less than the wall-time figures. A confined
// command is started by its environment's init, not by this process, so
// service-cpu-ms counts the command's CPU only unconfined; the two are
// the same work only there. raw-reader-cpu-ms and service-self-cpu-ms
// are this process's part alone (the read loop; the service and its
// client), comparable in every case: the command's own CPU, the same on
// both sides, is most of the rest and most of its noise.
func BenchmarkOutputBandwidth(b *testing.B) {
	b.Run("terminal", func(b *testing.B) { benchOutputBandwidth(b, true, false, false) })
	b.Run("pipes", func(b *testing.B) { benchOutputBandwidth(b, false, false, false) })
	b.Run("terminal-capped", func(b *testing.B) { benchOutputBandwidth(b, true, true, false) })
	b.Run("pipes-capped", func(b *testing.B) { benchOutputBandwidth(b, false, true, false) })
	b.Run("pipes-capped-unconfined", func(b *testing.B) { benchOutputBandwidth(b, false, true, true) })
}

func benchOutputBandwidth(b *testing.B, terminal, capped, unconfined bool) {
	n := outputBytes(b)
	zero := int64(0)
	opts, spec := environment.Options{OutputCeiling: -1}, &penguinv1.ToolSpec{Name: "exec_command", TimeoutMs: &zero, MaxOutputLength: &zero}
	if capped {
		opts, spec = environment.Options{}, &penguinv1.ToolSpec{Name: "exec_command", TimeoutMs: &zero}
	}
	h := start(b, opts)
	req := &penguinv1.CreateEnvironmentRequest{Tools: &penguinv1.ToolConfig{Builtin: []*penguinv1.ToolSpec{spec}}}
	if unconfined {
		req.SandboxMode = penguinv1.SandboxMode_SANDBOX_MODE_NONE
	}
	env := h.create(req).GetEnvironmentId()
	directEnv := proctest.Env(b, "HOME="+h.home)
	line := strings.Repeat("0123456789abcdef", 4)[:63]
	script := fmt.Sprintf("yes %s | head -c %d", line, n)
	ctx := testkit.Context(b, 30*time.Minute)
	call := args(map[string]any{"cmd": script, "yield_time_ms": 24 * 3600 * 1000, "tty": terminal})

	devNull := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command("bash", "-c", script+" > /dev/null")
		cmd.Env = directEnv
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// viaService returns the time to the last delta and from there to the
	// end of the call.
	viaService := func() (streamed, complete time.Duration) {
		t0 := time.Now()
		stream, err := h.client.ExecuteTool(ctx, &penguinv1.ExecuteToolRequest{EnvironmentId: env, ToolCall: &penguinv1.ToolCall{
			Name: "exec_command", ToolCallId: "bw", Arguments: call,
		}}, grpc.MaxCallRecvMsgSize(math.MaxInt32))
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		var final *penguinv1.ToolCallOutput
		var lastDelta time.Time
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if p := resp.GetMessage().GetPartialToolCallOutput(); p != nil {
				got += int64(len(p.GetOutput()))
				lastDelta = time.Now()
			}
			if o := resp.GetMessage().GetToolCallOutput(); o != nil {
				final = o
			}
		}
		end := time.Now()
		switch {
		case final == nil || int64(len(final.GetOutput())) != got || !strings.HasSuffix(final.GetOutput(), "[exit code 0]"):
			b.Fatalf("streamed %d bytes; final %d bytes", got, len(final.GetOutput()))
		case capped && !strings.Contains(final.GetOutput(), fmt.Sprintf(" of %d characters", n)):
			b.Fatalf("the capped output does not account for all %d bytes: %q", n, final.GetOutput()[max(0, len(final.GetOutput())-300):])
		case !capped && got < n:
			b.Fatalf("streamed %d of %d bytes", got, n)
		}
		return lastDelta.Sub(t0), end.Sub(lastDelta)
	}
	// The same command in a bare terminal or pipe, drained by a plain
	// loop: the ceiling any streaming over that transport can reach here.
	raw := func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = directEnv
		var r io.ReadCloser
		if terminal {
			f, err := pty.Start(cmd)
			if err != nil {
				b.Fatal(err)
			}
			r = f
		} else {
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			r = out
		}
		got, _ := io.CopyBuffer(io.Discard, r, make([]byte, 1<<20)) // a terminal ends with EIO once the command exits
		if terminal {
			r.Close()
		}
		_ = cmd.Wait()
		if got < n {
			b.Fatalf("the transport gave %d of %d bytes", got, n)
		}
		return time.Since(t0)
	}
	var dn, rw, st, cm, rawCPU, svcCPU, rawSelf, svcSelf time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dn += devNull()
		c0, s0 := cpuTime(b), selfCPU(b)
		rw += raw()
		c1, s1 := cpuTime(b), selfCPU(b)
		s, c := viaService()
		st, cm = st+s, cm+c
		rawCPU, svcCPU = rawCPU+c1-c0, svcCPU+cpuTime(b)-c1
		rawSelf, svcSelf = rawSelf+s1-s0, svcSelf+selfCPU(b)-s1
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(n) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(dn), "devnull-MB/s")
	b.ReportMetric(mbps(rw), "raw-MB/s")
	b.ReportMetric(mbps(st), "stream-MB/s")
	b.ReportMetric(mbps(st)/mbps(rw), "ratio-to-raw")
	b.ReportMetric(float64(cm.Milliseconds())/float64(b.N), "complete-ms")
	b.ReportMetric(float64(rawCPU.Milliseconds())/float64(b.N), "raw-cpu-ms")
	b.ReportMetric(float64(svcCPU.Milliseconds())/float64(b.N), "service-cpu-ms")
	b.ReportMetric(float64(rawSelf.Milliseconds())/float64(b.N), "raw-reader-cpu-ms")
	b.ReportMetric(float64(svcSelf.Milliseconds())/float64(b.N), "service-self-cpu-ms")
}

// BenchmarkConcurrentCommands runs 500 commands at once on one
// environment: all must complete, each with its own output, none lost.
// Only 64 run at a time (the session cap); the rest wait for a slot. The
// baseline does the same work in the same iteration: the same 500
// command lines (bash -c), 64 at a time, each read to its end, on pipes
// for the pipes case (exec_command with tty false) and in a terminal of
// its own for the terminal case (the default). "time-ratio" is the
// service's wall time over the baseline's.
func BenchmarkConcurrentCommands(b *testing.B) {
	b.Run("pipes", func(b *testing.B) { benchConcurrentCommands(b, false) })
	b.Run("terminal", func(b *testing.B) { benchConcurrentCommands(b, true) })
}

func benchConcurrentCommands(b *testing.B, terminal bool) {
	const n = 500
	h := start(b, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	ctx := testkit.Context(b, 30*time.Minute)
	directEnv := proctest.Env(b, "HOME="+h.home)
	want := func(j int) string { return "cmd-" + strconv.Itoa(j) + "-done" }
	// one runs command j directly and returns its output.
	one := func(j int) (string, error) {
		cmd := exec.Command("bash", "-c", "echo "+want(j))
		cmd.Env = directEnv
		if !terminal {
			out, err := cmd.Output()
			return string(out), err
		}
		f, err := pty.Start(cmd)
		if err != nil {
			return "", err
		}
		out, _ := io.ReadAll(f) // a terminal ends with EIO once the command exits
		f.Close()
		return strings.ReplaceAll(string(out), "\r\n", "\n"), cmd.Wait()
	}
	direct := func() time.Duration {
		t0 := time.Now()
		slots := make(chan struct{}, command.MaxSessions)
		var wg sync.WaitGroup
		for j := 0; j < n; j++ {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				if out, err := one(j); err != nil || out != want(j)+"\n" {
					b.Errorf("direct command %d: %v %q", j, err, out)
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	viaService := func() (time.Duration, int) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		t0 := time.Now()
		for j := 0; j < n; j++ {
			wg.Go(func() {
				r, err := h.tryExec(ctx, env, "exec_command", args(map[string]any{"cmd": "echo " + want(j), "tty": terminal}))
				switch {
				case err != nil:
					errs <- err
				case r.out.GetStopReason() != ok || !strings.HasPrefix(r.text(), want(j)+"\n") || !strings.HasSuffix(r.text(), "[exit code 0]"):
					errs <- fmt.Errorf("command %d: %v %q", j, r.out.GetStopReason(), r.text())
				}
			})
		}
		wg.Wait()
		d := time.Since(t0)
		close(errs)
		lost := 0
		for err := range errs {
			lost++
			b.Error(err)
		}
		return d, lost
	}
	var base, svc time.Duration
	lost := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			base += direct()
		}
		d, l := viaService()
		svc, lost = svc+d, lost+l
		if i%2 == 1 {
			base += direct()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N-lost)/float64(b.N), "completed")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(n*b.N)/svc.Seconds(), "commands/s")
	b.ReportMetric(float64(n*b.N)/base.Seconds(), "direct-commands/s")
	b.ReportMetric(svc.Seconds()/base.Seconds(), "time-ratio")
}

// BenchmarkCreateEnvironment compares creating (and disposing of) an
// environment of sandbox mode none, the baseline, with a confined one
// (its cgroups, its init in namespaces of its own, its mounts), in turn in
// every iteration; the metrics are both p50s and their ratio.
func BenchmarkCreateEnvironment(b *testing.B) {
	requireConfinement(b)
	h := start(b, environment.Options{})
	ctx := testkit.Context(b, 10*time.Minute)
	n := 0
	create := func(mode penguinv1.SandboxMode) func() time.Duration {
		return func() time.Duration {
			n++
			t0 := time.Now()
			resp, err := h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "ws-" + strconv.Itoa(n), SandboxMode: mode})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			if _, err := h.client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()}); err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	none, confined := create(penguinv1.SandboxMode_SANDBOX_MODE_NONE), create(penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE)
	none()
	confined()
	var dn, dc []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			dn, dc = append(dn, none()), append(dc, confined())
		} else {
			dc, dn = append(dc, confined()), append(dn, none())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(p50(dn).Microseconds()), "none-p50-µs")
	b.ReportMetric(float64(p50(dc).Microseconds()), "confined-p50-µs")
	b.ReportMetric(float64(p50(dc))/float64(p50(dn)), "p50-ratio")
}
