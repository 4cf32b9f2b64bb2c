package environment_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func files(resp *penguinv1.DescribeWorkspaceResponse) []string {
	var out []string
	for _, f := range resp.GetAgentsFiles() {
		out = append(out, f.GetPath()+"="+f.GetContent())
	}
	return out
}

// The AGENTS.md files run from the project root (the nearest .git) down to
// the workspace, read without an environment, with nothing created.
func TestDescribeWorkspace(t *testing.T) {
	h := start(t, environment.Options{})
	ctx := testkit.Context(t, 30*time.Second)
	root := h.root
	writeFile(t, filepath.Join(root, "AGENTS.md"), "above the project")
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "AGENTS.md"), "root rule")
	writeFile(t, filepath.Join(repo, "svc", "api", "AGENTS.md"), "api rule")
	if err := os.MkdirAll(filepath.Join(repo, "svc", "api", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "repo/svc/api/deep"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(repo, "AGENTS.md") + "=root rule", filepath.Join(repo, "svc", "api", "AGENTS.md") + "=api rule"}
	if got := files(resp); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("files = %q, want %q", got, want)
	}
	if resp.GetProjectRoot() != repo || resp.GetWorkspace() != filepath.Join(repo, "svc", "api", "deep") {
		t.Errorf("project root %q, workspace %q", resp.GetProjectRoot(), resp.GetWorkspace())
	}
	// Without a .git, the service root bounds the search.
	writeFile(t, filepath.Join(root, "plain", "AGENTS.md"), "plain rule")
	resp, err = h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: filepath.Join(root, "plain")})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{filepath.Join(root, "AGENTS.md") + "=above the project", filepath.Join(root, "plain", "AGENTS.md") + "=plain rule"}
	if got := files(resp); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("files without .git = %q, want %q", got, want)
	}
	// A workspace that does not exist is not found, and not created.
	_, err = h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "missing/dir"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("missing workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "missing")); !os.IsNotExist(err) {
		t.Error("DescribeWorkspace created the workspace")
	}
	for _, bad := range []string{"", "../outside", "/etc"} {
		if _, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: bad}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("workspace %q: %v", bad, err)
		}
	}
}

// A link cannot take the read outside the service root: neither a linked
// AGENTS.md nor a linked workspace.
func TestDescribeWorkspaceLinks(t *testing.T) {
	h := start(t, environment.Options{})
	ctx := testkit.Context(t, 30*time.Second)
	outside := outsideDir(t)
	writeFile(t, filepath.Join(outside, "AGENTS.md"), "outside secret")
	ws := filepath.Join(h.root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "AGENTS.md"), filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(files(resp), ""), "outside secret") {
		t.Error("a linked AGENTS.md outside the root was read")
	}
	if err := os.Symlink(outside, filepath.Join(h.root, "door")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "door"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a workspace linked outside the root: %v", err)
	}
	// A relative link that stays inside the root is followed.
	writeFile(t, filepath.Join(h.root, "shared.md"), "shared rule")
	if err := os.Remove(filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared.md", filepath.Join(ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	resp, err = h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "ws"})
	if err != nil || !strings.Contains(strings.Join(files(resp), ""), "shared rule") {
		t.Errorf("an inside link: %v, %v", files(resp), err)
	}
}

// The files together stay within MaxInstructionsBytes: the one that passes
// the bound is cut on a character boundary, the ones after come empty,
// every one named; invalid UTF-8 is replaced.
func TestDescribeWorkspaceBound(t *testing.T) {
	h := start(t, environment.Options{})
	ctx := testkit.Context(t, 30*time.Second)
	if err := os.MkdirAll(filepath.Join(h.root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(h.root, "AGENTS.md"), strings.Repeat("a", environment.MaxInstructionsBytes-10))
	writeFile(t, filepath.Join(h.root, "a", "AGENTS.md"), strings.Repeat("é", 20)) // 40 bytes, cut mid-way
	writeFile(t, filepath.Join(h.root, "a", "b", "AGENTS.md"), "never shown")
	resp, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "a/b"})
	if err != nil {
		t.Fatal(err)
	}
	fs := resp.GetAgentsFiles()
	if len(fs) != 3 {
		t.Fatalf("got %d files, want 3", len(fs))
	}
	total := 0
	for _, f := range fs {
		total += len(f.GetContent())
		if !utf8.ValidString(f.GetContent()) {
			t.Errorf("%s: invalid UTF-8", f.GetPath())
		}
	}
	if total > environment.MaxInstructionsBytes {
		t.Errorf("%d bytes returned, bound %d", total, environment.MaxInstructionsBytes)
	}
	if fs[0].GetTruncated() || !fs[1].GetTruncated() || fs[1].GetContent() != strings.Repeat("é", 5) || !fs[2].GetTruncated() || fs[2].GetContent() != "" {
		t.Errorf("bound applied wrongly: %v %v %q %v %q", fs[0].GetTruncated(), fs[1].GetTruncated(), fs[1].GetContent(), fs[2].GetTruncated(), fs[2].GetContent())
	}
	other := start(t, environment.Options{})
	writeFile(t, filepath.Join(other.root, "bad", "AGENTS.md"), "ok \xff\xfe bytes")
	resp, err = other.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "bad"})
	if err != nil || len(resp.GetAgentsFiles()) != 1 || resp.GetAgentsFiles()[0].GetContent() != "ok \uFFFD bytes" {
		t.Errorf("invalid UTF-8: %v, %v", files(resp), err)
	}
}

// lockedBuffer is a log destination that goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHostLimitationsAreSaid proves how a system other than Linux says
// what it lacks (sandbox.Unavailable; macOS's and Windows' lists are
// tested in the sandbox package): each sentence once among the service's
// first log lines, before it serves, and in every DescribeWorkspace
// answer. Linux lacks nothing, so its answers carry no list.
func TestHostLimitationsAreSaid(t *testing.T) {
	missing := []string{"resource limits are not enforced here", "commands cannot be confined here"}
	var log lockedBuffer
	h := start(t, environment.Options{HostLimitations: missing, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	first := log.String()
	for _, m := range missing {
		if n := strings.Count(first, "not available on this system: "+m); n != 1 {
			t.Errorf("the service's first lines say %q %d times, want once:\n%s", m, n, first)
		}
	}
	ctx := testkit.Context(t, 30*time.Second)
	writeFile(t, filepath.Join(h.root, "ws", "x"), "")
	for range 2 {
		resp, err := h.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "ws"})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetHostLimitations(); strings.Join(got, "|") != strings.Join(missing, "|") {
			t.Errorf("host_limitations %q, want %q", got, missing)
		}
	}
	if n := strings.Count(log.String(), "not available on this system"); n != len(missing) {
		t.Errorf("the limitations were logged %d times in all, want once each", n)
	}

	plain := start(t, environment.Options{})
	writeFile(t, filepath.Join(plain.root, "ws", "x"), "")
	resp, err := plain.client.DescribeWorkspace(ctx, &penguinv1.DescribeWorkspaceRequest{Workspace: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.GetHostLimitations(), sandbox.Unavailable(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("host_limitations %q, want this system's %q", got, want)
	}
}
