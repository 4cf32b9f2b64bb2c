package command

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/proctest"
)

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newManager(t *testing.T, o Options) *Manager {
	t.Helper()
	// A private HOME keeps the host's login profile (which may be slow)
	// out of the test's commands.
	o.Env = append(os.Environ(), "TERM=dumb", "HOME="+t.TempDir())
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRunsToCompletion(t *testing.T) {
	m := newManager(t, Options{})
	s, err := m.Start(context.Background(), StartOptions{Command: "echo hello; echo err >&2; exit 3", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	st, err := s.Stream(ctxFor(t), 0, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != Exited || st.ExitCode != 3 {
		t.Fatalf("status %+v", st)
	}
	if out.String() != "hello\nerr\n" {
		t.Fatalf("output %q", out.String())
	}
}

func TestInteractivePythonAndCtrlC(t *testing.T) {
	m := newManager(t, Options{})
	ctx := ctxFor(t)
	s, err := m.Start(context.Background(), StartOptions{Command: "python3 -i -q", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in %q", want, out.String())
			}
			if _, err := s.Stream(ctx, 100*time.Millisecond, &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(">>> ")
	if err := s.Write(ctx, "print(6*7)\n"); err != nil {
		t.Fatal(err)
	}
	waitFor("42")
	// The marker is printed by Python itself (the echoed input never holds
	// it whole), so Ctrl-C is sent only once the sleep has begun.
	if err := s.Write(ctx, "import time; print('now ' + 'sleeping'); time.sleep(100)\n"); err != nil {
		t.Fatal(err)
	}
	waitFor("now sleeping")
	if err := s.Write(ctx, "\x03"); err != nil {
		t.Fatal(err)
	}
	waitFor("KeyboardInterrupt")
	if err := s.Write(ctx, "exit()\n"); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stream(ctx, 0, &out)
	if err != nil || st.State != Exited || st.ExitCode != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
}

func TestKillEndsTheWholeTree(t *testing.T) {
	m := newManager(t, Options{})
	ctx := ctxFor(t)
	s, err := m.Start(context.Background(), StartOptions{Command: "sleep 1000 & sleep 1000 & (sleep 1000 &) ; echo started; wait", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	for !strings.Contains(out.String(), "started") {
		if _, err := s.Stream(ctx, 100*time.Millisecond, &out); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(proctest.GroupMembers(t, s.Pid())); n < 4 {
		t.Fatalf("expected the shell and three sleeps, found %d processes", n)
	}
	s.Kill(0)
	if left := proctest.GroupMembers(t, s.Pid()); len(left) != 0 {
		t.Fatalf("processes survived: %v", left)
	}
	st := s.Info()
	if st.State != Killed {
		t.Fatalf("state %v", st.State)
	}
}

func TestSessionCap(t *testing.T) {
	m := newManager(t, Options{Max: 2})
	dir := t.TempDir()
	a, err := m.Start(context.Background(), StartOptions{Command: "sleep 1000", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Start(context.Background(), StartOptions{Command: "true", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	c, err := m.Start(context.Background(), StartOptions{Command: "sleep 1000", Dir: dir})
	if err != nil {
		t.Fatalf("the finished session should have been evicted: %v", err)
	}
	if _, ok := m.Get(b.ID()); ok {
		t.Fatal("finished session not evicted")
	}
	if _, err := m.Start(context.Background(), StartOptions{Command: "true", Dir: dir}); err == nil || !strings.Contains(err.Error(), "kill_command") {
		t.Fatalf("expected a refusal, got %v", err)
	}
	for _, s := range []*Session{a, c} {
		if _, ok := m.Get(s.ID()); !ok {
			t.Fatal("running session evicted")
		}
	}
	ids := []string{}
	for _, i := range m.List() {
		ids = append(ids, i.ID)
	}
	if strings.Join(ids, ",") != a.ID()+","+c.ID() {
		t.Fatalf("list %v", ids)
	}
}
