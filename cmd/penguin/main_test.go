package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/proctest"
)

// testVersion is stamped into the binary under test, to check -ldflags.
const testVersion = "v0.0.0-maintest"

// binary is the penguin binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "penguin-main-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "penguin")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+testVersion, "-o", binary, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build penguin: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

type result struct {
	code           int
	stdout, stderr string
}

// penguin runs the built binary with args and no standard input.
func penguin(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = proctest.Env(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
	default:
		t.Fatalf("penguin %v: %v", args, err)
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-v"} {
		t.Run(arg, func(t *testing.T) {
			t.Parallel()
			r := penguin(t, arg)
			want := fmt.Sprintf("penguin %s (%s %s/%s)\n", testVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if r.code != 0 || r.stdout != want {
				t.Errorf("exit %d, stdout %q; want 0 and %q", r.code, r.stdout, want)
			}
		})
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := penguin(t, "help")
	if r.code != 0 {
		t.Fatalf("help exited %d: %s", r.code, r.stderr)
	}
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %q:\n%s", c.name, r.stdout)
		}
	}
}

func TestNoCommandPrintsUsage(t *testing.T) {
	t.Parallel()
	r := penguin(t)
	if r.code != 2 || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("exit %d, stderr %q; want 2 and the usage", r.code, r.stderr)
	}
}

func TestUnknownCommandFailsWithUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"frobnicate"}, {"serve", "frobnicate"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := penguin(t, args...)
			want := fmt.Sprintf("penguin: unknown command %q", strings.Join(args, " "))
			if r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "Usage:") {
				t.Errorf("exit %d, stderr %q; want 2, %q and the usage", r.code, r.stderr, want)
			}
		})
	}
}

// TestEveryCommandAnswersHelp checks that each subcommand parses its flags
// through internal/config: -h exits 0 and lists the PENGUIN_* variable of
// every flag. It runs nothing else, so it starts no server.
func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		if c.run == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := penguin(t, append(strings.Fields(c.name), "-h")...)
			help := r.stdout + r.stderr
			if r.code != 0 {
				t.Fatalf("%s -h exited %d:\n%s", c.name, r.code, help)
			}
			flags := strings.Count(help, "\n  -")
			envs := strings.Count(help, "[$PENGUIN_")
			if flags == 0 || envs != flags {
				t.Errorf("%s -h lists %d flags and %d PENGUIN_* variables; want every flag to name its variable:\n%s",
					c.name, flags, envs, help)
			}
		})
	}
}
