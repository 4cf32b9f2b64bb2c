package environment_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// ownTrampoline is the test trampoline under a path of this test's own,
// so that the sandbox inits its service starts can be told from those of
// other tests by their argv[0].
func ownTrampoline(t *testing.T) string {
	t.Helper()
	bin, err := trampoline()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(t.TempDir(), "penguin-sandbox")
	if err := os.Symlink(bin, own); err != nil {
		t.Fatal(err)
	}
	return own
}

// inits counts the live sandbox init processes started through self, the
// processes that hold the namespaces of one environment each.
func inits(t *testing.T, self string) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(self + "\x00" + sandbox.SubcommandName + "\x00init\x00")
	n := 0
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(cmdline, want) && processAlive(pid) {
			n++
		}
	}
	return n
}

// TestFileToolsStartNoSandbox checks that an environment whose calls only
// use the file tools never starts its sandbox: the service reads and
// writes files itself, beneath the workspace's os.Root.
func TestFileToolsStartNoSandbox(t *testing.T) {
	requireConfinement(t)
	self := ownTrampoline(t)
	h := start(t, environment.Options{Self: self})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
	env := resp.GetEnvironmentId()
	if err := os.WriteFile(filepath.Join(resp.GetWorkspace(), "hello.txt"), []byte("hello there\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"hello.txt"}`), ok, "hello there")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"out.txt","content":"x\n"}`), ok)
	wantStop(t, h.exec(env, "glob", `{"pattern":"*.txt"}`), ok, "out.txt")
	// Asking after a process that cannot exist starts nothing either.
	wantStop(t, h.exec(env, "input_command", `{"process_id":"1"}`), failed, "no command session")
	wantStop(t, h.exec(env, "kill_command", `{"process_id":"1"}`), failed, "no command session")
	procs, err := h.client.ListProcesses(testkit.Context(t, 10*time.Second), &penguinv1.ListProcessesRequest{EnvironmentId: env})
	if err != nil || len(procs.GetProcesses()) != 0 {
		t.Fatalf("ListProcesses before any command: %v %v", procs, err)
	}
	if n := inits(t, self); n != 0 {
		t.Fatalf("%d sandbox inits run for an environment that only used file tools, want 0", n)
	}

	// The first command starts it, and disposal ends it.
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo confined $(id -u)"}`), ok, "confined ", "[exit code 0]")
	if n := inits(t, self); n != 1 {
		t.Fatalf("%d sandbox inits after the first command, want 1", n)
	}
	if _, err := h.client.DisposeEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.DisposeEnvironmentRequest{EnvironmentId: env}); err != nil {
		t.Fatal(err)
	}
	if n := inits(t, self); n != 0 {
		t.Fatalf("%d sandbox inits left after disposal, want 0", n)
	}
}

// TestConcurrentFirstCommandsStartOneSandbox races the first commands of
// an environment, of both kinds that need its sandbox (exec_command and
// a custom tool): they all run, in one sandbox started once.
func TestConcurrentFirstCommandsStartOneSandbox(t *testing.T) {
	requireConfinement(t)
	self := ownTrampoline(t)
	h := start(t, environment.Options{Self: self})
	env := h.create(&penguinv1.CreateEnvironmentRequest{
		SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE,
		Tools:       &penguinv1.ToolConfig{Custom: []*penguinv1.ToolSpec{{Name: "whoami", Command: "echo custom $(id -u)"}}},
	}).GetEnvironmentId()

	const calls = 8
	results := make([]result, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx := testkit.Context(t, 120*time.Second)
			if i%2 == 0 {
				results[i], errs[i] = h.tryExec(ctx, env, "exec_command", `{"cmd":"echo exec $(id -u)"}`)
			} else {
				results[i], errs[i] = h.tryExec(ctx, env, "whoami", `{}`)
			}
		})
	}
	wg.Wait()
	uid := strconv.FormatUint(uint64(sandbox.DefaultIdentity.UID), 10)
	for i := range calls {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		want := "exec " + uid
		if i%2 == 1 {
			want = "custom " + uid
		}
		wantStop(t, results[i], ok, want)
	}
	if n := inits(t, self); n != 1 {
		t.Fatalf("%d sandbox inits after %d concurrent first commands, want 1", n, calls)
	}
}

// TestFailedStartIsEveryCallsError checks that a sandbox that cannot
// start fails the calls that need it, each with the cause, while the
// environment was created and its file tools work.
func TestFailedStartIsEveryCallsError(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{Self: filepath.Join(t.TempDir(), "no-such-trampoline")})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{
		SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE,
		Tools:       &penguinv1.ToolConfig{Custom: []*penguinv1.ToolSpec{{Name: "custom", Command: "true"}}},
	})
	env := resp.GetEnvironmentId()
	for range 2 {
		wantStop(t, h.exec(env, "exec_command", `{"cmd":"true"}`), failed, "no-such-trampoline")
		wantStop(t, h.exec(env, "custom", `{}`), failed, "no-such-trampoline")
	}
	if err := os.WriteFile(filepath.Join(resp.GetWorkspace(), "a.txt"), []byte("still readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"a.txt"}`), ok, "still readable")
}
