// Package e2e tests Penguin as people use it: the real penguin binary, run
// as separate processes on real loopback ports (the three services apart,
// and all in one), driven by the CLI, grpcurl, a Node.js client, the
// HTTP/SSE gateway and a terminal, with `penguin mockllm` playing a
// scripted model over the real provider wire format.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
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

// start runs the penguin binary with args and env (added to a clean,
// minimal environment) and stops it when the test ends.
func start(t testing.TB, name string, env []string, args ...string) *netns.Proc {
	t.Helper()
	cmd := exec.Command(bin.penguin, args...)
	cmd.Env = append(e2etest.BaseEnv(t), env...)
	return netns.Start(t, name, cmd)
}

// grpcAddr waits for p's gRPC server to listen and returns its address.
func grpcAddr(p *netns.Proc, server string) string {
	return p.WaitLog("gRPC server listening", map[string]string{"server": server}, "addr", time.Minute)
}

// mock is a `penguin mockllm` process playing script.
type mock struct {
	*netns.Proc
	url string
}

func startMock(t testing.TB, name, script string) *mock {
	t.Helper()
	p := start(t, "mockllm "+name, nil, "mockllm", "--listen", "127.0.0.1:0", "--script", script)
	return &mock{Proc: p, url: p.WaitLog("mockllm listening", nil, "url", time.Minute)}
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
