package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// TestDemo runs examples/demo/demo.sh, what `make demo` runs, and checks
// that it says the model is scripted, that the task fixed the bug, and
// that it left no process behind.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, filepath.Join(bin.repo, "examples", "demo", "demo.sh"))
	cmd.Env = proctest.Env(t, "HOME="+tmp, "TMPDIR="+tmp, "PENGUIN="+bin.penguin, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		"The model in this demo is scripted.",
		"FAIL add.sh 2 3 = -1, want 5",
		"⏺ edit_file",
		"+echo $(( $1 + $2 ))",
		"all tests passed",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	// The demo removes its temporary directory, after stopping every
	// process it started.
	left, err := filepath.Glob(filepath.Join(tmp, "penguin-demo.*"))
	if err != nil || len(left) > 0 {
		t.Errorf("the demo left %v behind (%v)", left, err)
	}
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // the process is gone
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if args[0] == bin.penguin && strings.Contains(string(raw), "penguin-demo.") {
			t.Errorf("the demo left a process running: %s", strings.Join(args, " "))
		}
	}
}
