package engine_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// cutProxy is a TCP proxy in front of PostgreSQL that can cut the store
// off: Cut closes every connection and makes new ones close at once
// until Restore, as a network partition or a restarting server would.
type cutProxy struct {
	lis      net.Listener
	upstream string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis, upstream: upstream, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
		p.Cut()
	})
	return p
}

func (p *cutProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *cutProxy) serve(c net.Conn) {
	if !p.track(c) {
		_ = c.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil || !p.track(up) {
		_ = c.Close()
		if up != nil {
			_ = up.Close()
		}
		return
	}
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

// Cut drops every connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Restore lets connections through again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// streamEnd is how one stream of the session ended.
type streamEnd struct {
	name string
	at   time.Time
	last *penguinv1.RunEvent
	err  error
	evs  []*penguinv1.RunEvent
}

// logFailure runs a task whose log fails mid-run, through the real
// services and the engine's gRPC API on a loopback port, and checks that
// every stream of the session ends promptly with the not-recorded idle
// event and UNAVAILABLE, and that the session runs again once restore has
// brought the store back, with nothing committed lost or duplicated. cut
// makes the store fail; it returns when writes fail.
func logFailure(t *testing.T, st store.Store, cut, restore func()) {
	// The command waits for a file the test creates once the store is
	// cut, so the failing write (the command's output) comes after the
	// cut, at a moment the test knows.
	b := enginetest.NewBackends(t,
		emulator.Turn{Text: "Waiting.", ToolCalls: []emulator.ToolCall{{ID: "w1", Name: "exec_command",
			Arguments: `{"cmd":"while [ ! -e go ]; do sleep 0.02; done; echo released","description":"wait"}`}}},
		// The loop may send its next request before the failed write of
		// the command's output stops it: the group commit does not hold
		// the loop back.
		emulator.Turn{Match: "released", Text: "Never recorded."},
		emulator.Turn{Match: "go on", Text: "Back again."},
	)
	agentDir := filepath.Join(t.TempDir(), "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, agentDir, testConfig)
	mgr, err := session.New(session.Options{
		Store: st, LLM: penguinv1.NewLLMServiceClient(dialReal(t, b.LLM)), Environment: penguinv1.NewEnvironmentServiceClient(dialReal(t, b.Environment)),
		DefaultAgentState: agentDir, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = mgr.Shutdown(ctx)
	})
	addr := enginetest.Serve(t, "engine", func(g *grpc.Server) { penguinv1.RegisterEngineServiceServer(g, engine.New(mgr, nil)) })
	client := penguinv1.NewEngineServiceClient(dialReal(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	created, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{Model: enginetest.Model, Workspace: "ws", ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetSession().GetSessionId()

	watch, err := client.WatchSessions(ctx, &penguinv1.WatchSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetSnapshotEnd() != nil {
			break
		}
	}

	ends := make(chan streamEnd, 3)
	var runLast, attachLast atomic.Int64
	started := make(chan struct{})
	run, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "wait for go"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		var once sync.Once
		e := streamEnd{name: "Run"}
		for {
			r, err := run.Recv()
			if err != nil {
				e.at, e.err = time.Now(), err
				break
			}
			e.evs = append(e.evs, r.GetEvent())
			e.last = r.GetEvent()
			runLast.Store(r.GetEvent().GetSequence())
			if r.GetEvent().GetMessage().GetToolCall() != nil {
				once.Do(func() { close(started) })
			}
		}
		ends <- e
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the task never called its tool")
	}
	attach, err := client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		e := streamEnd{name: "Attach"}
		for {
			r, err := attach.Recv()
			if err != nil {
				e.at, e.err = time.Now(), err
				break
			}
			e.evs = append(e.evs, r.GetEvent())
			e.last = r.GetEvent()
			attachLast.Store(r.GetEvent().GetSequence())
		}
		ends <- e
	}()
	go func() {
		// The session list ends its watch when it cannot read the
		// session (the store is down), or shows the session idle with the
		// failure (a full disk still reads).
		e := streamEnd{name: "WatchSessions"}
		for {
			r, err := watch.Recv()
			if err != nil {
				e.at, e.err = time.Now(), err
				break
			}
			if c := r.GetSession(); c.GetSession().GetSessionId() == id && c.GetSession().GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
				e.at = time.Now()
				e.last = &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{
					State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: c.GetLastStatus(), Message: c.GetLastMessage()}}}
				break
			}
		}
		ends <- e
	}()
	// Attach has caught up with the Run stream: it follows the live
	// buffer, no longer reading the store. (The task waits in its command
	// meanwhile, so the Run stream's last event stays put.)
	eventually.True(t, "Attach to catch up with Run", func() bool {
		return attachLast.Load() > 0 && attachLast.Load() == runLast.Load()
	})

	cutAt := time.Now()
	cut()
	writeAt := time.Now()
	if err := os.WriteFile(filepath.Join(b.Root, "ws", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]streamEnd{}
	for range 3 {
		select {
		case e := <-ends:
			got[e.name] = e
		case <-time.After(30 * time.Second):
			// A stream that ended with a completed task means the
			// store did not fail; Attach then rightly follows on.
			lasts := map[string]*penguinv1.RunEvent{}
			for name, e := range got {
				lasts[name] = e.last
			}
			t.Fatalf("streams still open 30 s after the store failed; those that ended, with their last events: %v", lasts)
		}
	}
	for _, name := range []string{"Run", "Attach"} {
		e := got[name]
		st := e.last.GetState()
		if st.GetState() != penguinv1.SessionState_SESSION_STATE_IDLE || !st.GetNotRecorded() || st.GetStatus() != penguinv1.StopReason_STOP_REASON_FAILED {
			t.Errorf("%s: last event %v, want the idle event of a task whose log failed", name, e.last)
		}
		if status.Code(e.err) != codes.Unavailable {
			t.Errorf("%s ended with %v, want UNAVAILABLE", name, e.err)
		}
	}
	if w := got["WatchSessions"]; status.Code(w.err) != codes.Unavailable && w.last.GetState().GetStatus() != penguinv1.StopReason_STOP_REASON_FAILED {
		t.Errorf("WatchSessions ended with %v and %v, want UNAVAILABLE or the session idle after a failure", w.err, w.last)
	}
	for _, name := range []string{"Run", "Attach", "WatchSessions"} {
		e := got[name]
		t.Logf("%s ended %v after the store failed (%v after the first failing write began): %v", name,
			e.at.Sub(cutAt).Round(time.Millisecond), e.at.Sub(writeAt).Round(time.Millisecond), e.err)
	}

	// The session recovers with the store: the next Run works.
	restore()
	var second []*penguinv1.RunEvent
	eventually.Within(t, 20*time.Second, "a Run after the store is back", func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		s, err := client.Run(rctx, &penguinv1.RunRequest{SessionId: id, Prompt: "go on"})
		if err != nil {
			return false
		}
		evs, err := enginetest.Collect(s)
		if err != nil {
			t.Logf("Run after restore: %v", err)
			return false
		}
		second = evs
		return true
	})
	if st := end(t, second); st.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("the run after the store came back ended %v", st)
	}

	// Nothing committed is lost or duplicated: the log's numbers rise
	// strictly, every persisted message a stream showed at a number the
	// log has is that message, and the work of both runs is there once.
	hist := history(t, &env{t: t, client: client}, id)
	bySeq := map[int64]*penguinv1.OmniMessage{}
	var prev int64
	for _, ev := range hist {
		if ev.GetSequence() <= prev {
			t.Fatalf("log sequence %d after %d", ev.GetSequence(), prev)
		}
		prev = ev.GetSequence()
		bySeq[ev.GetSequence()] = ev.GetMessage()
	}
	for _, ev := range append(got["Run"].evs, second...) {
		m := ev.GetMessage()
		if m == nil || !omni.Persistable(m) {
			continue
		}
		if h, ok := bySeq[ev.GetSequence()]; ok && !proto.Equal(h, m) {
			t.Fatalf("sequence %d streamed as %v but logged as %v", ev.GetSequence(), m, h)
		}
	}
	msgs := enginetest.Messages(hist)
	if n := enginetest.CountKind(msgs, "tool_call"); n != 1 {
		t.Errorf("%d tool calls in the log, want 1", n)
	}
	for _, text := range []string{"wait for go", "go on", "Back again."} {
		n := 0
		for _, m := range msgs {
			if m.GetText().GetText() == text {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%q is %d times in the log, want once", text, n)
		}
	}
}

// A PostgreSQL store cut off mid-task (every connection dropped for a few
// seconds by a proxy in front of the real server).
func TestLogFailurePostgresCut(t *testing.T) {
	base := pgtest.URL(t, "logfail")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.lis.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	logFailure(t, st, func() {
		// The store stays away for 3 s, as during a failover; the Run
		// after it is tried until the store answers.
		proxy.Cut()
		time.AfterFunc(3*time.Second, proxy.Restore)
	}, func() {})
}

// sqliteOnSmallTmpfs opens an SQLite store, closed at the test's end, on a
// small tmpfs of the test's own: its directory, the database's path and
// the store.
func sqliteOnSmallTmpfs(t *testing.T) (dir, db string, st store.Store) {
	dir = smallTmpfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db = filepath.Join(dir, "engine.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return dir, db, st
}

// An SQLite store whose filesystem fills up mid-task: a small tmpfs of
// the test's own, filled by a file until no block is left.
func TestLogFailureSQLiteDiskFull(t *testing.T) {
	dir, db, st := sqliteOnSmallTmpfs(t)
	filler := filepath.Join(dir, "filler")
	logFailure(t, st, func() { fillUnderSQLite(t, db, filler) }, func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	})
}

// The disk filled under an SQLite store makes its next write fail even
// when the store's checkpointer has just copied the whole WAL into the
// database, the case in which SQLite writes into the WAL's old blocks.
func TestFillUnderSQLiteFailsWrites(t *testing.T) {
	dir, db, st := sqliteOnSmallTmpfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := st.CreateSession(ctx, &store.Session{ID: "s", Workspace: "/ws", AgentState: "/agent"}); err != nil {
		t.Fatal(err)
	}
	text := func(seq int64) store.Event {
		return store.Event{Sequence: seq, Message: &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{
			Text: &penguinv1.Text{Text: strings.Repeat("x", 2000)}}}}
	}
	for seq := range int64(30) {
		if err := st.AppendEvents(ctx, "s", text(seq+1)); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint like the store's own leaves the WAL file at its size
	// with every frame copied: the next write may start over in it.
	c, err := sql.Open("sqlite", db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		t.Fatal(err)
	}
	fillUnderSQLite(t, db, filepath.Join(dir, "filler"))
	if err := st.AppendEvents(ctx, "s", text(31)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write after the disk filled returned %v, want the store unavailable (disk full)", err)
	}
}

// fillUnderSQLite fills the filesystem of the SQLite database db with the
// file filler so that the store's next write fails. A full filesystem
// alone does not make it fail: once the store's background checkpoint has
// copied the whole WAL into the database, SQLite writes the next
// transaction from the start of the WAL file again, into blocks the file
// already has, and it succeeds (then the task went on and completed, and
// this test used to wait for an Attach that rightly follows the session
// on). So a checkpoint of the test's own first truncates the WAL to
// nothing, and the fill starts over in the rare case that a write of the
// engine (a lease renewal) came in between.
func fillUnderSQLite(t *testing.T, db, filler string) {
	t.Helper()
	c, err := sql.Open("sqlite", db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		if _, err := c.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
		fill(t, filler)
		wal, err := os.Stat(db + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		if wal.Size() == 0 {
			return
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the SQLite WAL was written every time between its truncation and the filling of the disk")
}

// fill writes the file path until its filesystem has no block left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for range 1 << 10 { // 64 MiB at most, far above the 8 MiB filesystem
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the filesystem never filled up")
}
