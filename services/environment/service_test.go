package environment_test

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func TestLifecycle(t *testing.T) {
	h := start(t, environment.Options{})
	ctx := testkit.Context(t, 60*time.Second)

	resp := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "projects/one", Label: "session-1"})
	if want := filepath.Join(h.root, "projects", "one"); resp.GetWorkspace() != want {
		t.Fatalf("workspace %q, want %q", resp.GetWorkspace(), want)
	}
	if info, err := os.Stat(resp.GetWorkspace()); err != nil || !info.IsDir() {
		t.Fatalf("workspace not created: %v", err)
	}
	names := []string{}
	for _, ti := range resp.GetTools() {
		names = append(names, ti.GetDefinition().GetName())
		if !strings.HasPrefix(ti.GetDefinition().GetParameters(), "{") || ti.GetDefinition().GetDescription() == "" {
			t.Errorf("tool %s lacks a schema or description", ti.GetDefinition().GetName())
		}
	}
	if got := strings.Join(names, ","); got != "exec_command,input_command,kill_command,read_file,edit_file,write_file,read_image,glob,grep" {
		t.Fatalf("tools %s", got)
	}
	list, err := h.client.ListTools(ctx, &penguinv1.ListToolsRequest{EnvironmentId: resp.GetEnvironmentId()})
	if err != nil || len(list.GetTools()) != len(names) {
		t.Fatalf("ListTools: %v %d", err, len(list.GetTools()))
	}
	for name, want := range map[string]penguinv1.Permission{
		"read_file": penguinv1.Permission_PERMISSION_R, "grep": penguinv1.Permission_PERMISSION_R,
		"exec_command": penguinv1.Permission_PERMISSION_RW, "nope": penguinv1.Permission_PERMISSION_UNSPECIFIED,
	} {
		p, err := h.client.GetToolPermission(ctx, &penguinv1.GetToolPermissionRequest{EnvironmentId: resp.GetEnvironmentId(), Name: name})
		if err != nil || p.GetPermission() != want {
			t.Errorf("permission of %s: %v %v, want %v", name, p.GetPermission(), err, want)
		}
	}
	abs := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: filepath.Join(h.root, "abs")})
	if abs.GetWorkspace() != filepath.Join(h.root, "abs") {
		t.Fatalf("absolute workspace %q", abs.GetWorkspace())
	}

	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(h.root, "link-out")); err != nil {
		t.Fatal(err)
	}
	for _, ws := range []string{"../elsewhere", outside, "link-out", "link-out/deeper", ""} {
		_, err := h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: ws})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("workspace %q: %v, want InvalidArgument", ws, err)
		}
	}
	_, err = h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "x",
		CommandPolicy: &penguinv1.CommandPolicy{Rules: []*penguinv1.CommandRule{{Name: "bad", Pattern: "("}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("bad policy: %v", err)
	}
	_, err = h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "x",
		Tools: &penguinv1.ToolConfig{Builtin: []*penguinv1.ToolSpec{{Name: "no_such_tool"}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no_such_tool") {
		t.Errorf("unknown builtin: %v", err)
	}
	_, err = h.client.CreateEnvironment(ctx, &penguinv1.CreateEnvironmentRequest{Workspace: "x",
		Tools: &penguinv1.ToolConfig{NoBuiltins: true, Builtin: []*penguinv1.ToolSpec{{Name: "read_file"}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no_builtins") {
		t.Errorf("no_builtins with a builtin list: %v", err)
	}
	// no_builtins: only the custom tool is offered.
	only := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "custom-only", Tools: &penguinv1.ToolConfig{
		NoBuiltins: true, Custom: []*penguinv1.ToolSpec{{Name: "hello", Description: "Says hello.", Command: "echo hello"}},
	}})
	if got := only.GetTools(); len(got) != 1 || got[0].GetDefinition().GetName() != "hello" {
		t.Errorf("no_builtins offers %v, want only hello", got)
	}
	wantStop(t, h.exec(only.GetEnvironmentId(), "exec_command", `{"cmd":"true"}`), failed, "exec_command")

	d, err := h.client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
	if err != nil || !d.GetDisposed() {
		t.Fatalf("dispose: %v %v", d, err)
	}
	d, err = h.client.DisposeEnvironment(ctx, &penguinv1.DisposeEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
	if err != nil || d.GetDisposed() {
		t.Fatalf("second dispose: %v %v", d, err)
	}
	for name, call := range map[string]func() error{
		"ListTools": func() error {
			_, err := h.client.ListTools(ctx, &penguinv1.ListToolsRequest{EnvironmentId: resp.GetEnvironmentId()})
			return err
		},
		"GetToolPermission": func() error {
			_, err := h.client.GetToolPermission(ctx, &penguinv1.GetToolPermissionRequest{EnvironmentId: resp.GetEnvironmentId(), Name: "read_file"})
			return err
		},
		"ListProcesses": func() error {
			_, err := h.client.ListProcesses(ctx, &penguinv1.ListProcessesRequest{EnvironmentId: resp.GetEnvironmentId()})
			return err
		},
		"WatchEnvironment": func() error {
			s, err := h.client.WatchEnvironment(ctx, &penguinv1.WatchEnvironmentRequest{EnvironmentId: resp.GetEnvironmentId()})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.NotFound {
			t.Errorf("%s after dispose: %v, want NotFound", name, err)
		}
	}
	r := h.exec(resp.GetEnvironmentId(), "read_file", `{"file_path":"x"}`)
	wantStop(t, r, failed, "Unknown environment", resp.GetEnvironmentId())
}

func TestSandboxIsNeverDowngraded(t *testing.T) {
	h := start(t, environment.Options{CheckSandbox: func(p sandbox.Policy) error {
		if p.Mode != sandbox.None || p.Network != sandbox.NetworkHost {
			return fmt.Errorf("%w: simulated host without Landlock", sandbox.ErrUnsupported)
		}
		return nil
	}})
	ctx := testkit.Context(t, 30*time.Second)
	for _, req := range []*penguinv1.CreateEnvironmentRequest{
		{Workspace: "a", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE},
		{Workspace: "b", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY},
		{Workspace: "c", NoNetwork: true},
	} {
		_, err := h.client.CreateEnvironment(ctx, req)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "Landlock") {
			t.Errorf("%v: %v, want FailedPrecondition", req, err)
		}
	}
	h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "d", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	// The default follows what the host can enforce, and the response
	// says which mode applies.
	resp := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "e"})
	if resp.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_NONE || resp.GetNetwork() != penguinv1.NetworkAccess_NETWORK_ACCESS_HOST {
		t.Errorf("the default on a host without Landlock: %v, %v; want none on the host's network", resp.GetSandboxMode(), resp.GetNetwork())
	}
}

func TestBadInputBecomesFailedOutput(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	cases := []struct {
		name, tool, args string
		want             []string
	}{
		{"unknown tool", "teleport", `{}`, []string{`Unknown tool "teleport"`, "exec_command"}},
		{"not JSON", "read_file", `{"file_path": `, []string{"not valid JSON"}},
		{"not an object", "read_file", `[1,2]`, []string{"must be a JSON object"}},
		{"missing field", "exec_command", `{"description":"x"}`, []string{`missing required argument "cmd"`}},
		{"missing fields", "edit_file", `{"file_path":"a"}`, []string{`missing required arguments "old_string", "new_string"`}},
		{"wrong type", "read_file", `{"file_path":"a","offset":"ten"}`, []string{`argument "offset" must be a JSON number`}},
		{"unknown process", "input_command", `{"process_id":"99"}`, []string{`no command session has process_id "99"`}},
		{"bad regexp", "grep", `{"pattern":"("}`, []string{"bad regular expression"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantStop(t, h.exec(env, c.tool, c.args), failed, c.want...)
		})
	}
	// A call without an id cannot be answered by an output.
	_, err := h.client.ExecuteTool(testkit.Context(t, 10*time.Second), &penguinv1.ExecuteToolRequest{EnvironmentId: env})
	if err == nil {
		s, _ := h.client.ExecuteTool(testkit.Context(t, 10*time.Second), &penguinv1.ExecuteToolRequest{EnvironmentId: env})
		_, err = s.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no tool call: %v", err)
	}
}

func TestFileTools(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()

	r := h.exec(env, "write_file", args(map[string]any{"file_path": "dir/sub/a.txt", "content": "one\ntwo\nthree\n"}))
	wantStop(t, r, ok, "Created dir/sub/a.txt (3 lines, 14 bytes)")
	r = h.exec(env, "write_file", args(map[string]any{"file_path": "dir/sub/a.txt", "content": "one\n2\nthree\n"}))
	wantStop(t, r, ok, "Overwrote dir/sub/a.txt (3 lines, 12 bytes)", "--- a/dir/sub/a.txt", "-two\n+2")
	wantStop(t, h.exec(env, "write_file", args(map[string]any{"file_path": "empty", "content": ""})), ok, "Created empty (0 lines, 0 bytes)")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"x"}`), failed, `missing required argument "content"`)

	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	if err := os.WriteFile(filepath.Join(ws, "long.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = h.exec(env, "read_file", `{"file_path":"long.txt","offset":5,"limit":3}`)
	wantStop(t, r, ok, "     5\tline 5\n     6\tline 6\n     7\tline 7\n", "[lines 5-7 of 30 shown; continue with offset=8]")
	if strings.Contains(r.text(), "line 8\n") || strings.Contains(r.text(), "line 4\n") {
		t.Fatalf("window too wide:\n%s", r.text())
	}
	wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": filepath.Join(ws, "long.txt")})), ok, "    30\tline 30")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"long.txt","offset":31}`), failed, "past the end", "30 lines")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"missing.txt"}`), failed, "missing.txt does not exist")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"dir"}`), failed, "is a directory")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"empty"}`), ok, "[empty file]")
	if err := os.WriteFile(filepath.Join(ws, "bin"), []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"bin"}`), failed, "binary file")

	// edit_file: unique match, not found, ambiguous, replace_all.
	if err := os.WriteFile(filepath.Join(ws, "code.go"), []byte("a := 1\nb := 2\nc := 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = h.exec(env, "edit_file", args(map[string]any{"file_path": "code.go", "old_string": "b := 2", "new_string": "b := 3"}))
	wantStop(t, r, ok, "Replaced 1 occurrence in code.go", "@@ -1,3 +1,3 @@", "-b := 2\n+b := 3")
	wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": "code.go", "old_string": "zzz", "new_string": "y"})), failed, "old_string was not found")
	wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": "code.go", "old_string": ":= 1", "new_string": ":= 9"})), failed, "occurs 2 times", "replace_all")
	wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": "code.go", "old_string": "a", "new_string": "a"})), failed, "same as")
	wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": "nope.go", "old_string": "a", "new_string": "b"})), failed, "nope.go does not exist")
	r = h.exec(env, "edit_file", args(map[string]any{"file_path": "code.go", "old_string": ":= 1", "new_string": ":= 9", "replace_all": true}))
	wantStop(t, r, ok, "Replaced 2 occurrences in code.go", "+a := 9", "+c := 9")
	data, _ := os.ReadFile(filepath.Join(ws, "code.go"))
	if string(data) != "a := 9\nb := 3\nc := 9\n" {
		t.Fatalf("edited file %q", data)
	}

	// CRLF files, as Windows editors write them: the model edits and
	// rewrites them with "\n" (read_file shows lines without "\r"), and
	// the file keeps its endings; the diffs show no "\r".
	if err := os.WriteFile(filepath.Join(ws, "win.txt"), []byte("alpha\r\nbeta\r\ngamma\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"win.txt"}`), ok, "     2\tbeta\n")
	r = h.exec(env, "edit_file", args(map[string]any{"file_path": "win.txt", "old_string": "alpha\nbeta\n", "new_string": "alpha\nBETA\nbeta2\n"}))
	wantStop(t, r, ok, "Replaced 1 occurrence in win.txt", "-beta\n+BETA\n+beta2\n")
	if strings.Contains(r.text(), "\r") {
		t.Errorf("the diff of a CRLF file shows \\r:\n%q", r.text())
	}
	wantFile := func(want string) {
		t.Helper()
		if data, _ := os.ReadFile(filepath.Join(ws, "win.txt")); string(data) != want {
			t.Fatalf("win.txt is %q, want %q", data, want)
		}
	}
	wantFile("alpha\r\nBETA\r\nbeta2\r\ngamma\r\n")
	r = h.exec(env, "write_file", args(map[string]any{"file_path": "win.txt", "content": "alpha\nBETA\ngamma\n"}))
	wantStop(t, r, ok, "Overwrote win.txt (3 lines, 20 bytes, its CRLF line endings kept)", "-beta2\n")
	wantFile("alpha\r\nBETA\r\ngamma\r\n")
	// Content that brings its own "\r" is written as given, and a change
	// of endings alone is said in words.
	r = h.exec(env, "write_file", args(map[string]any{"file_path": "win.txt", "content": "alpha\nBETA\ngamma\n\r"}))
	wantStop(t, r, ok, "(the line endings changed from CRLF to LF)")
	if err := os.WriteFile(filepath.Join(ws, "unix.txt"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = h.exec(env, "write_file", args(map[string]any{"file_path": "unix.txt", "content": "a\r\nb\r\n"}))
	wantStop(t, r, ok, "Overwrote unix.txt (2 lines, 6 bytes)\n(the line endings changed from LF to CRLF)")

	// read_image: a real PNG, a text file, and a file too large.
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "pic.png"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r = h.exec(env, "read_image", `{"source":"pic.png"}`)
	wantStop(t, r, ok, "image/png")
	if len(r.out.GetImages()) != 1 || !strings.HasPrefix(r.out.GetImages()[0], "data:image/png;base64,") {
		t.Fatalf("images %v", r.out.GetImages())
	}
	wantStop(t, h.exec(env, "read_image", `{"source":"long.txt"}`), failed, "not a PNG, JPEG, GIF or WebP")
	if err := os.WriteFile(filepath.Join(ws, "huge.png"), append(buf.Bytes(), make([]byte, 5<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(env, "read_image", `{"source":"huge.png"}`), failed, "at most 5242880")
}

func TestFileToolsStayInTheWorkspace(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "door")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "secret-link")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(ws, secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{rel, secret, "door/secret.txt", "secret-link", "../../../../../../../etc/hostname"} {
		wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": path})), failed, "not inside the workspace")
		wantStop(t, h.exec(env, "write_file", args(map[string]any{"file_path": path, "content": "pwned"})), failed, "not inside the workspace")
		wantStop(t, h.exec(env, "edit_file", args(map[string]any{"file_path": path, "old_string": "top", "new_string": "pwned"})), failed, "not inside the workspace")
		wantStop(t, h.exec(env, "read_image", args(map[string]any{"source": path})), failed, "not inside the workspace")
	}
	wantStop(t, h.exec(env, "write_file", args(map[string]any{"file_path": "door/new.txt", "content": "x"})), failed, "symbolic link")
	if data, _ := os.ReadFile(secret); string(data) != "top secret\n" {
		t.Fatalf("the outside file changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created outside: %v", err)
	}
	wantStop(t, h.exec(env, "glob", `{"pattern":"*","path":"door"}`), failed, "not inside the workspace")
	wantStop(t, h.exec(env, "grep", `{"pattern":"secret","path":"../"}`), failed, "not inside the workspace")
	wantStop(t, h.exec(env, "exec_command", `{"cmd":"pwd","workdir":"door"}`), failed, "not inside the workspace")
}

func TestGlobAndGrep(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	files := map[string]string{
		".gitignore":            "build/\n*.log\n",
		"main.go":               "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"pkg/util.go":           "package pkg\n\n// Hello says hello.\nfunc Hello() {}\n",
		"pkg/util_test.go":      "package pkg\n",
		"pkg/.gitignore":        "generated.go\n",
		"pkg/generated.go":      "package pkg // hello\n",
		"build/out.go":          "package build // hello\n",
		"debug.log":             "hello\n",
		"docs/readme.md":        "Hello docs\n",
		".git/objects/ab/hello": "hello\n",
	}
	for p, c := range files {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := h.exec(env, "glob", `{"pattern":"**/*.go"}`)
	wantStop(t, r, ok)
	if r.text() != "main.go\npkg/util.go\npkg/util_test.go" {
		t.Fatalf("glob:\n%s", r.text())
	}
	r = h.exec(env, "glob", `{"pattern":"*.{go,md}","path":"pkg"}`)
	if r.text() != "pkg/util.go\npkg/util_test.go" {
		t.Fatalf("glob in pkg:\n%s", r.text())
	}
	wantStop(t, h.exec(env, "glob", `{"pattern":"**/*.rs"}`), ok, `No files match "**/*.rs"`)

	r = h.exec(env, "grep", `{"pattern":"hello","ignore_case":true}`)
	wantStop(t, r, ok, `main.go:4:	println("hello")`, "pkg/util.go:3:// Hello says hello.", "docs/readme.md:1:Hello docs")
	for _, hidden := range []string{"generated.go", "build/", "debug.log", ".git"} {
		if strings.Contains(r.text(), hidden) {
			t.Fatalf("grep searched ignored %s:\n%s", hidden, r.text())
		}
	}
	r = h.exec(env, "grep", `{"pattern":"hello","output_mode":"files_with_matches","glob":"*.go"}`)
	if r.text() != "main.go\npkg/util.go" {
		t.Fatalf("files_with_matches:\n%s", r.text())
	}
	r = h.exec(env, "grep", `{"pattern":"func","path":"main.go","context":1}`)
	wantStop(t, r, ok, "main.go-2-\nmain.go:3:func main() {\nmain.go-4-")
	wantStop(t, h.exec(env, "grep", `{"pattern":"zzzz"}`), ok, `No matches for "zzzz"`)
	wantStop(t, h.exec(env, "grep", `{"pattern":"x","output_mode":"lines"}`), failed, "output_mode")
}

// TestConfinedDefaultIsRefusedAtStart proves that a service told to
// confine environments by default (--sandbox-default workspace-write, as
// the Kubernetes manifests start it) on a host that cannot refuses to
// start, naming what is missing, instead of starting and failing every
// CreateEnvironment; told to run them unconfined, it starts, and still
// refuses the confined modes asked for. On the code before, it started.
func TestConfinedDefaultIsRefusedAtStart(t *testing.T) {
	cannot := func(p sandbox.Policy) error {
		if p.Mode != sandbox.None {
			return fmt.Errorf("%w: simulated pod without a user namespace: the service runs as uid 65532", sandbox.ErrUnsupported)
		}
		return nil
	}
	for _, mode := range []string{"workspace-write", "read-only"} {
		_, err := environment.New(environment.Options{Root: t.TempDir(), ScratchDir: t.TempDir(), DefaultSandbox: mode, CheckSandbox: cannot})
		if err == nil || !errors.Is(err, sandbox.ErrUnsupported) || !strings.Contains(err.Error(), "uid 65532") || !strings.Contains(err.Error(), mode) {
			t.Errorf("--sandbox-default %s on a host that cannot confine: %v, want a refusal naming the mode and the cause", mode, err)
		}
	}
	h := start(t, environment.Options{DefaultSandbox: "none", CheckSandbox: cannot})
	_, err := h.client.CreateEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.CreateEnvironmentRequest{Workspace: "a", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "uid 65532") {
		t.Errorf("workspace-write asked of a service that cannot confine: %v, want FailedPrecondition with the cause", err)
	}
	if resp := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "b"}); resp.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_NONE {
		t.Errorf("the default of --sandbox-default none: %v", resp.GetSandboxMode())
	}
}

// TestSandboxRequired proves --sandbox-required, as the Kubernetes
// manifests start environment pods: a session asking for sandbox mode
// none is refused with FailedPrecondition (its commands would run as the
// service, with its token), the default is confined, and a host that
// cannot confine, or a default of none, stops the service at start. On
// the code before, mode none was created.
func TestSandboxRequired(t *testing.T) {
	cannot := func(p sandbox.Policy) error {
		if p.Mode != sandbox.None {
			return fmt.Errorf("%w: simulated pod without a user namespace", sandbox.ErrUnsupported)
		}
		return nil
	}
	if _, err := environment.New(environment.Options{Root: t.TempDir(), ScratchDir: t.TempDir(), SandboxRequired: true, CheckSandbox: cannot}); err == nil || !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("a required sandbox on a host that cannot confine: %v, want a refusal at start", err)
	}
	can := func(sandbox.Policy) error { return nil }
	if _, err := environment.New(environment.Options{Root: t.TempDir(), ScratchDir: t.TempDir(), SandboxRequired: true, DefaultSandbox: "none", CheckSandbox: can}); err == nil || !strings.Contains(err.Error(), "--sandbox-required") {
		t.Errorf("a required sandbox with the default none: %v, want a refusal at start", err)
	}
	h := start(t, environment.Options{SandboxRequired: true, CheckSandbox: can})
	_, err := h.client.CreateEnvironment(testkit.Context(t, 30*time.Second), &penguinv1.CreateEnvironmentRequest{Workspace: "a", SandboxMode: penguinv1.SandboxMode_SANDBOX_MODE_NONE})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--sandbox-required") {
		t.Errorf("sandbox mode none asked of a service that requires a sandbox: %v, want FailedPrecondition", err)
	}
	if resp := h.create(&penguinv1.CreateEnvironmentRequest{Workspace: "b"}); resp.GetSandboxMode() != penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE {
		t.Errorf("the default of a service that requires a sandbox: %v, want workspace-write", resp.GetSandboxMode())
	}
}
