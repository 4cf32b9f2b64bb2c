//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
)

// startIn starts a bash script from e's resident starter with its input
// and output on pipes, and returns the process, its Group and the write
// end of its input (closing it ends a script that reads its input).
func startIn(t *testing.T, e *Env, perCommandCgroup bool, script string, args ...string) (*Process, *Group, *os.File) {
	t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{"-c", script}, args...)...)
	cmd.Env = testEnv()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close() })
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, devNull, devNull
	p, g, err := e.Start(cmd, perCommandCgroup)
	inR.Close()
	devNull.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = g.Release() })
	return p, g, inW
}

// TestStarterTracksDaemons starts, from the resident starter, a command
// that leaves a double-forked daemon behind: its Group still sees it (in
// the command's own cgroup, where the host offers one) and Kill ends it,
// while the environment's init lives on and starts the next command.
func TestStarterTracksDaemons(t *testing.T) { eachStarter(t, testStarterTracksDaemons) }

func testStarterTracksDaemons(t *testing.T) {
	p := confined(t)
	e := newEnv(t, p)
	pidFile := filepath.Join(p.Workspace, "daemon.pid")
	// The script waits for its input to end before it starts the daemon:
	// a command is moved into its cgroup right after it started (see
	// Env.Start), and its pid is known once it was moved.
	proc, g, input := startIn(t, e, true, `cat > /dev/null; (setsid sleep 1000 > /dev/null 2>&1 & echo $! > "$0"); exit 3`, pidFile)
	if proc.Pid() <= 0 {
		t.Fatalf("Pid() = %d, want the command's pid as this process sees it", proc.Pid())
	}
	input.Close()
	ws, err := proc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ws.ExitStatus() != 3 {
		t.Errorf("exit status %d, want 3", ws.ExitStatus())
	}
	if _, err := CgroupParent(); err == nil && g.Cgroup() == "" {
		t.Error("no cgroup of its own for a command, though the host offers them")
	}
	waitFor(t, "the daemon's pid file", 10*time.Second, func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.TrimSpace(string(b)) != ""
	})
	if !g.Alive() {
		t.Fatal("Alive = false while the command's daemon runs")
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	succeeded(t, "the next command", bashIn(t, e, `true`))
}

// TestStarterRefusesClearly: what Start cannot do fails with an error
// that says why, and leaves the environment able to start the next
// command.
func TestStarterRefusesClearly(t *testing.T) { eachStarter(t, testStarterRefusesClearly) }

func testStarterRefusesClearly(t *testing.T) {
	e := newEnv(t, confined(t))
	cmd := exec.Command("/bin/true")
	cmd.Stdout = new(strings.Builder)
	if _, _, err := e.Start(cmd, true); err == nil || !strings.Contains(err.Error(), "*os.File") {
		t.Errorf("Start with a standard output that is no file: %v", err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	// A command that cannot start is reported by Wait (Start does not
	// wait for the answer to its request), and its Group has no pid to
	// signal.
	missing := exec.Command("/nonexistent/program")
	missing.Stdin, missing.Stdout, missing.Stderr = devNull, devNull, devNull
	proc, g, err := e.Start(missing, true)
	if err != nil {
		t.Fatalf("Start of a program that does not exist: %v, want its Wait to say so", err)
	}
	if _, err := proc.Wait(); err == nil || !strings.Contains(err.Error(), "/nonexistent/program") {
		t.Errorf("Wait for a program that does not exist: %v", err)
	}
	if proc.Pid() != 0 || g.Pid() != 0 || g.Alive() {
		t.Errorf("a command that never started: Pid %d, Group pid %d, alive %v", proc.Pid(), g.Pid(), g.Alive())
	}
	if err := g.Release(); err != nil {
		t.Errorf("Release of a command that never started: %v", err)
	}
	gone := exec.Command("/bin/true")
	gone.Dir = filepath.Join(t.TempDir(), "removed")
	gone.Stdin, gone.Stdout, gone.Stderr = devNull, devNull, devNull
	if proc, _, err := e.Start(gone, false); err != nil {
		t.Errorf("Start in a missing directory: %v", err)
	} else if _, err := proc.Wait(); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("Wait for a command whose directory is missing: %v", err)
	}
	huge := exec.Command("/bin/true")
	huge.Env = []string{"BIG=" + strings.Repeat("x", maxStartRequest)}
	huge.Stdin, huge.Stdout, huge.Stderr = devNull, devNull, devNull
	if _, _, err := e.Start(huge, true); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("Start of a command line larger than a request: %v", err)
	}
	succeeded(t, "the next command", bashIn(t, e, `true`))

	// A command whose environment ends under it is reported, not
	// waited for forever: as killed (the spawner's, a child of this
	// process), or as not known (the init's, whose report never came).
	proc, _, _ = startIn(t, e, true, `sleep 1000`)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if ws, err := proc.Wait(); err == nil && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Errorf("Wait after the environment was closed: status %#x and no error", uint32(ws))
	}
	after := exec.Command("/bin/true")
	after.Stdin, after.Stdout, after.Stderr = devNull, devNull, devNull
	if _, _, err := e.Start(after, true); err == nil {
		t.Error("Start after Close: no error")
	}
}
