package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/internal/testkit/pgtest"
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

// TestProviderKeyRotation rotates the route key secret as the operator
// would (penguin providers rotate-key --help), on both stores: a key
// sealed under the old secret opens while the old secret follows the
// new one, rotate-key moves it onto the new one, and after that the new
// secret alone opens it. Without the rotation, the new secret alone does
// not; and rotate-key under a secret that opens nothing refuses, naming
// the route.
func TestProviderKeyRotation(t *testing.T) {
	t.Parallel()
	const (
		key = "sk-rot-0123456789abcdefghij"
		s1  = "first-0123456789abcdef0123456789abcdef"
		s2  = "second-0123456789abcdef0123456789abcdef"
		s3  = "third-0123456789abcdef0123456789abcdef"
	)
	for _, store := range []string{"sqlite", "postgresql"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			keyFile := filepath.Join(home, "routes.key") // the default of a SQLite store in the data directory
			var flags []string
			if store == "postgresql" {
				keyFile = filepath.Join(t.TempDir(), "routes.key")
				flags = []string{"--routes-store", pgtest.URL(t, "rotation"), "--routes-key-file", keyFile}
			}
			setKey := func(secrets ...string) {
				t.Helper()
				if err := os.WriteFile(keyFile, []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			run := func(stdin string, args ...string) result {
				t.Helper()
				return agentCLI(t, home, stdin, nil, append(args, flags...)...)
			}
			ok := func(stdin string, args ...string) string {
				t.Helper()
				r := run(stdin, args...)
				if r.code != 0 {
					t.Fatalf("penguin %v exited %d: %s", args, r.code, r.stderr)
				}
				return r.stdout
			}
			const hint = "sk-r…ghij"
			setKey(s1)
			ok(key+"\n", "providers", "add", "team", "--base-url", "http://127.0.0.1:9/v1")
			setKey(s2)
			if out := ok("", "providers", "list"); strings.Contains(out, hint) {
				t.Fatalf("the new secret alone opened a key sealed under the old one:\n%s", out)
			}
			setKey(s2, s1)
			if out := ok("", "providers", "list"); !strings.Contains(out, hint) {
				t.Fatalf("with the old secret after the new one, the key does not open:\n%s", out)
			}
			if out := ok("", "providers", "rotate-key"); !strings.Contains(out, "re-sealed 1 stored API keys") {
				t.Fatalf("rotate-key: %q", out)
			}
			setKey(s2)
			if out := ok("", "providers", "list"); !strings.Contains(out, hint) {
				t.Fatalf("after rotate-key, the new secret alone does not open the key:\n%s", out)
			}
			setKey(s3)
			if r := run("", "providers", "rotate-key"); r.code == 0 || !strings.Contains(r.stderr, `route "team"`) || !strings.Contains(r.stderr, "nothing was re-sealed") {
				t.Fatalf("rotate-key under a secret that opens nothing: exit %d, %s", r.code, r.stderr)
			}
		})
	}
}
