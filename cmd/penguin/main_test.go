package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
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

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
	cmd.Env = proctest.Env(t, "TERM=dumb")
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

// TestVersionFromBuildInfo builds the binary as `go install ./cmd/penguin`
// does, without -ldflags: the version is the commit it was built from,
// not a placeholder.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		t.Skip("a git worktree (.git is a file): the go command records no VCS information for it")
	}
	bin := filepath.Join(t.TempDir(), "penguin")
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build penguin: %v\n%s", err, out)
	}
	head, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The module version Go derives from VCS (a pseudo-version) or the
	// revision itself: either names the commit.
	if !strings.Contains(string(out), strings.TrimSpace(string(head))[:12]) {
		t.Errorf("penguin version = %q; want it to name commit %s", out, head)
	}
}

func TestBuildVersion(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified},
		}}
	}
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"ldflags win", "v1.2.3", vcs("0123456789abcdef", "false"), true, "v1.2.3"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, true, "v0.4.0"},
		{"revision", "", vcs("0123456789abcdef", "false"), true, "0123456789ab"},
		{"dirty revision", "", vcs("0123456789abcdef", "true"), true, "0123456789ab+dirty"},
		{"nothing recorded", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "unknown"},
		{"no build info", "", nil, false, "unknown"},
	} {
		if got := buildVersion(tc.stamped, tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: buildVersion = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// subcommands returns every command of the tree that runs something, by
// its words after "penguin".
func subcommands() [][]string {
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			p := append(append([]string{}, path...), sub.Name())
			out = append(out, p)
			walk(sub, p)
		}
	}
	walk(newRoot(nil), nil)
	return out
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := penguin(t, "help")
	if r.code != 0 {
		t.Fatalf("help exited %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"serve", "run", "chat", "sessions", "mockllm", "version", "completion"} {
		if !strings.Contains(r.stdout, "  "+want+" ") {
			t.Errorf("help does not list %q:\n%s", want, r.stdout)
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
	for _, args := range [][]string{{"frobnicate"}, {"serve", "frobnicate"}, {"sessions", "frobnicate"}} {
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

// flagLine matches a flag's line in help: "  -m, --message string   …".
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)\b.*$`)

// TestEveryCommandAnswersHelp checks that each command's help has the one
// layout (Usage, then Flags) and that every flag but --help names its
// PENGUIN_* variable. It runs nothing else, so it starts no server.
func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Parallel()
	for _, words := range subcommands() {
		t.Run(strings.Join(words, " "), func(t *testing.T) {
			t.Parallel()
			r := penguin(t, append(words, "-h")...)
			help := r.stdout + r.stderr
			if r.code != 0 {
				t.Fatalf("%s -h exited %d:\n%s", words, r.code, help)
			}
			usage, flags := strings.Index(help, "Usage:\n  penguin "+strings.Join(words, " ")), strings.Index(help, "Flags:\n")
			if usage < 0 || flags < usage {
				t.Errorf("%s -h is not laid out as Usage, then Flags:\n%s", words, help)
			}
			for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
				name := m[1]
				if name == "help" || name == "version" {
					continue
				}
				if !strings.Contains(m[0], "[$"+config.EnvName(name)+"]") {
					t.Errorf("%s -h: --%s does not name its variable %s:\n%s", words, name, config.EnvName(name), m[0])
				}
			}
		})
	}
}

// TestCompletion checks the shell completion scripts and the completion
// of flag values.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if r := penguin(t, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, "penguin") {
			t.Errorf("completion %s: exit %d, %d bytes:\n%s", shell, r.code, len(r.stdout), r.stderr)
		}
	}
	r := penguin(t, "__complete", "run", "hello", "--approval", "")
	for _, want := range []string{"allow-all", "deny-all", "read-only", "always-ask"} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("--approval completes to %q; want %s among them", r.stdout, want)
		}
	}
	// The shell filters the words by what was typed; the list is whole.
	r = penguin(t, "__complete", "chat", "--thinking", "h")
	for _, want := range thinkingWords {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("--thinking completes to %q; want %s among them", r.stdout, want)
		}
	}
	r = penguin(t, "__complete", "sessions", "")
	for _, want := range []string{"list", "show", "export", "delete"} {
		if !strings.Contains(r.stdout, want+"\t") {
			t.Errorf("sessions completes to %q; want %s", r.stdout, want)
		}
	}
}

// TestServeBuildsItsCommandAlone checks that a server's command line
// builds the serve command and none of the others, whose trees its cold
// start would wait for, and that the serve commands' help is the same as
// in the whole tree.
func TestServeBuildsItsCommandAlone(t *testing.T) {
	t.Parallel()
	var names []string
	for _, c := range newRoot([]string{serveCommand, "--listen", ":0"}).Commands() {
		if c.Name() != "help" && c.Name() != "completion" { // cobra's own
			names = append(names, c.Name())
		}
	}
	if want := []string{serveCommand}; !slices.Equal(names, want) {
		t.Errorf("the root of a server's command line has %q, want %q", names, want)
	}
	help := func(root *cobra.Command, args []string) string {
		var out bytes.Buffer
		root.SetArgs(append(args, "-h"))
		root.SetOut(&out)
		root.SetErr(&out)
		if err := root.Execute(); err != nil {
			t.Fatalf("%s -h: %v", args, err)
		}
		return out.String()
	}
	for _, words := range subcommands() {
		if words[0] != serveCommand {
			continue
		}
		if alone, whole := help(newRoot(words), words), help(newRoot(nil), words); alone != whole {
			t.Errorf("%s -h differs from the whole tree's:\n%s\nwant:\n%s", words, alone, whole)
		}
	}
}
