package envwatch_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/envwatch"
	"google.golang.org/grpc"
)

// fakeEnv is an environment whose watch streams what the test sends and
// whose process list the test sets; it runs inside a synctest bubble.
type fakeEnv struct {
	mu         sync.Mutex
	reports    chan *penguinv1.BackgroundDone
	background bool // a background command still runs
	watches    map[string]int
}

func newFakeEnv() *fakeEnv {
	return &fakeEnv{reports: make(chan *penguinv1.BackgroundDone), watches: map[string]int{}}
}

type stream struct {
	grpc.ClientStream
	ctx context.Context
	env *fakeEnv
}

func (s *stream) Recv() (*penguinv1.WatchEnvironmentResponse, error) {
	select {
	case bd := <-s.env.reports:
		return &penguinv1.WatchEnvironmentResponse{Notice: &penguinv1.WatchEnvironmentResponse_BackgroundDone{BackgroundDone: bd}}, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

func (e *fakeEnv) WatchEnvironment(ctx context.Context, in *penguinv1.WatchEnvironmentRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[penguinv1.WatchEnvironmentResponse], error) {
	e.mu.Lock()
	e.watches[in.GetEnvironmentId()]++
	e.mu.Unlock()
	return &stream{ctx: ctx, env: e}, nil
}

func (e *fakeEnv) ListProcesses(context.Context, *penguinv1.ListProcessesRequest, ...grpc.CallOption) (*penguinv1.ListProcessesResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.background {
		return &penguinv1.ListProcessesResponse{}, nil
	}
	return &penguinv1.ListProcessesResponse{Processes: []*penguinv1.ProcessInfo{{Background: true, State: penguinv1.ProcessState_PROCESS_STATE_RUNNING}}}, nil
}

// session records what the watcher hands it and how often it is held.
type session struct {
	mu        sync.Mutex
	delivered []*penguinv1.OmniMessage
	holds     int
	busy      bool
}

func (s *session) Deliver(n *penguinv1.OmniMessage) {
	s.mu.Lock()
	s.delivered = append(s.delivered, n)
	s.mu.Unlock()
}

func (s *session) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *session) Hold() func() {
	s.mu.Lock()
	s.holds++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.holds--
		s.mu.Unlock()
	}
}

func (s *session) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds
}

func newWatcher(s *session) *envwatch.Watcher {
	return envwatch.New(s, "session-1", time.Minute, slog.New(slog.DiscardHandler))
}

// A report reaches the session; the watch then ends after the grace
// period once no background command runs and no task holds the session.
func TestReportDeliveredThenTheWatchSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, s := newFakeEnv(), &session{}
		env.background = true
		w := newWatcher(s)
		w.Watch(env, "env-1")
		w.Watch(env, "env-1") // already watched: no second stream
		env.reports <- &penguinv1.BackgroundDone{ProcessId: "p1", Command: "make build", ExitCode: 3, Output: strings.Repeat("x", 5000) + "TAIL"}
		synctest.Wait()
		s.mu.Lock()
		if len(s.delivered) != 1 {
			t.Fatalf("%d reports delivered", len(s.delivered))
		}
		text := s.delivered[0].GetText().GetText()
		s.mu.Unlock()
		for _, want := range []string{"[background_task_done]", "kind: command", "id: p1", "status: completed", "detail: exit code 3", "Command: make build", "chars of earlier output dropped", "TAIL"} {
			if !strings.Contains(text, want) {
				t.Errorf("report lacks %q:\n%s", want, text)
			}
		}
		if s.delivered[0].GetText().GetSender() != penguinv1.Sender_SENDER_HARNESS {
			t.Errorf("report sender = %v, want the harness", s.delivered[0].GetText().GetSender())
		}

		// Another command still runs: the watch goes on past the grace.
		time.Sleep(envwatch.Grace + time.Millisecond)
		synctest.Wait()
		if s.held() != 1 {
			t.Fatal("the watch ended while a background command still ran")
		}
		// It finishes; its report settles the watch.
		env.mu.Lock()
		env.background = false
		env.mu.Unlock()
		env.reports <- &penguinv1.BackgroundDone{ProcessId: "p2", StopReason: penguinv1.StopReason_STOP_REASON_TIMEOUT}
		time.Sleep(envwatch.Grace + time.Millisecond)
		synctest.Wait()
		if s.held() != 0 {
			t.Fatal("the watch outlived the last background command")
		}
		env.mu.Lock()
		defer env.mu.Unlock()
		if env.watches["env-1"] != 1 {
			t.Fatalf("%d watch streams opened for one environment", env.watches["env-1"])
		}
	})
}

// A busy session keeps watching whatever the environment runs.
func TestABusySessionKeepsWatching(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env, s := newFakeEnv(), &session{busy: true}
		w := newWatcher(s)
		w.Watch(env, "env-1")
		w.Settle(env)
		time.Sleep(envwatch.Grace + time.Millisecond)
		synctest.Wait()
		if s.held() != 1 {
			t.Fatal("the watch of a busy session ended")
		}
		// Watching another environment ends the first watch.
		w.Watch(env, "env-2")
		synctest.Wait()
		if s.held() != 1 {
			t.Fatalf("%d watches held after switching environments, want 1", s.held())
		}
		w.Stop()
		if s.held() != 0 {
			t.Fatal("Stop returned before the watch let go")
		}
	})
}

func TestCommandNoticeOfAShortSilentCommand(t *testing.T) {
	text := envwatch.CommandNotice(&penguinv1.BackgroundDone{ProcessId: "p9", Command: "true", StopReason: penguinv1.StopReason_STOP_REASON_ABORTED}).GetText().GetText()
	for _, want := range []string{"status: aborted", "[no output]"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "dropped") {
		t.Errorf("a short output was cut:\n%s", text)
	}
}
