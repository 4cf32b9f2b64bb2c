// Package e2e tests Penguin as people use it: the real penguin binary, run
// as separate processes on real loopback ports (the three services apart,
// and all in one), driven by the CLI, grpcurl, a Node.js client, the
// HTTP/SSE gateway and a terminal, with `penguin mockllm` playing a
// scripted model over the real provider wire format.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/penguin-agent/penguin/e2e/e2etest"
)

// tools are the binaries TestMain builds once for the package.
type tools struct {
	penguin string
	grpcurl string
	repo    string
}

// bin is set once by TestMain, before any test runs, and only read after.
var bin tools

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "penguin-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	repo, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = tools{penguin: filepath.Join(dir, "penguin"), grpcurl: filepath.Join(dir, "grpcurl"), repo: repo}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var g errgroup.Group
	build := func(args ...string) func() error {
		return func() error { return e2etest.GoBuild(ctx, repo, args...) }
	}
	g.Go(build("-o", bin.penguin, "./cmd/penguin"))
	// grpcurl is pinned in the tools module; building it once is much
	// faster than `go tool grpcurl` per call.
	g.Go(build("-modfile=tools/go.mod", "-o", bin.grpcurl, "github.com/fullstorydev/grpcurl/cmd/grpcurl"))
	if err := g.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// proc is one penguin process started by a test. Its output (JSON log
// lines on stderr, whatever it prints on stdout) is kept, parsed for log
// messages, and shown when the test fails.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	out     bytes.Buffer // stdout and stderr, as they came
	stdout  bytes.Buffer
	logs    []map[string]any
	changed chan struct{} // closed and replaced whenever output arrives
	exited  chan struct{}
	waitErr error
}

// start runs the penguin binary with args and env (added to a clean,
// minimal environment) and stops it when the test ends.
func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin.penguin, args...)
	cmd.Env = append(e2etest.BaseEnv(t), env...)
	p := &proc{t: t, name: name, cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.read(stdout, &p.stdout) }()
	go func() { defer readers.Done(); p.read(stderr, nil) }()
	go func() {
		readers.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of %s (%s):\n%s", name, strings.Join(args, " "), p.output())
		}
	})
	return p
}

// read collects the lines of r; those of stdout also go to only.
func (p *proc) read(r io.Reader, only *bytes.Buffer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var entry map[string]any
		isLog := json.Unmarshal(line, &entry) == nil && entry["msg"] != nil
		p.mu.Lock()
		p.out.Write(line)
		p.out.WriteByte('\n')
		if only != nil {
			only.Write(line)
			only.WriteByte('\n')
		}
		if isLog {
			p.logs = append(p.logs, entry)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stdoutText returns what the process printed on its standard output.
func (p *proc) stdoutText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// waitLog waits for a log line whose msg is msg and whose fields include
// every key=value of match, and returns the value of field.
func (p *proc) waitLog(msg string, match map[string]string, field string) string {
	p.t.Helper()
	deadline := time.NewTimer(60 * time.Second)
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
				return fmt.Sprint(e[field])
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			p.t.Fatalf("%s exited (%v) before logging %q:\n%s", p.name, p.waitErrSafe(), msg, p.output())
		case <-deadline.C:
			p.t.Fatalf("%s did not log %q within a minute:\n%s", p.name, msg, p.output())
		}
	}
}

// waitOutput waits until the output contains s.
func (p *proc) waitOutput(s string, within time.Duration) {
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
			p.t.Fatalf("%s exited before printing %q:\n%s", p.name, s, p.output())
		case <-deadline.C:
			p.t.Fatalf("%s did not print %q within %s:\n%s", p.name, s, within, p.output())
		}
	}
}

func (p *proc) waitErrSafe() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// wait waits for the process to exit on its own and returns its exit code.
func (p *proc) wait(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		p.t.Fatalf("%s did not exit within %s:\n%s", p.name, within, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// stop asks the process to shut down gracefully and kills it if it has
// not within fifteen seconds.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.t.Errorf("%s did not stop within 15s of SIGTERM; killing it", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// grpcAddr waits for the process's gRPC server to listen and returns its
// address.
func (p *proc) grpcAddr(server string) string {
	p.t.Helper()
	return p.waitLog("gRPC server listening", map[string]string{"server": server}, "addr")
}

// mock is a `penguin mockllm` process playing script.
type mock struct {
	*proc
	url string
}

func startMock(t testing.TB, name, script string) *mock {
	t.Helper()
	p := start(t, "mockllm "+name, nil, "mockllm", "--listen", "127.0.0.1:0", "--script", script)
	return &mock{proc: p, url: p.waitLog("mockllm listening", nil, "url")}
}

// route is one provider route of a providers file.
type route struct {
	name string
	mock *mock
}

// writeProviders writes a providers file with one OpenAI-compatible route
// per mock, and returns its path.
func writeProviders(t testing.TB, routes ...route) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("providers:\n")
	for _, r := range routes {
		fmt.Fprintf(&b, "  - name: %s\n    type: openai\n    base_url: %s/v1\n    api_key_env: MOCK_API_KEY\n", r.name, r.mock.url)
	}
	path := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyDir copies the regular files of src (one level, as the demo
// workspace has) into a new temporary directory and returns it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls the buffer every 20ms until found reports a result, and
// fails the test after within.
func waitFor(t testing.TB, b *syncBuffer, within time.Duration, found func(string) (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, ok := found(b.String()); ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("not found within %s in:\n%s", within, b.String())
		}
		<-tick.C
	}
}
