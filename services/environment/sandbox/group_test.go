//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
)

// procAlive reports whether pid is a live (non-zombie) process, from /proc.
func procAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	p, err := parseStat(b)
	return err == nil && p.state != 'Z' && p.state != 'X'
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := poll(ctx, func() (bool, string) { return cond(), what }); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// readPidFile polls until a script has written a pid to path.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "a pid in "+path, 20*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// waitDetached waits until pid has made itself a session leader and lost
// its parent: a daemon that escaped its command's group, session and tree.
func waitDetached(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, "process "+strconv.Itoa(pid)+" to detach", 20*time.Second, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		p, err := parseStat(b)
		if err != nil || p.sid != pid {
			return false
		}
		b, err = os.ReadFile("/proc/" + strconv.Itoa(p.ppid) + "/comm")
		return err == nil && strings.TrimSpace(string(b)) != "bash"
	})
}

// descendantSleeps lists the live "sleep" processes below root.
func descendantSleeps(t *testing.T, root int) []int {
	t.Helper()
	procs, err := readProcs()
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		queue = append(queue, children[pid]...)
		if pid != root && isSleep(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func isSleep(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == "sleep"
}

// pidsInGroupOrSession scans /proc directly (not through members) for live
// processes whose group or session is id: the independent check that no
// orphan survived.
func pidsInGroupOrSession(t *testing.T, id int) []int {
	t.Helper()
	procs, err := readProcs()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		if (p.pgrp == id || p.sid == id) && p.state != 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}

// startUnder starts a bash script through apply with the given cgroup
// parent ("" for process-group tracking) and waits until want sleep
// processes run below it.
func startUnder(t *testing.T, cgroupParent string, want int, script string, args ...string) (*exec.Cmd, *Group, []int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", script}, args...)...)
	g, err := (&Env{}).apply(cmd, cgroupParent)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		g.Release()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Kill()
		_ = cmd.Wait()
		if err := g.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	})
	var sleeps []int
	waitFor(t, strconv.Itoa(want)+" sleeps started", 20*time.Second, func() bool {
		sleeps = descendantSleeps(t, cmd.Process.Pid)
		return len(sleeps) >= want
	})
	return cmd, g, sleeps
}

// TestKillGroupLeavesNoOrphan is the orphan test with process-group
// tracking only: bash with two background sleeps, KillGroup, and /proc
// shows nothing of the group left.
func TestKillGroupLeavesNoOrphan(t *testing.T) {
	cmd, _, sleeps := startUnder(t, "", 2, `sleep 1000 & sleep 1000 & wait`)
	pid := cmd.Process.Pid
	if got := pidsInGroupOrSession(t, pid); len(got) != 3 {
		t.Fatalf("group %d has %v, want bash and two sleeps", pid, got)
	}
	if !GroupAlive(pid) {
		t.Fatal("GroupAlive = false for a running group")
	}
	if err := KillGroup(pid); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := WaitGroupGone(testkit.Context(t, 10*time.Second), pid); err != nil {
		t.Fatal(err)
	}
	if got := pidsInGroupOrSession(t, pid); len(got) != 0 {
		t.Errorf("survivors in group %d: %v", pid, got)
	}
	for _, s := range sleeps {
		if procAlive(s) {
			t.Errorf("sleep %d survived", s)
		}
	}
}

// TestKillGroupCatchesJobsAndSetsid proves the fallback reaches beyond the
// process group: background jobs of a job-control shell (own groups, same
// session) and a setsid child whose parent is still alive.
func TestKillGroupCatchesJobsAndSetsid(t *testing.T) {
	cmd, g, sleeps := startUnder(t, "", 2, `setsid sleep 1000 & set -m; sleep 1000 & wait`)
	pid := cmd.Process.Pid
	var ownGroup, ownSession int
	for _, s := range sleeps {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(s) + "/stat")
		p, _ := parseStat(b)
		if p.pgrp != pid && p.sid == pid {
			ownGroup++
		}
		if p.sid != pid {
			ownSession++
		}
	}
	if ownGroup == 0 || ownSession == 0 {
		t.Fatalf("setup: want one job in its own group and one in its own session, got %d and %d", ownGroup, ownSession)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := g.Wait(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Once bash is gone, the setsid child is no longer found through the
	// group, so Wait can return while the SIGKILL sent to it is still
	// being delivered (seen under load: alive 60 ms after the kill). A
	// child the kill missed would live for 1000 s.
	for _, s := range sleeps {
		waitFor(t, fmt.Sprintf("sleep %d to die", s), 5*time.Second, func() bool { return !procAlive(s) })
	}
}

// TestFallbackMissesDoubleForkDaemon documents the limit of process-group
// tracking: a process that setsid()s and whose parent exits before the kill
// escapes it. TestCgroupCatchesDaemons shows the cgroup closing the gap.
func TestFallbackMissesDoubleForkDaemon(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "daemon.pid")
	cmd, g, _ := startUnder(t, "", 1, `(setsid sleep 1000 & echo $! > "$0"); sleep 1000 & wait`, pidFile)
	daemon := readPidFile(t, pidFile)
	defer syscall.Kill(daemon, syscall.SIGKILL)
	waitDetached(t, daemon)
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := g.Wait(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !procAlive(daemon) {
		t.Fatalf("the detached daemon %d died: process-group tracking does better than documented, update KillGroup's doc", daemon)
	}
	t.Logf("as documented, process-group tracking missed the detached daemon %d; killing it here", daemon)
}

// TestCgroupCatchesDaemons proves per-command cgroups: background children,
// a setsid child and a double-forked daemon all die with Group.Kill, the
// group reports itself gone, and Release removes the cgroup, which a kill
// makes unfit for reuse.
func TestCgroupCatchesDaemons(t *testing.T) {
	parent, err := CgroupParent()
	if err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	pidFile := filepath.Join(t.TempDir(), "daemon.pid")
	cmd, g, _ := startUnder(t, parent, 2, `sleep 1000 & setsid sleep 1000 & (setsid sleep 1000 & echo $! > "$0"); wait`, pidFile)
	daemon := readPidFile(t, pidFile)
	dir := g.Cgroup()
	if dir == "" || filepath.Dir(dir) != parent {
		t.Fatalf("Cgroup() = %q, want a directory under %s", dir, parent)
	}
	var members []int
	waitFor(t, "four processes in the cgroup", 20*time.Second, func() bool {
		members, _ = (&cgroup{dir: dir}).procs()
		return len(members) >= 4 // bash and three sleeps
	})
	if !g.Alive() {
		t.Fatal("Alive = false for a running command")
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := g.Wait(testkit.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(members, daemon) {
		t.Errorf("the double-forked daemon %d is not among the cgroup's members %v", daemon, members)
	}
	for _, m := range members {
		if procAlive(m) {
			t.Errorf("process %d of the cgroup survived", m)
		}
	}
	if err := g.Release(); err != nil {
		t.Fatal(err)
	}
	if err := g.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	mustExist(t, dir, false) // killed, so never reused
}

// TestCgroupsAreReused runs commands one after another: the second starts
// in the cgroup the first left empty, and that cgroup still holds and kills
// everything its new command starts. A pooled cgroup removed behind the
// pool's back is skipped, and a cgroup released with processes left in it
// is not pooled: they are killed and the cgroup removed.
func TestCgroupsAreReused(t *testing.T) {
	parent, err := CgroupParent()
	if err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	if err := DrainCgroupPool(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = DrainCgroupPool() })
	run := func(script string) (*exec.Cmd, *Group) {
		t.Helper()
		cmd := exec.Command("bash", "-c", script)
		g, err := (&Env{}).apply(cmd, parent)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, g
	}
	// A cgroup killed while empty is not reused: this kernel would kill
	// the next command at birth.
	killed, g0 := run("true")
	_ = killed.Wait()
	killedDir := g0.Cgroup()
	if err := g0.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g0.Release(); err != nil {
		t.Fatal(err)
	}
	mustExist(t, killedDir, false)

	first, g1 := run("true")
	if err := first.Wait(); err != nil {
		t.Fatalf("a command after a killed cgroup: %v", err)
	}
	dir := g1.Cgroup()
	if err := g1.Release(); err != nil {
		t.Fatal(err)
	}
	mustExist(t, dir, true) // kept, empty, for the next command
	second, g2 := run("sleep 1000 & wait")
	if g2.Cgroup() != dir {
		t.Fatalf("the second command runs in %s, not in the reused %s", g2.Cgroup(), dir)
	}
	var members []int
	waitFor(t, "bash and sleep in the reused cgroup", 20*time.Second, func() bool {
		members, _ = (&cgroup{dir: dir}).procs()
		return len(members) >= 2
	})
	// Released with the sleep still running: the cgroup is emptied by
	// killing and removed, not pooled.
	if err := g2.Release(); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	for _, m := range members {
		if procAlive(m) {
			t.Errorf("process %d of the reused cgroup survived", m)
		}
	}
	mustExist(t, dir, false)

	third, g3 := run("true")
	_ = third.Wait()
	gone := g3.Cgroup()
	if err := g3.Release(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(gone); err != nil { // behind the pool's back
		t.Fatal(err)
	}
	fourth, g4 := run("true")
	if err := fourth.Wait(); err != nil {
		t.Fatalf("a command after a vanished pooled cgroup: %v", err)
	}
	last := g4.Cgroup()
	if last == gone || last == "" {
		t.Fatalf("the fourth command's cgroup is %q (the removed one was %s)", last, gone)
	}
	if err := g4.Release(); err != nil {
		t.Fatal(err)
	}
	if err := DrainCgroupPool(); err != nil {
		t.Fatal(err)
	}
	mustExist(t, last, false)
}

// TestParentDeathKillsCommand proves Pdeathsig: when the process that
// started a command (a stand-in for the environment service) is killed,
// the command's first process dies with it.
func TestParentDeathKillsCommand(t *testing.T) {
	spawner, pid, _ := startSpawner(t, false, `exec sleep 1000`)
	waitFor(t, "the command to run", 10*time.Second, func() bool { return procAlive(pid) })
	if err := spawner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = spawner.Wait()
	waitFor(t, "the orphaned command to die", 10*time.Second, func() bool { return !procAlive(pid) })
}

// TestSweepCgroups proves the crash story end to end: a service (the
// spawner) dies; Pdeathsig kills the command's shell, but its background
// sleep survives in the cgroup until SweepCgroups kills it and removes the
// cgroup.
func TestSweepCgroups(t *testing.T) {
	if _, err := CgroupParent(); err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	spawner, pid, dir := startSpawner(t, true, `sleep 1000 & wait`)
	if dir == "" {
		t.Fatal("spawner made no cgroup")
	}
	var members []int
	waitFor(t, "bash and sleep in the cgroup", 10*time.Second, func() bool {
		members, _ = (&cgroup{dir: dir}).procs()
		return len(members) == 2
	})
	if err := spawner.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = spawner.Wait()
	waitFor(t, "bash to die of its parent's death", 10*time.Second, func() bool { return !procAlive(pid) })
	var orphan int
	for _, m := range members {
		if m != pid {
			orphan = m
		}
	}
	if !procAlive(orphan) {
		t.Fatalf("setup: the background sleep %d should outlive its shell", orphan)
	}
	n, err := SweepCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("SweepCgroups removed %d cgroups, want at least 1", n)
	}
	mustExist(t, dir, false)
	if procAlive(orphan) {
		t.Errorf("orphan %d survived the sweep", orphan)
	}
}

// TestSweepEnvironmentCgroups proves that the cgroups of an environment
// whose service died (SIGKILL, so nothing was cleaned up) are removed by
// the next service's sweep.
func TestSweepEnvironmentCgroups(t *testing.T) {
	requireConfinement(t)
	cmd, line := startHelper(t, "helper-env", t.TempDir())
	dirs := strings.Fields(line)
	if len(dirs) == 0 {
		t.Fatalf("the helper reported no cgroups: %q", line)
	}
	for _, d := range dirs {
		mustExist(t, d, true)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := SweepCgroups(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		mustExist(t, d, false)
	}
}

// TestKillGroupRefusesOwnGroup proves the guard against killing the
// service itself, its group or init.
func TestKillGroupRefusesOwnGroup(t *testing.T) {
	for _, pid := range []int{0, 1, -5, os.Getpid(), syscall.Getpgrp()} {
		if err := KillGroup(pid); err == nil {
			t.Errorf("KillGroup(%d) = nil, want a refusal", pid)
		}
	}
}

// TestApplyErrors proves bad uses of Apply are clear errors.
func TestApplyErrors(t *testing.T) {
	started := exec.Command("true")
	if err := started.Run(); err != nil {
		t.Fatal(err)
	}
	joinGroup := exec.Command("true")
	joinGroup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: 1234}
	for _, tc := range []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"already started", started, "already started"},
		{"joins another group", joinGroup, "must lead its own process group"},
		{"unknown binary", exec.Command("penguin-no-such-binary"), "executable file not found"},
	} {
		if _, err := (&Env{}).apply(tc.cmd, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: apply = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewEnv(Policy{Mode: WorkspaceWrite, Workspace: t.TempDir(), Network: NetworkNone}, ""); err == nil || !strings.Contains(err.Error(), "path of the penguin binary") {
		t.Errorf("NewEnv without the binary = %v", err)
	}
}

// TestApplyRewritesCommand pins the trampoline command line, which the
// penguin binary must understand, and that mode none on the host's
// network runs the command itself.
func TestApplyRewritesCommand(t *testing.T) {
	standIn, err := os.Open(os.DevNull) // for the init's pidfd
	if err != nil {
		t.Fatal(err)
	}
	defer standIn.Close()
	e := &Env{p: Policy{Mode: WorkspaceWrite, Network: NetworkNone}.withDefaults(), self: "/usr/bin/penguin",
		pidfd: standIn, ended: make(chan struct{}),
		prefix: []string{"/usr/bin/penguin", "sandbox-exec", "run", "--join-fd", "3"}}
	cmd := exec.Command("bash", "-c", "echo hi")
	bash := cmd.Path
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	g, err := e.apply(cmd, "")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	want := []string{"/usr/bin/penguin", "sandbox-exec", "run", "--join-fd", "3", "--ctty", "--argv0", "bash", "--", bash, "-c", "echo hi"}
	if cmd.Path != "/usr/bin/penguin" || !slices.Equal(cmd.Args, want) {
		t.Errorf("rewritten to %q %q, want %q", cmd.Path, cmd.Args, want)
	}
	a := cmd.SysProcAttr
	if !a.Setsid || a.Setctty || a.Setpgid || a.Pdeathsig != syscall.SIGKILL {
		t.Errorf("SysProcAttr %+v: want Setsid and Pdeathsig, and the terminal left to the command", a)
	}
	if len(cmd.ExtraFiles) != 1 || cmd.ExtraFiles[0] != e.pidfd {
		t.Errorf("the init's pidfd is not the command's fd 3: %v", cmd.ExtraFiles)
	}
	plain := exec.Command("true")
	if _, err := (&Env{}).apply(plain, ""); err != nil {
		t.Fatal(err)
	}
	if plain.Args[0] != "true" || plain.SysProcAttr.Cloneflags != 0 || len(plain.ExtraFiles) != 0 {
		t.Errorf("mode none on the host's network should run the command directly, got %q", plain.Args)
	}
}

func TestParseStat(t *testing.T) {
	p, err := parseStat([]byte("4242 (we) ird (name) S 1 4242 4200 0 -1 4194560 0 0"))
	if err != nil {
		t.Fatal(err)
	}
	if p != (proc{pid: 4242, ppid: 1, pgrp: 4242, sid: 4200, state: 'S'}) {
		t.Errorf("parsed %+v", p)
	}
	for _, bad := range []string{"", "12 no parens", "x (a) S 1 2 3", "1 (a) S one 2 3"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) = nil error", bad)
		}
	}
}

func TestMembers(t *testing.T) {
	procs := []proc{
		{pid: 10, ppid: 1, pgrp: 10, sid: 10, state: 'S'},  // leader
		{pid: 11, ppid: 10, pgrp: 10, sid: 10, state: 'S'}, // same group
		{pid: 12, ppid: 10, pgrp: 12, sid: 10, state: 'S'}, // own group, same session
		{pid: 13, ppid: 12, pgrp: 13, sid: 13, state: 'S'}, // setsid child of 12
		{pid: 14, ppid: 13, pgrp: 13, sid: 13, state: 'S'}, // its child
		{pid: 15, ppid: 10, pgrp: 10, sid: 10, state: 'Z'}, // zombie
		{pid: 20, ppid: 1, pgrp: 20, sid: 20, state: 'S'},  // unrelated
	}
	var got []int
	for _, m := range members(procs, 10) {
		got = append(got, m.pid)
	}
	slices.Sort(got)
	if want := []int{10, 11, 12, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("members = %v, want %v", got, want)
	}
}

// TestWaitBeforeReap proves Group.Wait does not depend on the caller
// having reaped the command's first process: a zombie counts as gone, with
// and without a cgroup.
func TestWaitBeforeReap(t *testing.T) {
	parents := map[string]string{"process group": ""}
	if p, err := CgroupParent(); err == nil {
		parents["cgroup"] = p
	}
	for name, parent := range parents {
		t.Run(name, func(t *testing.T) {
			cmd, g, _ := startUnder(t, parent, 1, `sleep 1000 & wait`)
			if err := g.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := g.Wait(testkit.Context(t, 10*time.Second)); err != nil {
				t.Fatalf("Wait before cmd.Wait: %v", err)
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat")
			if err != nil {
				t.Fatal(err)
			}
			if p, err := parseStat(b); err != nil || p.state != 'Z' {
				t.Errorf("setup: the unreaped shell should be a zombie, stat %q", b)
			}
		})
	}
}
