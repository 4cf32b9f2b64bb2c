package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// TestTeamsCommands drives the account commands against a real team
// server (`penguin serve --team`): the admin signs in on a real terminal
// (tmux) at the prompts, without the password showing; creates a user
// and projects and adds the user to one; the user signs in with a
// password from stdin, makes a token, runs a task in their project and is
// refused another project; a token sign-in works until the token is
// revoked; disabling, signing out and deleting end what they should.
func TestTeamsCommands(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "teams", filepath.Join("testdata", "teams.yaml"))
	providers := writeProviders(t, route{"chat", mock})
	const adminPW = "admin-first-password"
	srv := start(t, "penguin serve --team", []string{"MOCK_API_KEY=unused", "PENGUIN_HOME=" + t.TempDir(), "PENGUIN_SEED_ADMIN_PASSWORD=" + adminPW},
		"serve", "--team", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--providers", providers, "--root", "/")
	addr := grpcAddr(srv, "penguin")

	// Each person has a home of their own, so a credentials file of their own.
	adminHome, bobHome, ciHome := t.TempDir(), t.TempDir(), t.TempDir()
	envOf := func(home string) []string {
		return proctest.Env(t, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "TERM=xterm-256color", "NO_COLOR=1")
	}
	// penguin runs a command as the person of home with stdin, and returns
	// its output and whether it succeeded.
	penguin := func(home, stdin string, args ...string) (string, bool) {
		t.Helper()
		cmd := exec.CommandContext(testkit.Context(t, time.Minute), bin.penguin, args...)
		cmd.Env = envOf(home)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	must := func(home, stdin string, args ...string) string {
		t.Helper()
		out, ok := penguin(home, stdin, args...)
		if !ok {
			t.Fatalf("penguin %s failed:\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	refused := func(home, want string, args ...string) {
		t.Helper()
		out, ok := penguin(home, "", args...)
		if ok || !strings.Contains(out, want) {
			t.Fatalf("penguin %s: ok=%v, want a refusal saying %q:\n%s", strings.Join(args, " "), ok, want, out)
		}
	}
	e := "--engine=" + addr

	// The admin signs in at the terminal's prompts.
	env := envOf(adminHome)
	term := newTerminal(t, env, "login", "env -i "+strings.Join(env, " ")+" "+bin.penguin+" login "+e+"; echo login exited with status $?")
	term.waitScreen("user: ", 1)
	term.keys("admin", "Enter")
	term.waitScreen("password of admin: ", 1)
	term.keys(adminPW, "Enter")
	screen := term.waitScreen("login exited with status 0", 1)
	if !strings.Contains(screen, "Signed in to "+addr+" as admin") || !strings.Contains(screen, "choose your own with: penguin password") {
		t.Fatalf("login said:\n%s", screen)
	}
	if strings.Contains(screen, adminPW) {
		t.Fatalf("the password was echoed:\n%s", screen)
	}
	creds := filepath.Join(adminHome, ".config", "penguin", "credentials.json")
	fi, err := os.Stat(creds)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v, %v; want mode 0600", fi, err)
	}
	if b, _ := os.ReadFile(creds); !strings.Contains(string(b), "pgn_ses_") || strings.Contains(string(b), adminPW) {
		t.Fatalf("the credentials file holds:\n%s", b)
	}
	if out := must(adminHome, "", "whoami", e); !strings.Contains(out, "admin (admin) on a team server") {
		t.Fatalf("whoami: %s", out)
	}
	// The admin chooses their own password: current then new, from stdin.
	must(adminHome, adminPW+"\nadmin-own-password\n", "password", e)

	// Accounts and projects.
	must(adminHome, "bob-first-password\n", "users", "create", "bob", "--name", "Bob Builder", e)
	must(adminHome, "carol-first-password\n", "users", "create", "carol", e)
	if out := must(adminHome, "", "users", "list", e); !strings.Contains(out, "bob") || !strings.Contains(out, "Bob Builder") || !strings.Contains(out, "carol") {
		t.Fatalf("users list:\n%s", out)
	}
	must(adminHome, "", "projects", "create", "apollo", "--name", "Apollo", e)
	must(adminHome, "", "projects", "create", "zulu", e)
	must(adminHome, "", "projects", "add-member", "apollo", "bob", e)
	must(adminHome, "", "projects", "add-member", "apollo", "carol", "--role", "owner", e)
	must(adminHome, "", "projects", "remove-member", "apollo", "carol", e)
	if out := must(adminHome, "", "projects", "members", "apollo", e); !strings.Contains(out, "bob    member") || !strings.Contains(out, "admin  owner") || strings.Contains(out, "carol") {
		t.Fatalf("projects members apollo:\n%s", out)
	}
	refused(adminHome, "--role", "projects", "add-member", "apollo", "bob", "--role", "boss", e)

	// Bob signs in with his password on stdin; he sees apollo alone.
	if out := must(bobHome, "bob-first-password\n", "login", e, "--user", "bob"); !strings.Contains(out, "as bob") {
		t.Fatalf("bob's login: %s", out)
	}
	if out := must(bobHome, "", "projects", "list", e); !strings.Contains(out, "apollo") || strings.Contains(out, "zulu") || strings.Contains(out, "default") {
		t.Fatalf("bob's projects:\n%s", out)
	}
	refused(bobHome, "only an admin manages users", "users", "list", e)
	refused(bobHome, "project zulu not found", "projects", "members", "zulu", e)

	// A task in apollo, named by --project; zulu is not his.
	ws := t.TempDir()
	run := []string{"run", e, "--provider", "chat", "--model", "scripted", "--workspace", ws}
	if out := must(bobHome, "", append(run, "--project", "apollo", "say where you are")...); !strings.Contains(out, "Done in project apollo.") {
		t.Fatalf("bob's run in apollo:\n%s", out)
	}
	refused(bobHome, "project zulu not found", append(run, "--project", "zulu", "hello")...)
	if out := must(bobHome, "", "sessions", "list", e); !strings.Contains(out, "chat/scripted") {
		t.Fatalf("bob's sessions:\n%s", out)
	}
	if out := must(adminHome, "", "sessions", "list", e); !strings.Contains(out, "chat/scripted") {
		t.Fatalf("the admin owns apollo, so sees bob's session there:\n%s", out)
	}
	// --project narrows the list, by the project's id or its name.
	for _, p := range []string{"apollo", "Apollo"} {
		if out := must(adminHome, "", "sessions", "list", "--project", p, e); !strings.Contains(out, "chat/scripted") {
			t.Fatalf("sessions list --project %s:\n%s", p, out)
		}
	}
	if out := must(adminHome, "", "sessions", "list", "--project", "zulu", e); strings.Contains(out, "chat/scripted") {
		t.Fatalf("sessions list --project zulu shows apollo's session:\n%s", out)
	}
	refused(bobHome, "project zulu not found", "sessions", "list", "--project", "zulu", e)

	// A token, shown once, signs CI in until Bob revokes it.
	secret := strings.TrimSpace(must(bobHome, "", "tokens", "create", "ci", "--read-only", "--ttl", "24h", e))
	secret = secret[strings.LastIndex(secret, "\n")+1:]
	if !strings.HasPrefix(secret, "pgn_pat_") {
		t.Fatalf("tokens create printed no secret: %q", secret)
	}
	list := must(bobHome, "", "tokens", "list", e)
	if !strings.Contains(list, "ci") || !strings.Contains(list, "read") || strings.Contains(list, secret) {
		t.Fatalf("tokens list:\n%s", list)
	}
	tokenID := strings.Fields(strings.Split(list, "\n")[1])[0]
	must(ciHome, secret+"\n", "login", e, "--token")
	if out := must(ciHome, "", "whoami", e); !strings.Contains(out, "bob (user, read-only token)") {
		t.Fatalf("whoami with the token: %s", out)
	}
	refused(ciHome, "read-only", "projects", "create", "ci-project", e)
	must(bobHome, "", "tokens", "revoke", tokenID, e)
	refused(ciHome, "Unauthenticated", "whoami", e)

	// Disabling Bob ends his sign-in; enabling lets him sign in again.
	must(adminHome, "", "users", "disable", "bob", e)
	refused(bobHome, "Unauthenticated", "whoami", e)
	must(adminHome, "", "users", "enable", "bob", e)
	must(adminHome, "bob-second-password\n", "users", "reset-password", "bob", e)
	if out, ok := penguin(bobHome, "bob-first-password\n", "login", e, "--user", "bob"); ok || !strings.Contains(out, "wrong user id or password") {
		t.Fatalf("the old password after a reset: ok=%v\n%s", ok, out)
	}
	must(bobHome, "bob-second-password\n", "login", e, "--user", "bob")
	if out := must(bobHome, "", "logout", e); !strings.Contains(out, "Signed out of "+addr) {
		t.Fatalf("logout: %s", out)
	}
	refused(bobHome, "Unauthenticated", "whoami", e)

	// Deleting: a project with a session stays, an empty one goes; a user goes.
	refused(adminHome, "session", "projects", "delete", "apollo", e)
	must(adminHome, "", "projects", "delete", "zulu", e)
	must(adminHome, "", "users", "delete", "carol", e)
	if out := must(adminHome, "", "users", "list", e); strings.Contains(out, "carol") {
		t.Fatalf("carol is still listed:\n%s", out)
	}
	must(adminHome, "", "logout", e)
	if b, _ := os.ReadFile(creds); strings.Contains(string(b), addr) {
		t.Fatalf("the credentials file still holds the server after logout:\n%s", b)
	}
}
