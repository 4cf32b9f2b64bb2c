package environment_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment"
)

func TestCommandPolicyForbidsBeforeAnythingRuns(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{CommandPolicy: &penguinv1.CommandPolicy{
		UseDefaults: true,
		Rules:       []*penguinv1.CommandRule{{Name: "no-force-push", Pattern: `git push [^;|&]*--force`}},
	}})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	for _, cmd := range []string{
		"touch ran-1 && rm -rf /",
		"touch ran-2; sudo /bin/rm -fr ~",
		`touch ran-3; sh -c 'rm -r -f /tmp/x'`,
		"touch ran-4; git push origin main --force",
	} {
		r := h.exec(env, "exec_command", args(map[string]any{"cmd": cmd}))
		if r.text() != "Tool call denied by policy." || r.out.GetStopReason() != aborted {
			t.Fatalf("%q: %v %q", cmd, r.out.GetStopReason(), r.text())
		}
	}
	entries, _ := os.ReadDir(ws)
	if len(entries) != 0 {
		t.Fatalf("a forbidden command ran: %v", entries)
	}
	// Typed into a running shell, the same text is refused too.
	r := h.exec(env, "exec_command", `{"cmd":"bash --norc","yield_time_ms":300}`)
	wantStop(t, r, ok, "process_id 1")
	r = h.exec(env, "input_command", `{"process_id":"1","chars":"rm -rf /\n"}`)
	wantStop(t, r, aborted, "Tool call denied by policy.")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"rm -r build; echo fine"}`), ok, "fine")
}

func TestVaultValuesNeverLeave(t *testing.T) {
	h := start(t, environment.Options{})
	const secret = "s3cr3t-Value-9876"
	env := h.create(&penguinv1.CreateEnvironmentRequest{Vault: map[string]string{"API_TOKEN": secret}}).GetEnvironmentId()
	// The value is printed whole, split across writes (and so across
	// deltas), and reaches the command through its environment.
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": `echo "token=$API_TOKEN"; printf 's3cr3t-Va'; sleep 0.3; printf 'lue-9876\n'; [ "$API_TOKEN" = '` + secret + `' ] && echo injected`}))
	wantStop(t, r, ok, "token=$API_TOKEN\n$API_TOKEN\ninjected")
	for _, f := range r.frames {
		if strings.Contains(f.String(), secret) {
			t.Fatalf("a frame carries the secret: %v", f)
		}
	}
	if len(r.deltas()) < 2 {
		t.Fatalf("the split value was not streamed in pieces: %q", r.deltas())
	}
	r = h.exec(env, "write_file", args(map[string]any{"file_path": "s.txt", "content": "key: " + secret + "\n"}))
	wantStop(t, r, ok)
	r = h.exec(env, "read_file", `{"file_path":"s.txt"}`)
	wantStop(t, r, ok, "key: $API_TOKEN")
	wantStop(t, h.exec(env, "grep", `{"pattern":"key"}`), ok, "s.txt:1:key: $API_TOKEN")
	wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": "s.txt", "old_string": "nothing", "new_string": secret})), failed)
	if r := h.exec(env, "read_file", args(map[string]any{"file_path": secret})); strings.Contains(r.text(), secret) {
		t.Fatalf("an error message leaked the secret: %s", r.text())
	}
}

func TestOutputCapAndArchive(t *testing.T) {
	h := start(t, environment.Options{})
	limit := int64(200)
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Label: "sess-42", Tools: &penguinv1.ToolConfig{Builtin: []*penguinv1.ToolSpec{
		{Name: "exec_command", MaxOutputLength: &limit}, {Name: "read_file"},
	}}})
	env := resp.GetEnvironmentId()
	r := h.exec(env, "exec_command", `{"cmd":"seq 1 5000"}`)
	wantStop(t, r, ok, "[output truncated: showing the first 200 of 23893 characters; the full output is saved at ", "[exit code 0]")
	var shown strings.Builder
	for i := 1; shown.Len() < 200; i++ {
		shown.WriteString(strings.TrimSpace(strings.Repeat(" ", 0)) + itoa(i) + "\n")
	}
	if !strings.HasPrefix(r.text(), shown.String()[:200]+"\n[output truncated") {
		t.Fatalf("the head is not kept:\n%s", r.text()[:300])
	}
	i := strings.Index(r.text(), "saved at ") + len("saved at ")
	path := r.text()[i : i+strings.Index(r.text()[i:], "]")]
	if !strings.HasPrefix(path, filepath.Join(h.scratch, "sess-42", "truncated-tool-output")+"/") {
		t.Fatalf("archive path %q", path)
	}
	if strings.HasPrefix(path, resp.GetWorkspace()) {
		t.Fatal("the archive is inside the workspace")
	}
	data, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(data), "1\n2\n") || !strings.HasSuffix(string(data), "4999\n5000\n") || len(data) != 23893 {
		t.Fatalf("archive: %d bytes, %v", len(data), err)
	}
	// The model reads the archive back with read_file.
	wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": path, "offset": 4999})), ok, "  4999\t4999\n  5000\t5000")

	// The default cap is 16000 characters.
	plain := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	wantStop(t, h.exec(plain, "exec_command", `{"cmd":"seq 1 10000"}`), ok, "[output truncated: showing the first 16000 of 48894 characters")
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

func TestCustomTools(t *testing.T) {
	h := start(t, environment.Options{})
	timeout := int64(1000)
	resp := h.create(&penguinv1.CreateEnvironmentRequest{
		SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE, // checkNoSurvivors reads the host's pids
		Vault:       map[string]string{"SECRET": "hunter2hunter2"},
		Tools: &penguinv1.ToolConfig{Custom: []*penguinv1.ToolSpec{
			{Name: "greet", Description: "Greets.", Parameters: `{"type":"object","properties":{"name":{"type":"string"}}}`, Permission: penguinv1.Permission_PERMISSION_R,
				Command: `read -r line; echo "stdin=$line"; echo "env=$PENGUIN_TOOL_ARGS"; echo "dir=$PWD"; echo "secret=$SECRET"`},
			{Name: "broken", Description: "Fails.", Command: `echo "about to fail" >&2; exit 3`},
			{Name: "slow", Description: "Hangs.", Command: orphanScript, TimeoutMs: &timeout},
		}},
	})
	env := resp.GetEnvironmentId()
	perms := map[string]penguinv1.Permission{}
	for _, ti := range resp.GetTools() {
		perms[ti.GetDefinition().GetName()] = ti.GetPermission()
	}
	if perms["greet"] != penguinv1.Permission_PERMISSION_R || perms["broken"] != penguinv1.Permission_PERMISSION_RW {
		t.Fatalf("permissions %v", perms)
	}
	r := h.exec(env, "greet", `{"name":"ada"}`)
	wantStop(t, r, ok, `stdin={"name":"ada"}`, `env={"name":"ada"}`, "dir="+resp.GetWorkspace(), "secret=$SECRET")
	wantStop(t, h.exec(env, "broken", `{}`), failed, "about to fail", "[exit code 3]")
	wantStop(t, h.exec(env, "greet", `not json`), failed, "not valid JSON")
	r = h.exec(env, "slow", `{}`)
	wantStop(t, r, timedOut, "[timed out after 1s]")
	checkNoSurvivors(t, r.text())
}

// TestWorkspaceWriteSandbox runs confined commands through the service.
func TestWorkspaceWriteSandbox(t *testing.T) {
	requireConfinement(t)
	h := start(t, environment.Options{})
	outside := outsideDir(t)
	resp := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
	env := resp.GetEnvironmentId()
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo inside > inside.txt && cat inside.txt"}`), ok, "inside", "[exit code 0]")
	r := h.exec(env, "exec_command", args(map[string]any{"cmd": "echo outside > " + filepath.Join(outside, "f.txt")}))
	wantStop(t, r, failed, "Read-only file system")
	if _, err := os.Stat(filepath.Join(outside, "f.txt")); !os.IsNotExist(err) {
		t.Fatalf("the confined command wrote outside the workspace: %v", err)
	}
	// The environment's temporary directory stays writable.
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"f=$(mktemp) && echo ok > $f && cat $f && rm $f"}`), ok, "ok")
	for i := 0; i < 5; i++ {
		wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo a; echo b"}`), ok, "a\nb")
	}
}

// TestReadOnlySandbox runs read-only commands through the service, with
// the workspace under /tmp (which no longer has to be writable).
func TestReadOnlySandbox(t *testing.T) {
	requireConfinement(t)
	writable := outsideDir(t)
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	h := start(t, environment.Options{WritablePaths: []string{writable}})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY})
	env := resp.GetEnvironmentId()
	if err := os.WriteFile(filepath.Join(resp.GetWorkspace(), "given.txt"), []byte("readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"cat given.txt"}`), ok, "readable")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo x > new.txt"}`), failed, "Read-only file system")
	wantStop(t, h.exec(env, "exec_command", args(map[string]any{"cmd": "echo y > " + filepath.Join(writable, "t") + " && cat " + filepath.Join(writable, "t")})), ok, "y")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo z > /tmp/z && cat /tmp/z"}`), ok, "z")
	if _, err := os.Stat(filepath.Join(resp.GetWorkspace(), "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("a read-only command wrote to the workspace: %v", err)
	}
	// The file tools do not write where commands cannot.
	wantStop(t, h.exec(env, "write_file", `{"file_path":"by-tool.txt","content":"x"}`), failed, "read-only")
	wantStop(t, h.exec(env, "edit_file", `{"file_path":"given.txt","old_string":"readable","new_string":"x"}`), failed, "read-only")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"given.txt"}`), ok, "readable")
}
