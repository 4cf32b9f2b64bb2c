package environment_test

// The attack suite of the environment's file-level security: each test is
// an attack made through ExecuteTool exactly as a model would make it,
// against a real service on a loopback port, and checks that nothing
// escapes. The numbers are those of the attack table in docs/security.md.
// The process-level attacks (the service's own port, uids, device nodes,
// resource limits) are the confinement's: confine_test.go. Several attacks
// here run in sandbox mode none on purpose, where a command can reach
// what the service's own file handling must still resist.

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/redact/redacttest"
)

// archivePath returns the archive path a truncated output names.
func archivePath(t *testing.T, r result) string {
	t.Helper()
	const marker = "the full output is saved at "
	i := strings.Index(r.text(), marker)
	if i < 0 {
		t.Fatalf("no archive in the output:\n%s", r.text())
	}
	rest := r.text()[i+len(marker):]
	return rest[:strings.Index(rest, "]")]
}

// Attack 2, as the README runs it: the workspace is the service's root.
// The archives of truncated output must not lie in the workspace, where a
// command could replace their directory.
func TestAttack2ArchivesLieOutsideTheRootWorkspace(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: ".", Label: "readme"})
	ws := resp.GetWorkspace()
	r := h.exec(resp.GetEnvironmentId(), "exec_command", `{"cmd":"seq 1 20000"}`)
	path := archivePath(t, r)
	if strings.HasPrefix(path, ws+"/") {
		t.Fatalf("the archive %s lies inside the workspace %s", path, ws)
	}
	if data, err := os.ReadFile(path); err != nil || !strings.HasSuffix(string(data), "19999\n20000\n") {
		t.Fatalf("the archive: %v", err)
	}
}

// Attack 2 with a command that knows where the archives go and can write
// there (sandbox none, the scratch directory beside the workspace): it
// replaces the archive directory with a symbolic link to an outside
// directory, then prints more than the cap. The archive must not land
// outside.
func TestAttack2ArchiveDirectoryReplacedByALink(t *testing.T) {
	root := testRoot(t)
	h := start(t, environment.Options{Root: root, ScratchDir: filepath.Join(root, "scratch")})
	env := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "ws", Label: "swap", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE}).GetEnvironmentId()
	first := archivePath(t, h.exec(env, "exec_command", `{"cmd":"seq 1 20000"}`))
	dir := filepath.Dir(first)
	outside := t.TempDir()
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": fmt.Sprintf("mv %s %s.moved && ln -s %s %s && seq 1 20000", dir, dir, outside, dir)}))
	wantStop(t, r, ok, "[exit code 0]")
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the service wrote an archive outside, through the link: %v", entries[0].Name())
	}
	if entries, _ := os.ReadDir(dir + ".moved"); len(entries) != 2 {
		t.Fatalf("the second archive is not in the original directory: %d entries", len(entries))
	}
}

// Attack 2, configured: a scratch directory inside the workspace is
// refused, so commands never reach the archives.
func TestAttack2ScratchInsideTheWorkspaceIsRefused(t *testing.T) {
	root := testRoot(t)
	h := start(t, environment.Options{Root: root, ScratchDir: filepath.Join(root, "ws", ".scratch")})
	_, err := h.client.CreateEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.CreateEnvironmentRequest{Workspace: "ws"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "scratch") {
		t.Fatalf("CreateEnvironment with the scratch directory inside the workspace = %v", err)
	}
}

// Attack 3: the file tools check a path and then use it. A swapper (the
// attacker's command) keeps exchanging a workspace directory with a
// symbolic link to an outside directory while the file tools read, write,
// edit, list and search beneath it. The swapper is shown to run (its swaps
// are counted) and no call may reach the outside.
func TestAttack3SwapRaceFindsNoEscape(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	outside := t.TempDir()
	const secret = "OUTSIDE-SECRET"
	outsideFile := "state=0 " + secret + "\n"
	files := map[string]string{
		filepath.Join(ws, "sub", "f.txt"):             "state=0 inside\n",
		filepath.Join(outside, "f.txt"):               outsideFile,
		filepath.Join(outside, "outside-only.txt"):    secret + "\n",
		filepath.Join(outside, "img.png"):             string(tinyPNG(t)),
		filepath.Join(ws, "sub", "img.png"):           string(tinyPNG(t)),
		filepath.Join(ws, "sub", "inside-only.txt"):   "inside\n",
		filepath.Join(ws, "sub", "deeper", "d.txt"):   "inside\n",
		filepath.Join(outside, "deeper", "d.txt"):     secret + "\n",
		filepath.Join(outside, "deeper", "other.txt"): secret + "\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The swapper exchanges "sub" and a link to the outside atomically
	// (renameat2 RENAME_EXCHANGE), so "sub" always exists and is, at any
	// moment, either the real directory or the link.
	exchange := exchangeNames(t)
	sub, door := filepath.Join(ws, "sub"), filepath.Join(ws, ".door")
	if err := os.Symlink(outside, door); err != nil {
		t.Fatal(err)
	}
	var swaps atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				if swaps.Load()%2 == 1 { // leave the real directory in place
					_ = exchange(sub, door)
				}
				return
			default:
			}
			if err := exchange(sub, door); err != nil {
				t.Errorf("the swapper failed: %v", err)
				return
			}
			swaps.Add(1)
		}
	}()

	calls := []struct {
		tool, args string
		escaped    func(result) bool
	}{
		{"read_file", `{"file_path":"sub/f.txt"}`, func(r result) bool { return strings.Contains(r.text(), secret) }},
		{"read_file", `{"file_path":"sub/deeper/d.txt"}`, func(r result) bool { return strings.Contains(r.text(), secret) }},
		{"grep", `{"pattern":"SECRET","path":"sub"}`, func(r result) bool { return strings.Contains(r.text(), secret) }},
		{"grep", `{"pattern":"SECRET","path":"sub/deeper/d.txt"}`, func(r result) bool { return strings.Contains(r.text(), secret) }},
		{"glob", `{"pattern":"**/*.txt","path":"sub"}`, func(r result) bool {
			return strings.Contains(r.text(), "outside-only") || strings.Contains(r.text(), "other.txt")
		}},
		{"write_file", `{"file_path":"sub/written.txt","content":"x"}`, func(result) bool {
			_, err := os.Lstat(filepath.Join(outside, "written.txt"))
			return err == nil
		}},
		{"write_file", `{"file_path":"sub/deeper/new/made.txt","content":"x"}`, func(result) bool {
			_, err := os.Lstat(filepath.Join(outside, "deeper", "new"))
			return err == nil
		}},
		{"edit_file", `{"file_path":"sub/f.txt","old_string":"state=0","new_string":"state=1"}`, nil},
		{"edit_file", `{"file_path":"sub/f.txt","old_string":"state=1","new_string":"state=0"}`, nil},
		{"read_image", `{"source":"sub/img.png"}`, nil},
	}
	escapes := map[string]int{}
	n := 0
	deadline := time.Now().Add(6 * time.Second)
	ctx := testkit.Context(t, 60*time.Second)
	for round := 0; round < 150 && time.Now().Before(deadline); round++ {
		for _, c := range calls {
			r, err := h.tryExec(ctx, env, c.tool, c.args)
			if err != nil {
				t.Fatal(err)
			}
			n++
			if c.escaped != nil && c.escaped(r) {
				escapes[c.tool+" "+c.args]++
			}
		}
		if data, _ := os.ReadFile(filepath.Join(outside, "f.txt")); string(data) != outsideFile {
			escapes["edit_file"]++
			os.WriteFile(filepath.Join(outside, "f.txt"), []byte(outsideFile), 0o644)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d tool calls during %d swaps; escapes: %v", n, swaps.Load(), escapes)
	if swaps.Load() < 100 {
		t.Fatalf("the swapper ran only %d swaps: the race was not exercised", swaps.Load())
	}
	if len(escapes) > 0 {
		t.Fatalf("the file tools reached the outside directory: %v", escapes)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 4 {
		t.Fatalf("the outside directory changed: %d entries", len(entries))
	}
}

// tinyPNG is a valid one-pixel PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Attack 4: read_image fetches a URL from the service's own process. On
// loopback (the service's own ports live there) it must be refused, in an
// environment without network and with network alike.
func TestAttack4ReadImageCannotReachLoopback(t *testing.T) {
	var hits atomic.Int64
	img := tinyPNG(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write(img)
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	h := start(t, environment.Options{})
	source := "http://" + lis.Addr().String() + "/secret.png"
	for _, noNetwork := range []bool{true, false} {
		resp, err := h.client.CreateEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.CreateEnvironmentRequest{Workspace: fmt.Sprint("ws-", noNetwork), NoNetwork: noNetwork})
		if err != nil {
			t.Skipf("this host cannot create an environment with no_network=%v: %v", noNetwork, err)
		}
		r := h.exec(resp.GetEnvironmentId(), "read_image", args(map[string]any{"source": source}))
		wantStop(t, r, failed, "refused")
		if len(r.out.GetImages()) != 0 {
			t.Fatal("an image came back")
		}
		// A name that resolves to loopback, and a redirect, are refused
		// alike.
		_, port, _ := net.SplitHostPort(lis.Addr().String())
		wantStop(t, h.exec(resp.GetEnvironmentId(), "read_image", args(map[string]any{"source": "http://localhost:" + port + "/x.png"})), failed, "refused")
	}
	if hits.Load() != 0 {
		t.Fatalf("the service fetched from loopback %d times", hits.Load())
	}
}

// Attack 7: the command policy reads "cmd", while a case-insensitive
// decoder would run "Cmd". Such arguments are refused before either looks.
func TestAttack7CaseVariantKeysAreRefused(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{CommandPolicy: &penguinv1.CommandPolicy{
		Rules: []*penguinv1.CommandRule{{Name: "no-rm", Pattern: `\brm\b`}},
	}})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	if err := os.Mkdir(filepath.Join(ws, "sub1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{
		`{"cmd":"echo harmless","Cmd":"rm -rf sub1"}`,
		`{"Cmd":"rm -rf sub1"}`,
		`{"cmd":"echo harmless","CMD":"rm -rf sub1"}`,
		`{"cmd":"rm -rf sub1","cmd":"echo harmless"}`,
		`{"cmd":"echo harmless","cmd":"rm -rf sub1"}`,
	} {
		wantStop(t, h.exec(env, "exec_command", a), failed, "did not run")
	}
	if _, err := os.Stat(filepath.Join(ws, "sub1")); err != nil {
		t.Fatalf("the rm ran: %v", err)
	}
	r := h.exec(env, "exec_command", `{"cmd":"echo fine","Cmd":"x"}`)
	wantStop(t, r, failed, `"Cmd"`, `"cmd"`)
	// The same holds for every tool, the file tools included.
	wantStop(t, h.exec(env, "write_file", `{"file_path":"a.txt","File_Path":"../../escape.txt","content":"x"}`), failed, `"File_Path"`)
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo fine"}`), ok, "fine")
}

// Attack 8: a vault value printed encoded, or in pieces across output
// deltas. Every form the everyday encoders make is replaced by its name.
// The encoders are coreutils' (base64, basenc, od; od -w30 wraps hex as
// xxd -p does), so that the suite runs unchanged in the environment image.
func TestAttack8VaultValuesEncodedOrSplit(t *testing.T) {
	h := start(t, environment.Options{})
	const token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	const password = "p@ss w0rd/+=&ünï?~"
	env := h.create(&penguinv1.CreateEnvironmentRequest{Vault: map[string]string{"API_TOKEN": token, "PASSWORD": password}}).GetEnvironmentId()
	urlEncode := `s="$PASSWORD"; LC_ALL=C; for ((i=0;i<${#s};i++)); do c="${s:i:1}"; case "$c" in [A-Za-z0-9._~-]) printf %s "$c";; *) printf '%%%02X' "'$c";; esac; done; echo`
	commands := map[string]string{
		"base64":            `printf %s "$API_TOKEN" | base64`,
		"base64 in a text":  `printf 'token=%s\n' "$API_TOKEN" | base64`,
		"base64 offset 1":   `printf 'xtoken=%s' "$API_TOKEN" | base64 -w0; echo`,
		"base64 offset 2":   `printf 'xxtoken=%s' "$API_TOKEN" | base64 -w0; echo`,
		"base64 wrapped":    `printf '%s%s' "$API_TOKEN" "$API_TOKEN" | base64 -w 16`,
		"base64url":         `printf '?%s' "$API_TOKEN" | basenc --base64url -w0; echo`,
		"hex wrapped":       `printf %s "$API_TOKEN" | od -An -v -tx1 -w30 | tr -d ' '`,
		"hex upper":         `printf %s "$API_TOKEN" | od -An -v -tx1 | tr -d ' \n' | tr a-f A-F; echo`,
		"hex od":            `printf %s "$API_TOKEN" | od -An -tx1 | tr -d ' \n'; echo`,
		"url-encoded":       urlEncode,
		"base64 password":   `printf %s "$PASSWORD" | base64`,
		"hex password":      `printf %s "$PASSWORD" | od -An -tx1 | tr -d ' \n'; echo`,
		"split over deltas": `v=$(printf %s "$API_TOKEN" | base64 -w0); printf %s "${v:0:21}"; sleep 0.3; printf '%s\n' "${v:21}"`,
		"split hex":         `v=$(printf %s "$API_TOKEN" | od -An -v -tx1 | tr -d ' \n'); printf %s "${v:0:33}"; sleep 0.3; printf '%s\n' "${v:33}"`,
	}
	for name, cmd := range commands {
		for _, tty := range []bool{true, false} {
			r := h.exec(env, "exec_command", args(map[string]any{"cmd": cmd, "tty": tty}))
			wantStop(t, r, ok, "[exit code 0]")
			for _, f := range r.frames {
				if redacttest.Leaks(f.String(), token) || redacttest.Leaks(f.String(), password) {
					t.Errorf("%s (tty %v): a frame leaks a vault value: %q", name, tty, r.text())
					break
				}
			}
			if !strings.Contains(r.text(), "$API_TOKEN") && !strings.Contains(r.text(), "$PASSWORD") {
				t.Errorf("%s (tty %v): nothing was replaced: %q", name, tty, r.text())
			}
		}
	}
}

// A hard link in the workspace to a file outside: the file tools must not
// write through it.
func TestAttackHardLinkToAnOutsideFile(t *testing.T) {
	h := start(t, environment.Options{})
	// Sandbox none: a confined command does not see the outside file
	// (it lies under /tmp) and may not link files it does not own.
	resp := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	env := resp.GetEnvironmentId()
	// The outside file lies on the workspace's file system, as it must
	// for a hard link.
	outside := filepath.Join(h.root, "outside.txt")
	if err := os.WriteFile(outside, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "exec_command", args(map[string]any{"cmd": "ln " + outside + " linked.txt && echo linked"})), ok, "linked")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"linked.txt","content":"pwned\n"}`), failed, "hard link")
	wantStop(t, h.exec(env, "edit_file", `{"file_path":"linked.txt","old_string":"precious","new_string":"pwned"}`), failed, "hard link")
	if data, _ := os.ReadFile(outside); string(data) != "precious\n" {
		t.Fatalf("the outside file was written through the link: %q", data)
	}
}

// Named pipes, sockets and device nodes in the workspace: a read must not
// block on a pipe nor read or write a device; a search skips them, and a
// .gitignore that is a pipe does not hang it.
func TestAttackSpecialFilesInTheWorkspace(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"mkfifo pipe.txt .gitignore && mkdir sub && mkfifo sub/.gitignore && echo made"}`), ok, "made")
	started := time.Now()
	wantStop(t, h.exec(env, "read_file", `{"file_path":"pipe.txt"}`), failed, "named pipe")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"pipe.txt","content":"x"}`), failed, "named pipe")
	wantStop(t, h.exec(env, "read_image", `{"source":"pipe.txt"}`), failed, "named pipe")
	wantStop(t, h.exec(env, "grep", `{"pattern":"x"}`), ok, "No matches")
	wantStop(t, h.exec(env, "glob", `{"pattern":"**/*.txt"}`), ok, "pipe.txt")
	if d := time.Since(started); d > 20*time.Second {
		t.Fatalf("the calls took %v: something blocked on a pipe", d)
	}
	// Device nodes, where this process may make them.
	if err := mknodChar(filepath.Join(ws, "null"), 1, 3); err != nil {
		t.Logf("no device node test: %v", err)
		return
	}
	if err := mknodChar(filepath.Join(ws, "zero"), 1, 5); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"zero"}`), failed, "device")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"null","content":"x"}`), failed, "device")
	wantStop(t, h.exec(env, "edit_file", `{"file_path":"null","old_string":"a","new_string":"b"}`), failed, "device")
	wantStop(t, h.exec(env, "read_image", `{"source":"zero"}`), failed, "device")
}

// Links that lead out in other ways: through /proc/self/root, through an
// absolute link to the workspace's own parent, and the workspace itself
// replaced by a link after creation.
func TestAttackOtherLinksOut(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"ln -s /proc/self/root root-link && ln -s /proc/self/cwd cwd-link && ln -s .. up && echo made"}`), ok, "made")
	for _, p := range []string{"root-link/etc/hostname", "cwd-link/etc/hostname", "up/" + filepath.Base(ws) + "/../x", "/proc/self/root/etc/hostname"} {
		wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": p})), failed, "not inside the workspace")
		wantStop(t, h.exec(env, "write_file", args(map[string]any{"file_path": p, "content": "x"})), failed, "not inside the workspace")
	}
	// The workspace directory itself is replaced by a link to an outside
	// directory (a sandbox-none command can do that): the file tools keep
	// working on the directory they were given.
	outside := t.TempDir()
	wantStop(t, h.exec(env, "exec_command", args(map[string]any{"cmd": fmt.Sprintf("cd / && mv %s %s.moved && ln -s %s %s && echo swapped", ws, ws, outside, ws)})), ok, "swapped")
	h.exec(env, "write_file", `{"file_path":"planted.txt","content":"x"}`)
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Fatal("write_file followed the replaced workspace out")
	}
}

// A file that does not end: read_file and grep stop at their caps.
func TestAttackEndlessFiles(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	f, err := os.Create(filepath.Join(ws, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file of 1 GiB of NUL-free text is too slow to make; a
	// sparse one reads as NULs, which is what a device would give too.
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("line\n"), 0)
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started := time.Now()
	wantStop(t, h.execCtx(ctx, env, "read_file", `{"file_path":"huge.txt"}`), failed, "binary")
	wantStop(t, h.execCtx(ctx, env, "grep", `{"pattern":"line"}`), ok, "No matches")
	wantStop(t, h.execCtx(ctx, env, "read_image", `{"source":"huge.txt"}`), failed, "at most")
	if d := time.Since(started); d > 20*time.Second {
		t.Fatalf("reading a huge file took %v", d)
	}
}
