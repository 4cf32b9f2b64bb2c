//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// requireLandlock skips a positive confinement test, naming the missing
// kernel feature, when this kernel cannot enforce the file-system modes.
// TestHostCheck asserts that Check then fails clearly instead.
func requireLandlock(t *testing.T) {
	t.Helper()
	abi, err := HostProbe().LandlockABI()
	if err != nil {
		t.Skipf("kernel has no Landlock (%v): workspace-write and read-only cannot be enforced here", err)
	}
	if abi < MinLandlockABI {
		t.Skipf("kernel offers Landlock ABI v%d, below the v%d needed for truncation control", abi, MinLandlockABI)
	}
}

// requireNetNS skips a no-network test when this process cannot create a
// network namespace.
func requireNetNS(t *testing.T) {
	t.Helper()
	if err := HostProbe().NewNetNS(); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
}

// outsideDir makes a directory outside both the workspace and the usual
// temporary directory, so no rule of the policy covers it.
func outsideDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "penguin-sandbox-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

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

// denied asserts that a command failed because of a permission denial, not
// for another reason.
func denied(t *testing.T, what string, r result) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s: succeeded, want permission denied (output %q)", what, r.out)
		return
	}
	if r.code == ExitCode {
		t.Errorf("%s: the sandbox itself failed: %q", what, r.out)
		return
	}
	if !strings.Contains(strings.ToLower(r.out), "permission denied") {
		t.Errorf("%s: exit %d without a permission denial: %q", what, r.code, r.out)
	}
}

func succeeded(t *testing.T, what string, r result) {
	t.Helper()
	if r.code != 0 {
		t.Errorf("%s: exit %d, want success (output %q)", what, r.code, r.out)
	}
}

// TestWorkspaceWrite proves the workspace-write mode against real
// processes: writes (create, truncate, remove, rename, symlink escape)
// outside the workspace fail with EACCES, the same writes inside succeed,
// reads are allowed everywhere, and extra writable paths and /dev/null
// stay writable.
func TestWorkspaceWrite(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	scratch := t.TempDir()
	out := outsideDir(t)
	writeFile(t, filepath.Join(out, "keep.txt"), "keep")
	p := Policy{Mode: WorkspaceWrite, Workspace: ws, WritablePaths: []string{scratch}}

	t.Run("inside succeeds", func(t *testing.T) {
		r := bashUnder(t, p, `set -e; cd "$0"
echo hi > a.txt
mkdir -p d/e
mv a.txt d/e/b.txt
ln -s b.txt d/e/c
echo more >> d/e/c
truncate -s 2 d/e/b.txt
cat d/e/b.txt
rm -r d`, ws)
		succeeded(t, "writing inside the workspace", r)
		if r.out != "hi" {
			t.Errorf("output %q, want %q", r.out, "hi")
		}
	})
	t.Run("writable path succeeds", func(t *testing.T) {
		r := bashUnder(t, p, `echo s > "$0/s.txt"`, scratch)
		succeeded(t, "writing to a writable path", r)
		if got := readFile(t, filepath.Join(scratch, "s.txt")); got != "s\n" {
			t.Errorf("scratch file holds %q", got)
		}
	})
	t.Run("devices succeed", func(t *testing.T) {
		succeeded(t, "writing to /dev/null", bashUnder(t, p, `echo x > /dev/null && echo z > /dev/zero`))
	})
	t.Run("reads outside succeed", func(t *testing.T) {
		r := bashUnder(t, p, `cat "$0/keep.txt" && ls "$0" >/dev/null && head -c 10 /etc/passwd >/dev/null`, out)
		succeeded(t, "reading outside", r)
		if r.out != "keep" {
			t.Errorf("read %q, want %q", r.out, "keep")
		}
	})
	t.Run("create outside denied", func(t *testing.T) {
		denied(t, "creating a file outside", bashUnder(t, p, `echo x > "$0/new.txt"`, out))
		mustExist(t, filepath.Join(out, "new.txt"), false)
		denied(t, "creating a directory outside", bashUnder(t, p, `mkdir "$0/newdir"`, out))
		mustExist(t, filepath.Join(out, "newdir"), false)
		denied(t, "writing to /tmp outside the workspace", bashUnder(t, p, `echo x > "$0"`, filepath.Join(os.TempDir(), "penguin-sandbox-denied-"+filepath.Base(ws))))
		mustExist(t, filepath.Join(os.TempDir(), "penguin-sandbox-denied-"+filepath.Base(ws)), false)
	})
	t.Run("modify outside denied", func(t *testing.T) {
		keep := filepath.Join(out, "keep.txt")
		denied(t, "appending outside", bashUnder(t, p, `echo x >> "$0"`, keep))
		denied(t, "truncating by open outside", bashUnder(t, p, `: > "$0"`, keep))
		denied(t, "truncate(2) outside", runUnder(t, p, self(t), "helper-truncate", keep))
		denied(t, "removing outside", bashUnder(t, p, `rm -f "$0"`, keep))
		denied(t, "moving out of the workspace", bashUnder(t, p, `echo m > "$0/m.txt" && mv "$0/m.txt" "$1/m.txt"`, ws, out))
		mustExist(t, filepath.Join(out, "m.txt"), false)
		if got := readFile(t, keep); got != "keep" {
			t.Errorf("file outside changed to %q", got)
		}
	})
	t.Run("symlink escape denied", func(t *testing.T) {
		link := filepath.Join(ws, "escape")
		if err := os.Symlink(filepath.Join(out, "via-link.txt"), link); err != nil {
			t.Fatal(err)
		}
		denied(t, "writing through a symlink that leads out", bashUnder(t, p, `echo x > "$0"`, link))
		mustExist(t, filepath.Join(out, "via-link.txt"), false)
	})
}

// TestReadOnly proves the read-only mode: the workspace can be read but
// not written, and the writable paths stay writable.
func TestReadOnly(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	scratch := outsideDir(t)
	writeFile(t, filepath.Join(ws, "src.txt"), "source")
	p := Policy{Mode: ReadOnly, Workspace: ws, WritablePaths: []string{scratch}}

	r := bashUnder(t, p, `cat "$0/src.txt"`, ws)
	succeeded(t, "reading the workspace", r)
	if r.out != "source" {
		t.Errorf("read %q", r.out)
	}
	denied(t, "creating in the workspace", bashUnder(t, p, `echo x > "$0/new.txt"`, ws))
	mustExist(t, filepath.Join(ws, "new.txt"), false)
	denied(t, "overwriting in the workspace", bashUnder(t, p, `echo x > "$0/src.txt"`, ws))
	denied(t, "removing in the workspace", bashUnder(t, p, `rm "$0/src.txt"`, ws))
	if got := readFile(t, filepath.Join(ws, "src.txt")); got != "source" {
		t.Errorf("workspace file changed to %q", got)
	}
	succeeded(t, "writing to the writable path", bashUnder(t, p, `echo t > "$0/t.txt"`, scratch))
}

// TestNoNetwork proves network isolation with a real listener in the
// test's namespace: a sandboxed command cannot connect to it, an
// unsandboxed one can, and the sandbox's own loopback works.
func TestNoNetwork(t *testing.T) {
	requireNetNS(t)
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

	t.Run("open network reaches the listener", func(t *testing.T) {
		succeeded(t, "dialing without no-network", runUnder(t, Policy{}, self(t), "helper-dial", addr))
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatal("the listener saw no connection")
		}
	})
	for _, p := range []Policy{
		{NoNetwork: true},
		{NoNetwork: true, Mode: WorkspaceWrite, Workspace: t.TempDir()},
	} {
		t.Run("no-network "+p.Mode.String(), func(t *testing.T) {
			if p.Mode != None {
				requireLandlock(t)
			}
			r := runUnder(t, p, self(t), "helper-dial", addr)
			if r.code != 3 {
				t.Errorf("dial from no-network: exit %d (%q), want 3 (connect failed)", r.code, r.out)
			}
			succeeded(t, "the sandbox's own loopback", runUnder(t, p, self(t), "helper-loopback"))
			mine, err := os.Readlink("/proc/self/ns/net")
			if err != nil {
				t.Fatal(err)
			}
			r = runUnder(t, p, self(t), "helper-netns")
			succeeded(t, "reading the namespace", r)
			if strings.TrimSpace(r.out) == mine {
				t.Errorf("command shares the test's network namespace %s", mine)
			}
		})
	}
	select {
	case <-accepted:
		t.Error("a no-network command reached the listener")
	default:
	}
}

// TestSandboxExecRefusesSharedNetNS proves the trampoline's own guard:
// --no-network without a fresh namespace (the clone flag lost) fails
// loudly with ExitCode instead of running the command with network.
func TestSandboxExecRefusesSharedNetNS(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.CommandContext(ctx, self(t), SubcommandName, "--no-network", "--", "/bin/sh", "-c", "touch "+marker)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode {
		t.Fatalf("err %v, want exit %d (output %q)", err, ExitCode, out)
	}
	if !strings.Contains(string(out), "shares the network namespace") {
		t.Errorf("output %q does not explain the refusal", out)
	}
	mustExist(t, marker, false)
}

// TestSandboxExecBadArguments proves that bad trampoline arguments are
// clear errors, returned before anything is restricted or executed.
func TestSandboxExecBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "sideways", "--", "true"}, "unknown sandbox mode"},
		{[]string{"--mode", "workspace-write"}, "no command"},
		{[]string{"--mode", "workspace-write", "--", "true"}, "needs a workspace"},
		{[]string{"--mode", "read-only", "--workspace", "rel", "--", "true"}, "not an absolute path"},
		{[]string{"--mode", "workspace-write", "--workspace", "/w", "--writable", "rel", "--", "true"}, "not an absolute path"},
		{[]string{"--bogus", "--", "true"}, "flag provided but not defined"},
		{[]string{"--", "penguin-no-such-command"}, "executable file not found"},
	} {
		err := SandboxExec(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SandboxExec(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// TestPseudoTerminal proves that a confined command works on a
// pseudo-terminal started by pty.Start after Apply (Setsid and Setctty
// combine with Apply's settings), that /dev/stdout on the terminal stays
// writable, and that confinement still holds there.
func TestPseudoTerminal(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	out := outsideDir(t)
	ctx := testCtx(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, "bash", "-c", `tty; echo in > "$0/in.txt"; echo viastdout > /dev/stdout; echo x > "$1/x.txt"; echo "exit=$?"`, ws, out)
	g, err := Apply(cmd, Policy{Mode: WorkspaceWrite, Workspace: ws}, self(t))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("pty.Start after Apply: %v", err)
	}
	defer f.Close()
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
	for _, want := range []string{"/dev/pts/", "viastdout", "Permission denied", "exit=1"} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal output %q lacks %q", text, want)
		}
	}
	mustExist(t, filepath.Join(ws, "in.txt"), true)
	mustExist(t, filepath.Join(out, "x.txt"), false)
}

// TestProcSelfExe proves the recommended self, "/proc/self/exe", reaches
// the trampoline: the path is resolved in the forked child, before exec.
func TestProcSelfExe(t *testing.T) {
	requireLandlock(t)
	ws := t.TempDir()
	out := outsideDir(t)
	r := runWith(t, Policy{Mode: WorkspaceWrite, Workspace: ws}, "/proc/self/exe",
		"bash", "-c", `echo in > "$0/in.txt" && echo out > "$1/out.txt"`, ws, out)
	denied(t, "writing outside via /proc/self/exe", r)
	mustExist(t, filepath.Join(ws, "in.txt"), true)
	mustExist(t, filepath.Join(out, "out.txt"), false)
}

// TestSandboxExecFailsLoudly proves that when confinement cannot be set
// up at launch (here the workspace vanished after Apply), the command does
// not run and the failure is reported with ExitCode and a message, rather
// than the command running unconfined.
func TestSandboxExecFailsLoudly(t *testing.T) {
	requireLandlock(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	p := Policy{Mode: WorkspaceWrite, Workspace: ws}
	ctx := testCtx(t, 30*time.Second)
	cmd := exec.CommandContext(ctx, "touch", marker)
	g, err := Apply(cmd, p, self(t))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitCode {
		t.Fatalf("err %v, want exit %d (output %q)", err, ExitCode, out)
	}
	if !strings.Contains(string(out), "landlock") || !strings.Contains(string(out), ws) {
		t.Errorf("output %q does not explain the failure", out)
	}
	mustExist(t, marker, false)
}
