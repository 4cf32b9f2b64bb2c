package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// The shape of BenchmarkIdleSessions.
const (
	defaultIdleSessions = 10000
	idleWarmup          = 200 // sessions before the first reading: the bounded caches fill
	idleParallel        = 1   // tasks at once: the model plays its turns in order, one task's after another's
	// idleTimeout is the servers' environment idle timeout: short, so
	// that the environments of the sessions left idle are gone within the
	// run, as they are after --environment-idle-timeout in a real one.
	idleTimeout = 2 * time.Second
	// idleSettle bounds the wait for every environment to be disposed of
	// and every session unloaded once the tasks are done.
	idleSettle = 2 * time.Minute
)

// BenchmarkIdleSessions measures what an idle session costs `penguin
// serve` as a user runs it: the real binary (all in one, SQLite, the real
// environment service) and `penguin mockllm` as the model. Each of
// PENGUIN_BENCH_IDLE_SESSIONS (default 10,000) sessions runs the
// benchmark task (two model turns and a read_file, so it had an environment) and is
// left idle; once the environments' idle timeout has passed and
// penguin_environment_environments_active is back at 0, it reports the
// server's resident growth per session after the first idleWarmup. A
// binary without --environment-idle-timeout (PENGUIN_BENCH_BINARY built
// from an older tree) keeps every environment, and is measured as it
// is: the before figure.
func BenchmarkIdleSessions(b *testing.B) {
	bin := penguinBinary(b)
	n := envInt(b, "PENGUIN_BENCH_IDLE_SESSIONS", defaultIdleSessions)
	if n <= idleWarmup {
		b.Fatalf("PENGUIN_BENCH_IDLE_SESSIONS=%d: give more than the %d warm-up sessions", n, idleWarmup)
	}
	for range b.N {
		idleRun(b, bin, n)
	}
}

// idleRun runs one server through n sessions and reports its figures.
func idleRun(b *testing.B, bin string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	dir := b.TempDir()
	root := filepath.Join(dir, "root")
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(ws, helloFile), helloText)
	mock := startMock(b, bin, dir, 2*n)
	defer mock.proc.Stop(10 * time.Second)
	providers := filepath.Join(dir, "providers.yaml")
	writeFile(b, providers, fmt.Sprintf("providers:\n  - name: %s\n    type: openai\n    base_url: %s/v1\n    api_key_env: BENCH_KEY\n", benchRoute, mock.url))
	metricsAddr := freeAddr(b)
	extra := []string{"--metrics-listen", metricsAddr}
	lazy := hasFlag(b, bin, "--environment-idle-timeout")
	if lazy {
		extra = append(extra, "--environment-idle-timeout", idleTimeout.String())
	}
	var res runResult
	srv := startServer(b, bin, filepath.Join(dir, "home"), root, providers, &res, extra...)
	defer srv.proc.Stop(30 * time.Second)
	pid := srv.proc.Pid()

	t0 := time.Now()
	runIdleTasks(ctx, b, srv, ws, 0, idleWarmup)
	settle(b, metricsAddr, lazy)
	rssWarm, anonWarm := rss(b, pid), anonRSS(b, pid)
	runIdleTasks(ctx, b, srv, ws, idleWarmup, n)
	took := time.Since(t0)
	peakEnvs := metric(b, metricsAddr, "penguin_environment_environments_active")
	settle(b, metricsAddr, lazy)
	rssEnd, anonEnd := rss(b, pid), anonRSS(b, pid)
	envs := metric(b, metricsAddr, "penguin_environment_environments_active")

	per := float64(rssEnd-rssWarm) / float64(n-idleWarmup)
	perAnon := float64(anonEnd-anonWarm) / float64(n-idleWarmup)
	b.ReportMetric(per/1024, "idle-session-KiB")
	b.ReportMetric(perAnon/1024, "idle-session-anon-KiB")
	b.ReportMetric(envs, "environments-left")
	b.Logf("%d sessions, each ran the task and was left idle (%s, %d at once); environment idle timeout: %s",
		n, took.Round(time.Second), idleParallel, map[bool]string{true: idleTimeout.String(), false: "none (this binary keeps every environment)"}[lazy])
	b.Logf("environments active at the end of the tasks: %.0f, once settled: %.0f; server threads: %d",
		peakEnvs, envs, procStatusCount(b, pid, "Threads"))
	b.Logf("resident growth per idle session over sessions %d..%d: %.1f KiB (anonymous %.1f KiB); target %.0f KiB; RSS %s → %s",
		idleWarmup, n, per/1024, perAnon/1024, float64(targetIdleRSS)/1024, mib(rssWarm), mib(rssEnd))
}

// runIdleTasks runs the task in sessions from..to, idleParallel at a time.
func runIdleTasks(ctx context.Context, b *testing.B, srv *server, ws string, from, to int) {
	b.Helper()
	next := make(chan int)
	errs := make(chan error, idleParallel)
	var wg sync.WaitGroup
	for range idleParallel {
		wg.Go(func() {
			for range next {
				if _, err := srv.tryTask(ctx, benchRoute, ws); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := from; i < to; i++ {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		b.Fatal(err)
	}
}

// settle waits until the sessions left idle hold nothing but their rows:
// no environment active (when the server disposes of idle ones) and no
// session loaded.
func settle(b *testing.B, addr string, lazy bool) {
	b.Helper()
	eventually.Within(b, idleSettle, "idle environments disposed of and sessions unloaded", func() bool {
		if lazy && metric(b, addr, "penguin_environment_environments_active") != 0 {
			return false
		}
		return metric(b, addr, "penguin_engine_sessions_loaded") == 0
	})
}

// metric reads one unlabelled sample from the server's /metrics.
func metric(b *testing.B, addr, name string) float64 {
	b.Helper()
	v, ok := lookupMetric(b, addr, name)
	if !ok {
		b.Fatalf("/metrics has no %s", name)
	}
	return v
}

// lookupMetric reads one unlabelled sample from the server's /metrics,
// and whether it is there.
func lookupMetric(b *testing.B, addr, name string) (float64, bool) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			return f, true
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return 0, false
}

// hasFlag reports whether `penguin serve` takes flag.
func hasFlag(b *testing.B, bin, flag string) bool {
	b.Helper()
	cmd := exec.Command(bin, "serve", "--help")
	cmd.Env = e2etest.BaseEnv(b)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("penguin serve --help: %v\n%s", err, out)
	}
	return strings.Contains(string(out), flag+" ")
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
