//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSpawnerStartsChildrenOfTheService proves what the spawner is for: a
// command it starts is this process's child, inside the environment's
// PID namespace and cgroups, as the sandbox user; a command can kill the
// spawner (it runs as the same user), after which the init's starter
// serves; and closing the environment reaps every child it left.
func TestSpawnerStartsChildrenOfTheService(t *testing.T) {
	p := confined(t)
	e := newEnv(t, p)
	s := e.usableSpawner()

	proc, _, input := startIn(t, e, true, `cat > /dev/null`)
	pid := strconv.Itoa(proc.Pid())
	stat := readFile(t, "/proc/"+pid+"/stat")
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("the command's parent: %q, want this process %d", fields, os.Getpid())
	}
	if ns, err := os.Readlink("/proc/" + pid + "/ns/pid"); err != nil || ns != e.pidNS {
		t.Errorf("the command's PID namespace %q (%v), want the environment's %q", ns, err, e.pidNS)
	}
	if status := readFile(t, "/proc/"+pid+"/status"); !strings.Contains(status, "Uid:\t"+strconv.FormatUint(uint64(e.p.User.UID), 10)+"\t") {
		t.Errorf("the command does not run as the sandbox user %d: %s", e.p.User.UID, status)
	}
	cgroups := readFile(t, "/proc/"+pid+"/cgroup")
	for ctrl, dir := range e.cg.v1 {
		if !strings.Contains(cgroups, filepath.Base(dir)) {
			t.Errorf("the command is not in the environment's %s cgroup: %s", ctrl, cgroups)
		}
	}
	input.Close()
	if ws, err := proc.Wait(); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("Wait: %v %v", ws, err)
	}

	succeeded(t, "a command killing the spawner", bashIn(t, e, signalSpawner, "KILL"))
	select {
	case <-s.reaped:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed spawner was not reaped")
	}
	succeeded(t, "the next command, without the spawner", bashIn(t, e, `true`))
	if e.usableSpawner() != nil {
		t.Error("the environment still uses its dead spawner")
	}

	other := newEnv(t, confined(t))
	left, _, _ := startIn(t, other, true, `sleep 1000`)
	leftPid := left.Pid()
	if err := other.Close(); err != nil {
		t.Fatalf("Close with a command running: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(leftPid)); err == nil {
		t.Errorf("the command %d outlived its environment's Close", leftPid)
	}
}

// TestStoppedSpawnerIsDropped: a command can also stop the spawner
// (SIGSTOP); the command started meanwhile fails within spawnerTimeout,
// saying so, and the next ones start from the init's starter.
func TestStoppedSpawnerIsDropped(t *testing.T) {
	old := spawnerTimeout
	spawnerTimeout = 500 * time.Millisecond
	defer func() { spawnerTimeout = old }()
	e := newEnv(t, confined(t))
	succeeded(t, "a command stopping the spawner", bashIn(t, e, signalSpawner, "STOP"))
	late, _, _ := startIn(t, e, true, `true`)
	if _, err := late.Wait(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a command the stopped spawner never answered for: %v, want a timeout", err)
	}
	succeeded(t, "the next command", bashIn(t, e, `true`))
	if e.usableSpawner() != nil {
		t.Error("the environment still uses its stopped spawner")
	}
}

// signalSpawner is a script that sends the signal named by $0 to the
// environment's spawner, as any command may (the same user): it is the
// process whose command line is exactly the spawner's.
const signalSpawner = `for d in /proc/[0-9]*; do
	if [ "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" = "penguin sandbox-exec spawn " ]; then kill -$0 ${d#/proc/}; found=1; fi
done; [ -n "$found" ]`
