//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// requireConfinement skips a confinement test, naming what is missing,
// when this host cannot enforce the confined modes. TestHostCheck asserts
// that Check then fails clearly instead.
func requireConfinement(t *testing.T) {
	t.Helper()
	if err := Check(Policy{Mode: WorkspaceWrite, Workspace: t.TempDir(), Network: NetworkNone}); err != nil {
		t.Skipf("this host cannot confine commands: %v", err)
	}
}

// confined is a workspace-write policy on a new workspace.
func confined(t *testing.T) Policy {
	t.Helper()
	requireConfinement(t)
	return Policy{Mode: WorkspaceWrite, Workspace: t.TempDir(), Network: NetworkNone}
}

// outsideDir makes a directory that no rule of a policy covers and that a
// confined command can see.
func outsideDir(t *testing.T) string { return proctest.DirOutsideTmp(t) }

// visibleSelf copies this test binary into dir, where a confined command
// can run it, and returns its path.
func visibleSelf(t *testing.T, dir string) string { return proctest.SelfIn(t, dir, "sandbox.test") }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustExist(t *testing.T, path string, want bool) {
	t.Helper()
	_, err := os.Lstat(path)
	switch {
	case want && err != nil:
		t.Errorf("%s should exist: %v", path, err)
	case !want && err == nil:
		t.Errorf("%s should not exist", path)
	}
}

// denied asserts that a command failed because it was refused (a
// permission denial, or a read-only file system), not for another reason.
func denied(t *testing.T, what string, r result) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s: succeeded, want it refused (output %q)", what, r.out)
		return
	}
	if r.code == ExitCode {
		t.Errorf("%s: the sandbox itself failed: %q", what, r.out)
		return
	}
	out := strings.ToLower(r.out)
	if !strings.Contains(out, "permission denied") && !strings.Contains(out, "read-only file system") &&
		!strings.Contains(out, "operation not permitted") && !strings.Contains(out, "must be superuser") {
		t.Errorf("%s: exit %d without a refusal: %q", what, r.code, r.out)
	}
}

func succeeded(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Errorf("%s: exit %d, want success (output %q)", what, r.code, r.out)
	}
}

// TestWorkspaceWrite proves the workspace-write mode against real
// processes: writes (create, truncate, remove, rename, chmod, symlink
// escape) outside the workspace fail, the same writes inside succeed and
// keep the workspace owner's ownership on disk, reads are allowed
// everywhere, and extra writable paths and /dev/null stay writable.
func TestWorkspaceWrite(t *testing.T) { eachWay(t, workspaceWriteHolds) }

func workspaceWriteHolds(t *testing.T) {
	p := confined(t)
	ws := p.Workspace
	scratch := outsideDir(t)
	if err := os.Chmod(scratch, 0o777); err != nil {
		t.Fatal(err)
	}
	out := outsideDir(t)
	writeFile(t, filepath.Join(out, "keep.txt"), "keep")
	writeFile(t, filepath.Join(ws, "given.txt"), "given")
	p.WritablePaths = []string{scratch}
	e := newEnv(t, p)
	probe := visibleSelf(t, out)

	t.Run("inside succeeds", func(t *testing.T) {
		r := bashIn(t, e, `set -e; cd "$0"
echo hi > a.txt
mkdir -p d/e
mv a.txt d/e/b.txt
ln -s b.txt d/e/c
echo more >> d/e/c
truncate -s 2 d/e/b.txt
chmod 600 given.txt
echo changed >> given.txt
cat d/e/b.txt
rm -r d`, ws)
		succeeded(t, "writing inside the workspace", r)
		if r.out != "hi" {
			t.Errorf("output %q, want %q", r.out, "hi")
		}
		// The files keep the workspace owner's ownership on disk.
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(ws, "given.txt"), &st); err != nil || st.Uid != uint32(os.Getuid()) {
			t.Errorf("given.txt is owned by %d (%v), want the workspace's owner %d", st.Uid, err, os.Getuid())
		}
	})
	t.Run("writable path succeeds", func(t *testing.T) {
		succeeded(t, "writing to a writable path", bashIn(t, e, `echo s > "$0/s.txt"`, scratch))
		if got := readFile(t, filepath.Join(scratch, "s.txt")); got != "s\n" {
			t.Errorf("scratch file holds %q", got)
		}
	})
	t.Run("devices succeed", func(t *testing.T) {
		succeeded(t, "writing to /dev/null", bashIn(t, e, `echo x > /dev/null && echo z > /dev/zero`))
	})
	t.Run("reads outside succeed", func(t *testing.T) {
		r := bashIn(t, e, `cat "$0/keep.txt" && ls "$0" >/dev/null && head -c 10 /etc/passwd >/dev/null`, out)
		succeeded(t, "reading outside", r)
		if r.out != "keep" {
			t.Errorf("read %q, want %q", r.out, "keep")
		}
	})
	t.Run("create outside denied", func(t *testing.T) {
		denied(t, "creating a file outside", bashIn(t, e, `echo x > "$0/new.txt"`, out))
		mustExist(t, filepath.Join(out, "new.txt"), false)
		denied(t, "creating a directory outside", bashIn(t, e, `mkdir "$0/newdir"`, out))
		mustExist(t, filepath.Join(out, "newdir"), false)
	})
	t.Run("modify outside denied", func(t *testing.T) {
		keep := filepath.Join(out, "keep.txt")
		denied(t, "appending outside", bashIn(t, e, `echo x >> "$0"`, keep))
		denied(t, "truncating by open outside", bashIn(t, e, `: > "$0"`, keep))
		denied(t, "truncate(2) outside", runIn(t, e, probe, "helper-truncate", keep))
		denied(t, "removing outside", bashIn(t, e, `rm -f "$0"`, keep))
		denied(t, "changing the mode outside", bashIn(t, e, `chmod 777 "$0"`, keep))
		denied(t, "moving out of the workspace", bashIn(t, e, `echo m > "$0/m.txt" && mv "$0/m.txt" "$1/m.txt"`, ws, out))
		mustExist(t, filepath.Join(out, "m.txt"), false)
		if got := readFile(t, keep); got != "keep" {
			t.Errorf("file outside changed to %q", got)
		}
		if info, err := os.Stat(keep); err != nil || info.Mode().Perm() != 0o644 {
			t.Errorf("file outside: %v %v, want mode 0644 kept", info.Mode(), err)
		}
	})
	t.Run("symlink escape denied", func(t *testing.T) {
		link := filepath.Join(ws, "escape")
		if err := os.Symlink(filepath.Join(out, "via-link.txt"), link); err != nil {
			t.Fatal(err)
		}
		denied(t, "writing through a symlink that leads out", bashIn(t, e, `echo x > "$0"`, link))
		mustExist(t, filepath.Join(out, "via-link.txt"), false)
	})
}

// TestReadOnly proves the read-only mode: the workspace can be read but
// not written, and /tmp stays writable, also with the workspace under
// /tmp.
func TestReadOnly(t *testing.T) { eachWay(t, readOnlyHolds) }

func readOnlyHolds(t *testing.T) {
	requireConfinement(t)
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, "src.txt"), "source")
	e := newEnv(t, Policy{Mode: ReadOnly, Workspace: ws, Network: NetworkNone})

	r := bashIn(t, e, `cat "$0/src.txt"`, ws)
	succeeded(t, "reading the workspace", r)
	if r.out != "source" {
		t.Errorf("read %q", r.out)
	}
	denied(t, "creating in the workspace", bashIn(t, e, `echo x > "$0/new.txt"`, ws))
	mustExist(t, filepath.Join(ws, "new.txt"), false)
	denied(t, "overwriting in the workspace", bashIn(t, e, `echo x > "$0/src.txt"`, ws))
	denied(t, "removing in the workspace", bashIn(t, e, `rm "$0/src.txt"`, ws))
	if got := readFile(t, filepath.Join(ws, "src.txt")); got != "source" {
		t.Errorf("workspace file changed to %q", got)
	}
	succeeded(t, "writing to /tmp", bashIn(t, e, `echo t > /tmp/t.txt && cat /tmp/t.txt`))
}

// TestPrivateTmp proves that each environment has a /tmp of its own,
// shared by its commands, bounded in size, and that the host's /tmp
// (other environments' workspaces included) is out of sight.
func TestPrivateTmp(t *testing.T) {
	p := confined(t)
	p.Limits.Tmp = 8 << 20
	a := newEnv(t, p)
	other := confined(t)
	b := newEnv(t, other)
	hostFile := filepath.Join(os.TempDir(), "penguin-host-tmp-"+strconv.Itoa(os.Getpid()))
	writeFile(t, hostFile, "host")
	t.Cleanup(func() { os.Remove(hostFile) })

	// A name of this run's own, so that a /tmp/x someone left on the host
	// says nothing either way.
	x := "penguin-private-tmp-" + strconv.Itoa(os.Getpid())
	succeeded(t, "writing /tmp", bashIn(t, a, `echo mine > /tmp/`+x+` && echo var > /var/tmp/y`))
	r := bashIn(t, a, `cat /tmp/`+x+` /tmp/y; echo "TMPDIR=$TMPDIR"; ls "$0" 2>&1; ls "$1" 2>&1`, hostFile, other.Workspace)
	if !strings.Contains(r.out, "mine\nvar\n") {
		t.Errorf("the environment's /tmp did not keep its files between commands: %q", r.out)
	}
	if strings.Count(r.out, "No such file or directory") != 2 {
		t.Errorf("the host's /tmp or another environment's workspace is visible: %q", r.out)
	}
	mustExist(t, filepath.Join(os.TempDir(), x), false)
	if r := bashIn(t, b, `cat /tmp/`+x); r.code == 0 {
		t.Errorf("another environment sees this one's /tmp: %q", r.out)
	}
	r = bashIn(t, a, `head -c 16777216 /dev/zero > /tmp/big`)
	if r.code == 0 || !strings.Contains(r.out, "No space left on device") {
		t.Errorf("writing 16 MiB into an 8 MiB /tmp: exit %d, %q", r.code, r.out)
	}
}

// TestSiblingsAreHidden proves that a command sees, of the directory
// that holds its workspace and other environments' (Policy.Siblings),
// only its own workspace: another workspace cannot be listed, read or
// written, whatever its permissions. Without Siblings the same command
// reads the other workspace's file, so the test can fail.
func TestSiblingsAreHidden(t *testing.T) { eachWay(t, siblingsAreHidden) }

func siblingsAreHidden(t *testing.T) {
	requireConfinement(t)
	root := outsideDir(t)
	mine, theirs := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{mine, theirs} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(mine, "own.txt"), "own")
	writeFile(t, filepath.Join(theirs, "secret.txt"), "secret")
	if err := os.Chmod(filepath.Join(theirs, "secret.txt"), 0o666); err != nil {
		t.Fatal(err)
	}
	p := Policy{Mode: WorkspaceWrite, Workspace: mine, Network: NetworkNone}
	if r := runUnder(t, p, "cat", filepath.Join(theirs, "secret.txt")); r.code != 0 || r.out != "secret" {
		t.Fatalf("without Siblings, reading another workspace: exit %d, %q; want it read (the test's premise)", r.code, r.out)
	}
	p.Siblings = root
	e := newEnv(t, p)
	r := bashIn(t, e, `ls -a "$0"; cat "$1"/own.txt; echo new > "$1"/new.txt && echo wrote`, root, mine)
	if want := ".\n..\na\nownwrote\n"; r.code != 0 || r.out != want {
		t.Errorf("listing the siblings and using the own workspace: exit %d, %q; want %q (only its own workspace)", r.code, r.out, want)
	}
	for what, script := range map[string]string{
		"listing":  `ls "$0"`,
		"reading":  `cat "$0"/secret.txt`,
		"writing":  `echo x > "$0"/secret.txt`,
		"creating": `mkdir -p "$0" && echo x > "$0"/planted.txt`,
	} {
		if r := bashIn(t, e, script, theirs); r.code == 0 {
			t.Errorf("%s another workspace succeeded: %q", what, r.out)
		}
	}
	if got := readFile(t, filepath.Join(theirs, "secret.txt")); got != "secret" {
		t.Errorf("the other workspace's file changed: %q", got)
	}
	mustExist(t, filepath.Join(theirs, "planted.txt"), false)
}

// TestNetwork proves network isolation with a real listener in the
// test's namespace: an environment's command cannot connect to it (nor to
// an abstract Unix socket of the host's), an unconfined one can, and
// commands of one environment share its own loopback.
func TestNetwork(t *testing.T) {
	requireConfinement(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	addr := ln.Addr().String()
	abstract, err := net.Listen("unix", "@penguin-sandbox-test-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer abstract.Close()
	dir := outsideDir(t)
	probe := visibleSelf(t, dir)

	t.Run("the host's network reaches the listener", func(t *testing.T) {
		succeeded(t, "dialing from mode none", runIn(t, newEnv(t, Policy{}), probe, "helper-dial", addr))
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener saw no connection")
		}
	})
	for _, p := range []Policy{
		{Network: NetworkNone},
		{Mode: WorkspaceWrite, Workspace: t.TempDir(), Network: NetworkNone},
	} {
		t.Run("no network, "+p.Mode.String(), func(t *testing.T) {
			e := newEnv(t, p)
			if r := runIn(t, e, probe, "helper-dial", addr); r.code != 3 {
				t.Errorf("dial from an environment: exit %d (%q), want 3 (connect failed)", r.code, r.out)
			}
			if r := runIn(t, e, probe, "helper-dial-unix", abstract.Addr().String()); r.code != 3 {
				t.Errorf("dial of the host's abstract socket: exit %d (%q), want 3", r.code, r.out)
			}
			succeeded(t, "the sandbox's own loopback", runIn(t, e, probe, "helper-loopback"))
			mine, err := os.Readlink("/proc/self/ns/net")
			if err != nil {
				t.Fatal(err)
			}
			r := runIn(t, e, probe, "helper-netns")
			succeeded(t, "reading the namespace", r)
			if strings.TrimSpace(r.out) == mine {
				t.Errorf("command shares the test's network namespace %s", mine)
			}
			// A server one command leaves running is reachable by the
			// next: the namespace is the environment's, not the
			// command's.
			succeeded(t, "a server in the background", runKeep(t, e, "/bin/bash", "-c", `"$0" helper-serve 127.0.0.1:47123 >/dev/null 2>&1 &`, probe))
			deadline := time.Now().Add(20 * time.Second)
			for runIn(t, e, probe, "helper-dial", "127.0.0.1:47123").code != 0 {
				if time.Now().After(deadline) {
					t.Fatal("the next command never reached the server the first left running")
				}
			}
		})
	}
	select {
	case <-accepted:
		t.Error("an environment's command reached the listener")
	default:
	}
}

// TestPrivileges proves a confined command's identity and powers: the
// sandbox user, no capabilities, no_new_privs, the system call filter, a
// PID namespace in which the service is invisible, set-user-ID programs
// without effect, and the calls the filter refuses.
func TestPrivileges(t *testing.T) { eachWay(t, privilegesAreDropped) }

func privilegesAreDropped(t *testing.T) {
	// As for a service started under nohup: a hang-up ignored by the
	// service must not stay ignored in its commands.
	signal.Ignore(syscall.SIGHUP)
	t.Cleanup(func() { signal.Reset(syscall.SIGHUP) })
	p := confined(t)
	e := newEnv(t, p)
	probe := visibleSelf(t, outsideDir(t))
	r := bashIn(t, e, `id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp|SigIgn):' /proc/self/status; ls -d /proc/[0-9]* | wc -l; kill -0 "$0" 2>&1; echo kill=$?`, strconv.Itoa(os.Getpid()))
	succeeded(t, "reading its own identity", r)
	for _, want := range []string{"65534\n65534\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "kill=1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if ign := ignoredSignals(t, r.out); ign&jobSignals != 0 {
		t.Errorf("the command starts with signals ignored (SigIgn %016x): Ctrl-C or a hang-up would not reach it", ign)
	}
	if lines := strings.Split(r.out, "\n"); len(lines) > 7 {
		if n, _ := strconv.Atoi(strings.TrimSpace(lines[7])); n > 8 {
			t.Errorf("the command sees %d processes; its PID namespace should hold only the environment's", n)
		}
	}
	// Nothing but its standard files reaches a command: not the init's
	// descriptors (the idmapping's user namespace, the proxy's socket,
	// the starter's channels), nor what the service inherited.
	r = bashIn(t, e, `cd /proc/self/fd && echo *`)
	if got := strings.TrimSpace(r.out); got != "0 1 2 3" { // 3: the listing itself
		t.Errorf("a command's open descriptors: %q, want only its standard files", got)
	}
	denied(t, "mount through a set-user-ID binary", bashIn(t, e, `mkdir -p /tmp/m && mount -t tmpfs none /tmp/m 2>&1`))
	denied(t, "writing a cgroup", bashIn(t, e, `echo 0 > /sys/fs/cgroup/pids/cgroup.procs`))
	denied(t, "writing a sysctl", bashIn(t, e, `echo '|/bin/sh' > /proc/sys/kernel/core_pattern`))
	r = runIn(t, e, probe, "helper-syscalls", p.Workspace)
	succeeded(t, "trying refused system calls", r)
	for _, call := range []string{"mknod-char", "mknod-block", "unshare-user", "clone-user", "mount", "bpf", "keyctl", "io_uring_setup", "perf_event_open", "ptrace-attach", "setns"} {
		if !strings.Contains(r.out, call+": operation not permitted") && !strings.Contains(r.out, call+": function not implemented") {
			t.Errorf("%s was not refused:\n%s", call, r.out)
		}
	}
	if !strings.Contains(r.out, "mkfifo: ok") {
		t.Errorf("a fifo could not be made:\n%s", r.out)
	}
}

// jobSignals are the signals a terminal and a job's end send (SIGHUP,
// SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU), as bits
// of /proc's SigIgn mask. Only they are checked: what the test's own
// parent ignored (make ignores a real-time signal) reaches every process
// it starts, commands included.
const jobSignals = 1<<(1-1) | 1<<(2-1) | 1<<(3-1) | 1<<(13-1) | 1<<(15-1) | 1<<(20-1) | 1<<(21-1) | 1<<(22-1)

// ignoredSignals returns the SigIgn mask that out (a grep of
// /proc/self/status) shows.
func ignoredSignals(t *testing.T, out string) uint64 {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("SigIgn line %q: %v", line, err)
			}
			return mask
		}
	}
	t.Fatalf("no SigIgn line in %q", out)
	return 0
}

// TestLimitsHold proves the environment's limits against real load: a
// fork storm stops at the process limit and a memory hog is killed at the
// memory limit, each reported by Events, while another environment and
// this process keep working; a file beyond the size limit is cut short.
func TestLimitsHold(t *testing.T) {
	p := confined(t)
	p.Limits = Limits{Pids: 64, Memory: 64 << 20, FileSize: 1 << 20}
	e := newEnv(t, p)
	other := newEnv(t, confined(t))

	probe := visibleSelf(t, outsideDir(t))
	before := e.Events()
	r := runIn(t, e, probe, "helper-forkstorm", "200")
	var started, refused int
	if _, err := fmt.Sscanf(r.out, "started %d refused %d", &started, &refused); err != nil || started >= 64 || refused == 0 {
		t.Errorf("a fork storm of 200 under a limit of 64: %q", r.out)
	}
	after := e.Events()
	if after.PidsRefused <= before.PidsRefused {
		t.Errorf("no refused fork was counted: %+v -> %+v", before, after)
	}
	if d := after.Describe(before, p.Limits); !strings.Contains(d, "process limit (64) was reached") {
		t.Errorf("Describe = %q", d)
	}
	succeeded(t, "another environment during the storm's aftermath", bashIn(t, other, `for i in $(seq 100); do true & done; wait`))

	before = e.Events()
	r = bashIn(t, e, `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived ${#x}`)
	if r.code == 0 || strings.Contains(r.out, "survived") {
		t.Errorf("a 200 MB hog under a 64 MiB limit: exit %d, %q", r.code, r.out)
	}
	after = e.Events()
	if after.OOMKills <= before.OOMKills {
		t.Errorf("no OOM kill was counted: %+v -> %+v", before, after)
	}
	succeeded(t, "the environment after its hog", bashIn(t, e, `echo fine`))
	succeeded(t, "another environment after the hog", bashIn(t, other, `echo fine`))

	r = bashIn(t, e, `cd "$0" && head -c 2097152 /dev/zero > big; echo "exit=$?"; stat -c %s big`, p.Workspace)
	if !strings.Contains(r.out, "exit=153") || !strings.Contains(r.out, "\n1048576") {
		t.Errorf("a 2 MiB file under a 1 MiB limit: %q", r.out)
	}
}

// TestCloseEndsEverything proves that a daemon a command leaves behind
// survives the command, and that closing the environment ends it.
func TestCloseEndsEverything(t *testing.T) {
	p := confined(t)
	e, err := NewEnv(p, self(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	marker := filepath.Join(p.Workspace, "beat")
	succeeded(t, "starting a daemon", runKeep(t, e, "/bin/bash", "-c", `cd "$0" && (setsid bash -c 'while true; do date +%s%N > beat; sleep 0.05; done' </dev/null >/dev/null 2>&1 &)`, p.Workspace))
	beating := func() bool {
		a := readFileOr(marker)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if b := readFileOr(marker); b != "" && b != a {
				return true
			}
			time.Sleep(20 * time.Millisecond) // the daemon writes every 50 ms
		}
		return false
	}
	if !beating() {
		t.Fatal("the daemon does not run after its command ended, so the test proves nothing")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if beating() {
		t.Fatal("the daemon outlived its environment")
	}
}

func readFileOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestSandboxExecBadArguments proves that bad trampoline arguments are
// clear errors, returned before anything is joined or executed.
func TestSandboxExecBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no role given"},
		{[]string{"escape"}, "unknown role"},
		{[]string{"run", "--mode", "sideways", "--join-fd", "3", "--", "true"}, "unknown sandbox mode"},
		{[]string{"run", "--mode", "workspace-write", "--join-fd", "3"}, "no command"},
		{[]string{"run", "--mode", "workspace-write", "--", "true"}, "--join-fd is required"},
		{[]string{"run", "--mode", "workspace-write", "--join-fd", "3", "--", "true"}, "absolute --workspace"},
		{[]string{"run", "--mode", "read-only", "--workspace", "/w", "--join-fd", "3", "--", "true"}, "never run as root"},
		{[]string{"run", "--bogus", "--", "true"}, "flag provided but not defined"},
		{[]string{"run", "--mode", "none", "--join-fd", "3", "--", "penguin-no-such-command"}, "executable file not found"},
		{[]string{"init", "--mode", "none", "--network", "none"}, "--ready-fd is required"},
		{[]string{"init", "--mode", "none", "--network", "sideways", "--ready-fd", "3"}, "unknown network access"},
	} {
		err := SandboxExec(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SandboxExec(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestInitRefusesSharedNetNS proves the init's own guard: a network of its
// own asked for, but the clone flag lost, fails loudly on the ready pipe
// and with ExitCode instead of serving commands on the host's network.
func TestInitRefusesSharedNetNS(t *testing.T) {
	mine, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.CommandContext(testkit.Context(t, 20*time.Second), self(t), SubcommandName, "init", "--mode", "none", "--network", "none", "--parent-netns", mine, "--ready-fd", "3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Env = testEnv()
	out, err := cmd.CombinedOutput()
	w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode {
		t.Fatalf("err %v, want exit %d (output %q)", err, ExitCode, out)
	}
	report, _ := io.ReadAll(r)
	if !strings.HasPrefix(string(report), readyError) || !strings.Contains(string(report), "shares the service's") {
		t.Errorf("the init reported %q", report)
	}
}

// TestPseudoTerminal proves that a confined command works on a
// pseudo-terminal started by pty.Start after Apply: it is the terminal's
// controlling process (tty, /dev/stdout), and confinement still holds.
func TestPseudoTerminal(t *testing.T) {
	p := confined(t)
	e := newEnv(t, p)
	out := outsideDir(t)
	ctx := testkit.Context(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, "/bin/bash", "-c", `tty; echo in > "$0/in.txt"; echo viastdout > /dev/stdout; echo x > "$1/x.txt"; echo "exit=$?"; read -r line; echo "got $line"`, p.Workspace, out)
	cmd.Env = testEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	g, err := e.Apply(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	f, err := pty.StartWithAttrs(cmd, nil, cmd.SysProcAttr)
	if err != nil {
		t.Fatalf("pty.Start after Apply: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString("typed\n"); err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(&buf, bufio.NewReader(f))
		done <- err
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("command: %v", err)
	}
	<-done // EIO once the terminal's last holder is gone
	text := buf.String()
	for _, want := range []string{"/dev/pts/", "viastdout", "Read-only file system", "exit=1", "got typed"} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal output %q lacks %q", text, want)
		}
	}
	mustExist(t, filepath.Join(p.Workspace, "in.txt"), true)
	mustExist(t, filepath.Join(out, "x.txt"), false)
}

// TestProcSelfExe proves the recommended self, "/proc/self/exe", reaches
// the trampoline: the path is resolved in the forked child, before exec.
func TestProcSelfExe(t *testing.T) {
	p := confined(t)
	e, err := NewEnv(p, "/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	out := outsideDir(t)
	r := bashIn(t, e, `echo in > "$0/in.txt" && echo out > "$1/out.txt"`, p.Workspace, out)
	denied(t, "writing outside via /proc/self/exe", r)
	mustExist(t, filepath.Join(p.Workspace, "in.txt"), true)
	mustExist(t, filepath.Join(out, "out.txt"), false)
}

// TestNewEnvFailsLoudly proves that an environment whose namespaces cannot
// be set up is an error, never an environment that runs commands with
// less confinement: here the workspace vanished before its mount.
func TestNewEnvFailsLoudly(t *testing.T) {
	requireConfinement(t)
	ws := filepath.Join(t.TempDir(), "gone")
	if _, err := NewEnv(Policy{Mode: WorkspaceWrite, Workspace: ws, Network: NetworkNone}, self(t)); err == nil || !strings.Contains(err.Error(), ws) {
		t.Fatalf("NewEnv with a missing workspace = %v", err)
	}
}

// TestIdleEnvironmentsHoldNoThreads proves that a live environment costs
// no OS thread while it waits on its init: forty of them leave the
// process's thread count where it was, give or take the runtime's own.
// Each waited in a blocking Wait before, one thread apiece, so ten
// thousand idle sessions would have hit the runtime's thread limit.
func TestIdleEnvironmentsHoldNoThreads(t *testing.T) {
	requireConfinement(t)
	const n = 40
	before := threads(t)
	for range n {
		e, err := NewEnv(Policy{Mode: WorkspaceWrite, Workspace: t.TempDir(), Network: NetworkNone}, self(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
	}
	if grew := threads(t) - before; grew > n/4 {
		t.Fatalf("%d live environments added %d threads", n, grew)
	}
}

// threads is this process's number of OS threads.
func threads(t *testing.T) int {
	t.Helper()
	for line := range strings.SplitSeq(readFile(t, "/proc/self/status"), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}
