//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startIn starts a bash script from e's resident starter with its output
// on a pipe, and returns the process, its Group and the pipe's read end.
func startIn(t *testing.T, e *Env, perCommandCgroup bool, script string, args ...string) (*Process, *Group, *os.File) {
	t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{"-c", script}, args...)...)
	cmd.Env = testEnv()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd.Stdin, cmd.Stdout, cmd.Stderr = w, w, w
	p, g, err := e.Start(cmd, perCommandCgroup)
	w.Close()
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = g.Release() })
	return p, g, r
}

// TestStarterTracksDaemons starts, from the resident starter, a command
// that leaves a double-forked daemon behind: its Group still sees it (in
// the command's own cgroup, where the host offers one) and Kill ends it,
// while the environment's init lives on and starts the next command.
func TestStarterTracksDaemons(t *testing.T) {
	p := confined(t)
	e := newEnv(t, p)
	pidFile := filepath.Join(p.Workspace, "daemon.pid")
	proc, g, _ := startIn(t, e, true, `(setsid sleep 1000 & echo $! > "$0"); exit 3`, pidFile)
	if proc.Pid() <= 0 {
		t.Fatalf("Pid() = %d, want the command's pid as this process sees it", proc.Pid())
	}
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
	if err := g.Wait(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	succeeded(t, "the next command", bashIn(t, e, `true`))
}

// TestStarterRefusesClearly: what Start cannot do fails with an error
// that says why, and leaves the environment able to start the next
// command.
func TestStarterRefusesClearly(t *testing.T) {
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
	missing := exec.Command("/nonexistent/program")
	missing.Stdin, missing.Stdout, missing.Stderr = devNull, devNull, devNull
	if _, _, err := e.Start(missing, true); err == nil || !strings.Contains(err.Error(), "/nonexistent/program") {
		t.Errorf("Start of a program that does not exist: %v", err)
	}
	huge := exec.Command("/bin/true")
	huge.Env = []string{"BIG=" + strings.Repeat("x", maxStartRequest)}
	huge.Stdin, huge.Stdout, huge.Stderr = devNull, devNull, devNull
	if _, _, err := e.Start(huge, true); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("Start of a command line larger than a request: %v", err)
	}
	succeeded(t, "the next command", bashIn(t, e, `true`))

	// A command whose environment ends under it is reported, not
	// waited for forever.
	proc, _, _ := startIn(t, e, true, `sleep 1000`)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := proc.Wait(); err == nil {
		t.Error("Wait after the environment was closed: no error")
	}
	after := exec.Command("/bin/true")
	after.Stdin, after.Stdout, after.Stderr = devNull, devNull, devNull
	if _, _, err := e.Start(after, true); err == nil {
		t.Error("Start after Close: no error")
	}
}
