package main

import (
	"strings"
	"testing"
)

// TestScheduleCommands drives penguin schedules as a user would, against
// the embedded server over one data directory: a bad file is refused with
// its line, flags create and change a schedule, run-now queues a run that
// history shows, and delete removes it.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	run := func(stdin string, args ...string) result {
		t.Helper()
		return agentCLI(t, home, stdin, nil, append([]string{"schedules"}, args...)...)
	}
	ok := func(stdin string, args ...string) string {
		t.Helper()
		r := run(stdin, args...)
		if r.code != 0 {
			t.Fatalf("penguin schedules %v exited %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	if r := run("prompt: hi\nperiod: 5x\nstart_at: 2030-01-01T00:00:00Z\nworkspace: /w\n", "create", "bad", "--file", "-"); r.code == 0 || !strings.Contains(r.stderr, `schedule/bad.yaml:2: period: "5x" is not a period`) {
		t.Fatalf("a bad file: exit %d, %q", r.code, r.stderr)
	}
	if r := run("", "create", "x", "--file", "-", "--prompt", "p"); r.code == 0 || !strings.Contains(r.stderr, "leave out --prompt") {
		t.Fatalf("--file with a flag: exit %d, %q", r.code, r.stderr)
	}
	out := ok("", "create", "nightly", "--prompt", "check the builds", "--cron", "0 3 * * *", "--timezone", "Europe/Paris", "--workspace", "/w")
	if !strings.Contains(out, "nightly  true     cron 0 3 * * * (Europe/Paris)") || strings.Contains(out, "NEXT RUN  -") {
		t.Fatalf("create:\n%s", out)
	}
	if r := run("", "create", "nightly", "--prompt", "again", "--period", "1h", "--start-at", "now", "--workspace", "/w"); r.code == 0 || !strings.Contains(r.stderr, "already has a schedule nightly") {
		t.Fatalf("a second create: exit %d, %q", r.code, r.stderr)
	}
	if out := ok("", "update", "nightly", "--enabled", "false"); !strings.Contains(out, "nightly  false") {
		t.Fatalf("update:\n%s", out)
	}
	if out := ok("", "run-now", "nightly"); !strings.Contains(out, "queued for session session-") {
		t.Fatalf("run-now: %q", out)
	}
	if out := ok("", "history", "nightly"); !strings.Contains(out, "pending  session-") {
		t.Fatalf("history:\n%s", out)
	}
	ok("", "delete", "nightly")
	if out := ok("", "list"); strings.Contains(out, "nightly") {
		t.Fatalf("list after delete:\n%s", out)
	}
}
