package command

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
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
	// A private HOME, PATH and SHELL keep the host's login profile (which
	// may be slow) and settings out of the test's commands.
	if o.Env == nil {
		o.Env = proctest.Env(t, "TERM=dumb")
	}
	m, err := NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// streamUntil reads s into out until out holds want, failing the test
// after 20 seconds.
func streamUntil(t *testing.T, ctx context.Context, s *Session, out *buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", want, out.String())
		}
		if _, err := s.Stream(ctx, 100*time.Millisecond, out); err != nil {
			t.Fatal(err)
		}
	}
}

// runToEnd starts command in m and streams it to its end.
func runToEnd(t *testing.T, m *Manager, command string) (*Session, Status, *buffer) {
	t.Helper()
	s, err := m.Start(context.Background(), StartOptions{Command: command, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	st, err := s.Stream(testkit.Context(t, time.Minute), 0, &out)
	if err != nil {
		t.Fatal(err)
	}
	return s, st, &out
}

func TestRunsToCompletion(t *testing.T) {
	m := newManager(t, Options{})
	_, st, out := runToEnd(t, m, "echo hello; echo err >&2; exit 3")
	if st.State != Exited || st.ExitCode != 3 {
		t.Fatalf("status %+v", st)
	}
	if out.String() != "hello\nerr\n" {
		t.Fatalf("output %q", out.String())
	}
}

func TestInteractivePythonAndCtrlC(t *testing.T) {
	m := newManager(t, Options{})
	ctx := testkit.Context(t, time.Minute)
	s, err := m.Start(context.Background(), StartOptions{Command: "python3 -i -q", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	streamUntil(t, ctx, s, &out, ">>> ")
	if err := s.Write(ctx, "print(6*7)\n"); err != nil {
		t.Fatal(err)
	}
	streamUntil(t, ctx, s, &out, "42")
	// The marker is printed by Python itself (the echoed input never holds
	// it whole), so Ctrl-C is sent only once the sleep has begun.
	if err := s.Write(ctx, "import time; print('now ' + 'sleeping'); time.sleep(100)\n"); err != nil {
		t.Fatal(err)
	}
	streamUntil(t, ctx, s, &out, "now sleeping")
	if err := s.Write(ctx, "\x03"); err != nil {
		t.Fatal(err)
	}
	streamUntil(t, ctx, s, &out, "KeyboardInterrupt")
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
	ctx := testkit.Context(t, time.Minute)
	s, err := m.Start(context.Background(), StartOptions{Command: "sleep 1000 & sleep 1000 & (sleep 1000 &) ; echo started; wait", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	streamUntil(t, ctx, s, &out, "started")
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

// TestPipesCarryOutputInputAndCtrlC runs a command on pipes: stdout and
// stderr arrive in one stream in the order written, input reaches stdin,
// and "\x03" interrupts the process group although no terminal turns it
// into SIGINT.
func TestPipesCarryOutputInputAndCtrlC(t *testing.T) {
	m := newManager(t, Options{})
	ctx := testkit.Context(t, time.Minute)
	script := `[ -t 1 ] && echo tty || echo no-tty; echo err >&2; read line; echo "got $line"; ` +
		`trap 'echo interrupted; exit 5' INT; echo ready; sleep 100 & wait`
	s, err := m.Start(context.Background(), StartOptions{Command: script, Dir: t.TempDir(), Pipes: true})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	streamUntil(t, ctx, s, &out, "err\n")
	if err := s.Write(ctx, "hello\n"); err != nil {
		t.Fatal(err)
	}
	streamUntil(t, ctx, s, &out, "ready")
	if err := s.Write(ctx, "\x03"); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stream(ctx, 0, &out)
	if err != nil || st.State != Exited || st.ExitCode != 5 {
		t.Fatalf("status %+v %v; output %q", st, err, out.String())
	}
	if want := "no-tty\nerr\ngot hello\nready\ninterrupted\n"; out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
	if err := s.Write(ctx, "late\n"); err != ErrExited {
		t.Fatalf("input after exit: %v", err)
	}
}

// TestPipesDeliverBulkOutputWhole streams 32 MiB through pipes and checks
// that every byte arrives.
func TestPipesDeliverBulkOutputWhole(t *testing.T) {
	m := newManager(t, Options{})
	const n = 32 << 20
	s, err := m.Start(context.Background(), StartOptions{Command: "head -c 33554432 /dev/zero | tr '\\0' x", Dir: t.TempDir(), Pipes: true})
	if err != nil {
		t.Fatal(err)
	}
	var count countWriter
	st, err := s.Stream(testkit.Context(t, time.Minute), 0, &count)
	if err != nil || st.State != Exited || st.ExitCode != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	if count.n != n || count.other != 0 {
		t.Fatalf("got %d bytes (%d not x), want %d", count.n, count.other, n)
	}
}

// TestOutputArrivesInOrder streams a long numbered sequence, on pipes and
// in a terminal, two of each at once, through a writer that scribbles over
// every piece once it has copied it (as an io.Writer's caller may reuse
// it): the sessions recycle their output buffers between pieces and share
// a pool of them, and a buffer handed back or pooled while still in use
// would show up here as missing, repeated or overwritten lines (or, under
// -race, as a race). The sequence (869 kB) stays under detachedBuffer, so
// that none of it is dropped however late a reader attaches: on a fast
// machine a command may print it all before its reader starts.
func TestOutputArrivesInOrder(t *testing.T) {
	const n = 140000
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	m := newManager(t, Options{})
	var wg sync.WaitGroup
	for _, pipes := range []bool{true, false, true, false} {
		s, err := m.Start(context.Background(), StartOptions{Command: "seq 1 " + strconv.Itoa(n), Dir: t.TempDir(), Pipes: pipes})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got scribbler
			st, err := s.Stream(testkit.Context(t, time.Minute), 0, &got)
			if err != nil || st.State != Exited || st.ExitCode != 0 {
				t.Errorf("pipes %v: status %+v %v", pipes, st, err)
				return
			}
			if got.b.String() != want.String() {
				t.Errorf("pipes %v: %d bytes arrived, not the %d of the sequence in order", pipes, got.b.Len(), want.Len())
			}
		}()
	}
	wg.Wait()
}

// TestUnreadOutputKeepsItsNewestMegabyte lets a command print 3 MB that
// nobody reads, on pipes and in a terminal: the session keeps the newest
// detachedBuffer bytes, in order, after a note counting the dropped ones.
func TestUnreadOutputKeepsItsNewestMegabyte(t *testing.T) {
	const n = 400000
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	all := want.String()
	kept := all[len(all)-detachedBuffer:]
	note := "[... " + strconv.Itoa(len(all)-detachedBuffer) + " bytes of earlier output dropped ...]\n"
	for _, pipes := range []bool{true, false} {
		m := newManager(t, Options{})
		s, err := m.Start(context.Background(), StartOptions{Command: "seq 1 " + strconv.Itoa(n), Dir: t.TempDir(), Pipes: pipes})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.Done():
		case <-testkit.Context(t, time.Minute).Done():
			t.Fatal("the command did not finish")
		}
		got := string(s.TakeUnread())
		if got != note+kept {
			t.Fatalf("pipes %v: %d bytes unread, starting %q; want %d starting %q", pipes, len(got), got[:min(len(got), 80)], len(note+kept), (note + kept)[:80])
		}
	}
}

// scribbler keeps a copy of what is written, then overwrites the piece.
type scribbler struct{ b bytes.Buffer }

func (w *scribbler) Write(p []byte) (int, error) {
	w.b.Write(p)
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

type countWriter struct{ n, other int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	c.other += len(p) - bytes.Count(p, []byte{'x'})
	return len(p), nil
}

// TestPipesKillEndsTheWholeTree is TestKillEndsTheWholeTree on pipes,
// where no terminal hangup helps.
func TestPipesKillEndsTheWholeTree(t *testing.T) {
	m := newManager(t, Options{})
	ctx := testkit.Context(t, time.Minute)
	s, err := m.Start(context.Background(), StartOptions{Command: "sleep 1000 & (sleep 1000 &) ; echo started; wait", Dir: t.TempDir(), Pipes: true})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	streamUntil(t, ctx, s, &out, "started")
	s.Kill(0)
	if left := proctest.GroupMembers(t, s.Pid()); len(left) != 0 {
		t.Fatalf("processes survived: %v", left)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not finish after the kill")
	}
}

// recordingTracker counts the releases of the tracker it wraps.
type recordingTracker struct {
	Tracker
	released *int32
	mu       *sync.Mutex
}

func (r recordingTracker) Release() error {
	r.mu.Lock()
	*r.released++
	r.mu.Unlock()
	return r.Tracker.Release()
}

// TestFinishedCommandsReleaseTheirTrackersPromptly removes and evicts
// finished commands and checks that their trackers are released then, not
// kept until the environment closes.
func TestFinishedCommandsReleaseTheirTrackersPromptly(t *testing.T) {
	var mu sync.Mutex
	var released int32
	count := func() int32 {
		mu.Lock()
		defer mu.Unlock()
		return released
	}
	// LoginShell: no shell snapshot, whose login shell would count as one
	// more release.
	m := newManager(t, Options{Max: 2, LoginShell: true, Launcher: LauncherFunc(func(cmd *exec.Cmd) (Tracker, error) {
		tr, err := Unconfined().Launch(cmd)
		return recordingTracker{Tracker: tr, released: &released, mu: &mu}, err
	})})
	dir := t.TempDir()
	start := func() *Session {
		s, err := m.Start(context.Background(), StartOptions{Command: "true", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Done()
		return s
	}
	releases := func(want int32, after string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for count() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d releases after %s, want %d", count(), after, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a := start()
	m.Remove(a.ID())
	releases(1, "removing a finished command")
	start()
	start()
	start() // evicts the least recently used finished one
	releases(2, "an eviction")
}

// TestPipesCtrlDEndsInput sends Ctrl-D to a command on pipes that reads
// its input to the end: "\x04" closes its stdin, as a terminal's end of
// input would, and later input is refused with a clear error.
func TestPipesCtrlDEndsInput(t *testing.T) {
	m := newManager(t, Options{})
	ctx := testkit.Context(t, time.Minute)
	s, err := m.Start(context.Background(), StartOptions{Command: "echo ready; wc -l; echo counted; sleep 1000", Dir: t.TempDir(), Pipes: true})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	streamUntil(t, ctx, s, &out, "ready")
	if err := s.Write(ctx, "one\ntwo\n\x04"); err != nil {
		t.Fatal(err)
	}
	streamUntil(t, ctx, s, &out, "counted")
	if got := strings.Fields(out.String()); len(got) != 3 || got[1] != "2" {
		t.Fatalf("output %q, want ready, a count of 2 and counted", out.String())
	}
	if err := s.Write(ctx, "three\n"); !errors.Is(err, ErrInputClosed) {
		t.Fatalf("input after Ctrl-D: %v, want ErrInputClosed", err)
	}
	s.Kill(0)
}

// profileHome makes a HOME whose login profile runs profile, and returns
// the environment to start shells in and the file each run of the profile
// appends a line to.
func profileHome(t *testing.T, profile string) ([]string, string) {
	t.Helper()
	home := t.TempDir()
	runs := filepath.Join(home, "runs")
	script := "echo run >> " + runs + "\n" + profile + "\n"
	if err := os.WriteFile(filepath.Join(home, ".bash_profile"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return proctest.Env(t, "HOME="+home, "TERM=dumb"), runs
}

// runOutput runs a command to its end and returns its output.
func runOutput(t *testing.T, m *Manager, command string) string {
	t.Helper()
	s, err := m.Start(testkit.Context(t, time.Minute), StartOptions{Command: command, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out buffer
	if _, err := s.Stream(testkit.Context(t, time.Minute), 0, &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestShellSnapshot proves that the login profile runs once per
// environment and that every command runs in what it exported, with the
// fixed variables (the vault, TERM) winning over it and its own output
// left out.
func TestShellSnapshot(t *testing.T) {
	env, runs := profileHome(t, `echo "profile noise"; export FROM_PROFILE="a b
c"; export TERM=xterm-256color; export PATH="/opt/from-profile:$PATH"`)
	m := newManager(t, Options{Env: env, Fixed: []string{"TERM=dumb", "SECRET=vault"}})
	for range 3 {
		out := runOutput(t, m, `printf '%s|%s|%s|%s\n' "$FROM_PROFILE" "$TERM" "$SECRET" "${PATH%%:*}"`)
		if want := "a b\nc|dumb|vault|/opt/from-profile\n"; out != want {
			t.Fatalf("command output %q, want %q", out, want)
		}
	}
	if n := countLines(t, runs); n != 1 {
		t.Fatalf("the profile ran %d times for three commands, want once", n)
	}
}

// TestLoginShellOption proves that LoginShell keeps the login profile for
// every command, as before snapshots.
func TestLoginShellOption(t *testing.T) {
	env, runs := profileHome(t, `export FROM_PROFILE=yes`)
	m := newManager(t, Options{Env: env, LoginShell: true})
	for range 3 {
		if out := runOutput(t, m, `echo "$FROM_PROFILE"`); out != "yes\n" {
			t.Fatalf("output %q", out)
		}
	}
	if n := countLines(t, runs); n != 3 {
		t.Fatalf("the profile ran %d times for three login-shell commands, want 3", n)
	}
}

// TestBrokenProfile proves that a profile that fails is reported once, in
// the first command's output, and that commands still run, without what
// it would have set.
func TestBrokenProfile(t *testing.T) {
	env, _ := profileHome(t, `export HALF=set; echo "pyenv: cannot rehash" >&2; exit 3`)
	m := newManager(t, Options{Env: env})
	first := runOutput(t, m, `echo "half=$HALF"`)
	for _, want := range []string{"the login shell exited with status 3", "pyenv: cannot rehash", "half=\n"} {
		if !strings.Contains(first, want) {
			t.Errorf("first output %q lacks %q", first, want)
		}
	}
	if second := runOutput(t, m, `echo again`); second != "again\n" {
		t.Errorf("the notice came again: %q", second)
	}
}

// TestHangingProfile proves that a profile that hangs is given up on
// once, after the timeout, and reported; later commands do not wait.
func TestHangingProfile(t *testing.T) {
	env, _ := profileHome(t, `sleep 1000`)
	m := newManager(t, Options{Env: env, ProfileTimeout: 500 * time.Millisecond})
	started := time.Now()
	first := runOutput(t, m, `echo first`)
	if !strings.Contains(first, "did not finish within 500ms") || !strings.HasSuffix(first, "first\n") {
		t.Errorf("first output %q", first)
	}
	if d := time.Since(started); d > 20*time.Second {
		t.Errorf("the first command took %v", d)
	}
	started = time.Now()
	if second := runOutput(t, m, `echo second`); second != "second\n" {
		t.Errorf("second output %q", second)
	}
	if d := time.Since(started); d > 10*time.Second {
		t.Errorf("the second command waited %v for the profile", d)
	}
}

// refusingStarter is a Starter whose commands never start, as when a
// confined environment's init cannot start one: Start succeeds (it does
// not wait for the init's answer) and the process's Wait says why.
type refusingStarter struct{}

func (refusingStarter) Launch(cmd *exec.Cmd) (Tracker, error) {
	return nil, errors.New("refusingStarter only starts")
}

func (refusingStarter) Start(cmd *exec.Cmd) (Process, Tracker, error) {
	return refusedProcess{}, refusedTracker{}, nil
}

type refusedProcess struct{}

func (refusedProcess) Pid() int { return 0 }
func (refusedProcess) Wait() (int, error) {
	return -1, errors.New("starting /bin/bash (in /gone): no such file or directory")
}

type refusedTracker struct{}

func (refusedTracker) Kill() error    { return nil }
func (refusedTracker) Alive() bool    { return false }
func (refusedTracker) Release() error { return nil }

// TestCommandThatNeverStartedSaysWhy: a command whose start fails after
// Start returned ends with no exit code (-1) and the reason in its status,
// and its session is done rather than waiting for output that never comes.
func TestCommandThatNeverStartedSaysWhy(t *testing.T) {
	m := newManager(t, Options{LoginShell: true, Launcher: refusingStarter{}})
	s, st, _ := runToEnd(t, m, "true")
	if st.State != Exited || st.ExitCode != -1 || st.Err == nil || !strings.Contains(st.Err.Error(), "/gone") {
		t.Fatalf("status %+v, want exited with code -1 and the reason", st)
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session of a command that never started is not done")
	}
	if s.Pid() != 0 {
		t.Errorf("Pid %d, want 0", s.Pid())
	}
}
