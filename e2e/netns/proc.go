//go:build linux

package netns

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// Proc is a process a test started, on a [Host] or in the root namespace.
// Its output is kept (and shown when the test fails), and its JSON log
// lines (slog's JSON handler) are parsed so a test can wait for one.
type Proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	out     bytes.Buffer // standard output and error, line by line
	stdout  bytes.Buffer // standard output alone
	logs    []map[string]any
	changed chan struct{} // closed and replaced whenever output arrives
	exited  chan struct{}
	waitErr error
}

// Start starts cmd (from [Host.Command], or exec.Command for the root
// namespace) and stops it when the test ends: SIGTERM, then SIGKILL of it
// and every process it started if it has not exited within ten seconds.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	p := &Proc{t: t, name: name, cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	stdout, stderr := &lineWriter{p: p, stdout: true}, &lineWriter{p: p}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child that outlives the process and keeps its output open must
	// not hold up Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := cmd.Wait()
		stdout.flush()
		stderr.flush()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("output of %s (%s):\n%s", name, strings.Join(cmd.Args, " "), tail(p.Output(), 64<<10))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// lineWriter passes whole lines of a process's output to addLine.
type lineWriter struct {
	p       *Proc
	stdout  bool // the process's standard output, not its error
	partial []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.p.addLine(w.partial[:i], w.stdout)
		w.partial = w.partial[i+1:]
	}
}

// flush passes on a last line without a newline.
func (w *lineWriter) flush() {
	if len(w.partial) > 0 {
		w.p.addLine(w.partial, w.stdout)
		w.partial = nil
	}
}

// addLine records one line of output, from standard output when stdout is
// set.
func (p *Proc) addLine(line []byte, stdout bool) {
	var entry map[string]any
	isLog := json.Unmarshal(line, &entry) == nil && entry["msg"] != nil
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Write(line)
	p.out.WriteByte('\n')
	if stdout {
		p.stdout.Write(line)
		p.stdout.WriteByte('\n')
	}
	if isLog {
		p.logs = append(p.logs, entry)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Name returns the name the test gave the process.
func (p *Proc) Name() string { return p.name }

// Pid returns the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns everything the process printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Stdout returns what the process printed on its standard output alone.
func (p *Proc) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// WaitOutput waits up to within until the output contains s, and fails
// the test when the process exits first or the time runs out.
func (p *Proc) WaitOutput(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		found := strings.Contains(p.out.String(), s)
		changed := p.changed
		p.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-p.exited:
			p.t.Fatalf("%s exited before printing %q:\n%s", p.name, s, tail(p.Output(), 16<<10))
		case <-deadline.C:
			p.t.Fatalf("%s did not print %q within %s:\n%s", p.name, s, within, tail(p.Output(), 16<<10))
		}
	}
}

// Wait waits up to within for the process to exit on its own and returns
// its exit code; it fails the test when the time runs out.
func (p *Proc) Wait(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		p.t.Fatalf("%s did not exit within %s:\n%s", p.name, within, tail(p.Output(), 16<<10))
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// WaitLog waits up to within for a log line whose msg is msg and whose
// fields include every key=value of match, and returns the value of field
// ("" when field is empty). It fails the test when the process exits
// first or the time runs out.
func (p *Proc) WaitLog(msg string, match map[string]string, field string, within time.Duration) string {
	p.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.logs); seen++ {
			e := p.logs[seen]
			if e["msg"] != msg {
				continue
			}
			ok := true
			for k, v := range match {
				ok = ok && fmt.Sprint(e[k]) == v
			}
			if ok {
				p.mu.Unlock()
				if field == "" {
					return ""
				}
				return fmt.Sprint(e[field])
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before logging %q:\n%s", p.name, p.err(), msg, tail(p.Output(), 16<<10))
		case <-deadline.C:
			p.t.Fatalf("%s did not log %q within %s:\n%s", p.name, msg, within, tail(p.Output(), 16<<10))
		}
	}
}

func (p *Proc) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Kill ends the process and every process it started at once, with
// SIGKILL, as if its host had lost power, and waits until it has exited.
func (p *Proc) Kill() {
	p.t.Helper()
	killTree(p.cmd.Process.Pid)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s did not exit within 10s of SIGKILL", p.name)
	}
}

// Stop asks the process to stop with SIGTERM and kills it, with every
// process it started, when it has not exited within grace.
func (p *Proc) Stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	p.t.Logf("%s did not stop within %s of SIGTERM; killing it", p.name, grace)
	killTree(p.cmd.Process.Pid)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s did not exit within 10s of SIGKILL", p.name)
	}
}

// killTree stops root and its descendants (so that none can start another
// process while they are being found), then kills them all.
func killTree(root int) {
	stopped := map[int]bool{}
	for range 8 {
		more := false
		for _, pid := range append([]int{root}, descendants(root)...) {
			if !stopped[pid] {
				stopped[pid] = true
				more = true
				_ = syscall.Kill(pid, syscall.SIGSTOP)
			}
		}
		if !more {
			break
		}
	}
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// descendants returns the processes below root, from /proc.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces; the parent
		// pid is the second field after it.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// WaitServing polls the gRPC health service at target (overall status)
// until it reports SERVING, and returns an error when ctx ends first.
// token, when set, is sent as a bearer token.
func WaitServing(ctx context.Context, target, token string) error {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	var last error
	err = eventually.Wait(ctx, func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return true
		}
		if err == nil {
			err = fmt.Errorf("status %s", resp.GetStatus())
		}
		last = err
		return false
	})
	if err != nil {
		return fmt.Errorf("%s is not serving: %w (last: %v)", target, err, last)
	}
	return nil
}
