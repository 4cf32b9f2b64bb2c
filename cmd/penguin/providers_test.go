package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProviderCommands drives penguin providers as a user would, each
// command against an embedded server over one data directory: a route
// added by one command is listed by the next (kept in the data
// directory's store, its key encrypted and shown masked), a project's
// route only with --project, the test of a route at a dead address
// fails saying why, and a removed route is gone.
func TestProviderCommands(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	const key = "sk-cli-0123456789abcdefghij"
	ok := func(stdin string, args ...string) string {
		t.Helper()
		r := agentCLI(t, home, stdin, nil, args...)
		if r.code != 0 {
			t.Fatalf("penguin %v exited %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	fails := func(want string, args ...string) {
		t.Helper()
		r := agentCLI(t, home, "", nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("penguin %v: exit %d, stderr %q; want a failure saying %q", args, r.code, r.stderr, want)
		}
	}
	if out := ok(key+"\n", "providers", "add", "team", "--type", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m1"); !strings.Contains(out, "added team (openai, global, key sk-c…ghij)") {
		t.Fatalf("add: %q", out)
	}
	ok("", "providers", "add", "mine", "--project", "default", "--base-url", "http://127.0.0.1:9/v1", "--no-key")
	out := ok("", "providers", "list")
	if !strings.Contains(out, "team") || !strings.Contains(out, "sk-c…ghij") || strings.Contains(out, "mine") || strings.Contains(out, key) {
		t.Fatalf("list:\n%s", out)
	}
	if out := ok("", "providers", "list", "--project", "default"); !strings.Contains(out, "mine") || !strings.Contains(out, "team") {
		t.Fatalf("list --project default:\n%s", out)
	}
	for _, f := range []string{"penguin.db", "penguin.db-wal"} {
		if data, err := os.ReadFile(filepath.Join(home, f)); err == nil && strings.Contains(string(data), key) {
			t.Fatalf("the key is in %s in the clear", f)
		}
	}
	fails("exists; update it instead", "providers", "add", "team", "--no-key", "--base-url", "http://127.0.0.1:9/v1")
	fails("route.name", "providers", "add", "Bad Name", "--no-key", "--base-url", "http://127.0.0.1:9/v1")
	fails("failed after", "providers", "test", "team")
	ok("", "providers", "update", "team", "--base-url", "http://127.0.0.1:8/v1", "--model", "m2")
	if out := ok("", "providers", "list"); !strings.Contains(out, "http://127.0.0.1:8/v1") || !strings.Contains(out, "sk-c…ghij") {
		t.Fatalf("after update (the key kept):\n%s", out)
	}
	ok("", "providers", "remove", "team")
	if out := ok("", "providers", "list"); strings.Contains(out, "team") {
		t.Fatalf("after remove:\n%s", out)
	}
	fails("no stored global route", "providers", "remove", "team")
}
