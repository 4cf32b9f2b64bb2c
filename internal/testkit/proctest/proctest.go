// Package proctest helps tests that start processes: [Env] gives each one
// an environment that does not depend on the host, and [GroupMembers]
// checks, from /proc and independently of the code under test, which
// processes are still alive.
package proctest

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Path is the PATH of every process a test starts: the system's
// directories only, never a user's (version managers such as pyenv put
// shims there that stall or fail on a machine where they are broken).
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Shell is the SHELL of every process a test starts, rather than whatever
// the user logs in with: bash, which penguin runs commands with anyway,
// and which (unlike dash) carries on after a foreground command that
// handled Ctrl-C itself, as a user's terminal does.
const Shell = "/bin/bash"

// Env returns the whole environment of a process a test starts: a HOME of
// its own (a new temporary directory, so no profile, configuration or
// cache of the user's is read or written), PATH and SHELL, then extra.
// Nothing else of the test's own environment is passed on. A later entry
// wins over an earlier one with the same name, so extra may override
// these.
func Env(t testing.TB, extra ...string) []string {
	t.Helper()
	return append([]string{"HOME=" + t.TempDir(), "PATH=" + Path, "SHELL=" + Shell}, extra...)
}

// GroupMembers lists the live processes whose process group or session is
// id, each as "pid (comm)". Zombies and dead processes do not count: they
// have exited and only wait to be reaped. Processes that exit while /proc
// is read are skipped.
func GroupMembers(t testing.TB, id int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(id)
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses; the fields
		// after it start at the last ')'.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == want || f[3] == want {
			out = append(out, string(data[:i+1]))
		}
	}
	return out
}

// DirOutsideTmp makes a directory, removed when the test ends, outside the
// system's temporary directory (a confined environment replaces /tmp and
// /var/tmp with its own, so a command there would not see it): beneath the
// test's working directory, its package's, readable by everyone.
func DirOutsideTmp(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", ".outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// SelfIn copies the running test binary into dir as name, where a confined
// command can run it (the binary itself lies under /tmp), and returns its
// path: tests use it to run helper roles of their binary in a sandbox, as
// a model could run a program it wrote into its workspace.
func SelfIn(t testing.TB, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, name)
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
