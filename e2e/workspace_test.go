package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	"github.com/penguin-agent/penguin/e2e/netns"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// TestWorkspaceUndo runs a scripted turn that changes a workspace with the
// file tools and a command on a real server, then shows its diff, undoes
// it to the exact bytes, refuses an undo over a file edited since, redoes
// it, and does all that again after the server restarted: with the
// server's default sandbox (confined where the host can) and with none.
func TestWorkspaceUndo(t *testing.T) {
	t.Parallel()
	for _, sandbox := range []string{"", "none"} {
		t.Run("sandbox="+sandbox, func(t *testing.T) {
			t.Parallel()
			workspaceUndo(t, sandbox)
		})
	}
}

// workspaceUndo is TestWorkspaceUndo in one sandbox mode ("" for the
// server's default).
func workspaceUndo(t *testing.T, sandbox string) {
	ctx := testkit.Context(t, 4*time.Minute)
	mock := startMock(t, "workspace", filepath.Join("testdata", "workspace.yaml"))
	providers := writeProviders(t, route{"scripted", mock})
	root, home, state := t.TempDir(), t.TempDir(), t.TempDir()
	// The same home (scratch area, where checkpoints are) and the same
	// store, for the server after its restart.
	env := []string{"MOCK_API_KEY=unused", "PENGUIN_HOME=" + state, "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	serve := func() (*netns.Proc, string) {
		srv := start(t, "penguin serve", env, "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--providers", providers, "--root", root)
		return srv, grpcAddr(srv, "penguin")
	}
	srv, addr := serve()

	ws := filepath.Join(root, "ws")
	files := map[string]string{"keep.txt": "v1\n", "old.txt": "old\n", ".gitignore": "ignored/\n"}
	for name, content := range files {
		writeFile(t, filepath.Join(ws, name), content)
	}
	args := []string{"run", "--engine", addr, "--provider", "scripted", "--model", "m", "--workspace", ws, "--approval", "allow-all"}
	if sandbox != "" {
		args = append(args, "--sandbox", sandbox)
	}
	run := start(t, "penguin run", nil, append(args, "change some files")...)
	if code := run.Wait(90 * time.Second); code != 0 {
		t.Fatalf("penguin run exited %d:\n%s", code, run.Output())
	}
	out := run.Output()
	if !strings.Contains(out, "✎ 4 file(s) changed") {
		t.Errorf("the run does not show the turn's change:\n%s", out)
	}
	id := sessionIDFrom(t, out)
	engine := e2etest.DialEngine(t, addr, "")
	after := map[string]string{"keep.txt": "v2\n", "old.txt": "<missing>", "new.txt": "written by a tool\n", "cmd.txt": "made by a command\n", "ignored/x": "x\n"}
	expect(t, ws, after)

	list, err := engine.ListWorkspaceChanges(ctx, &penguinv1.ListWorkspaceChangesRequest{SessionId: id})
	if err != nil || len(list.GetChanges()) != 1 {
		t.Fatalf("changes: %v, %v", list, err)
	}
	change := list.GetChanges()[0]
	var got []string
	for _, f := range change.GetChange().GetFiles() {
		got = append(got, changeMark(f)+f.GetPath())
	}
	if strings.Join(got, " ") != "Acmd.txt Mkeep.txt Anew.txt Dold.txt" || change.GetPrompt() != "change some files" {
		t.Fatalf("the turn's change = %v (prompt %q); want cmd.txt, keep.txt, new.txt, old.txt and not the ignored file", got, change.GetPrompt())
	}

	// The CLI's diff and undo.
	diff := start(t, "penguin sessions diff", nil, "sessions", "--engine", addr, "diff", id)
	if code := diff.Wait(30 * time.Second); code != 0 || !strings.Contains(diff.Stdout(), "-v1\n+v2") || !strings.Contains(diff.Stdout(), "+made by a command") {
		t.Fatalf("penguin sessions diff exited %d:\n%s", code, diff.Output())
	}
	undo := start(t, "penguin sessions undo", nil, "sessions", "--engine", addr, "undo", id)
	if code := undo.Wait(30 * time.Second); code != 0 || !strings.Contains(undo.Stdout(), "undid change") {
		t.Fatalf("penguin sessions undo exited %d:\n%s", code, undo.Output())
	}
	before := map[string]string{"keep.txt": "v1\n", "old.txt": "old\n", "new.txt": "<missing>", "cmd.txt": "<missing>", "ignored/x": "x\n"}
	expect(t, ws, before)

	// The model hears of it: the log has the undo and a note naming the files.
	var undone, note bool
	for _, ev := range e2etest.History(ctx, t, engine, id) {
		m := ev.GetMessage()
		if c := m.GetWorkspaceChange(); c.GetKind() == penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO && c.GetTurnSequence() == change.GetSequence() {
			undone = true
		}
		if x := m.GetText(); x.GetSender() == penguinv1.Sender_SENDER_HARNESS && strings.Contains(x.GetText(), "keep.txt") {
			note = true
		}
	}
	if !undone || !note {
		t.Fatalf("the log lacks the undo (%v) or the note to the model (%v)", undone, note)
	}

	// Redo, then an edit by the user, which an undo refuses to overwrite.
	if _, err := engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: id, Redo: true}); err != nil {
		t.Fatal(err)
	}
	expect(t, ws, after)
	writeFile(t, filepath.Join(ws, "keep.txt"), "mine\n")

	// After a restart, the change is still there to undo.
	srv.Stop(30 * time.Second)
	_, addr = serve()
	engine = e2etest.DialEngine(t, addr, "")
	_, err = engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: id})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "keep.txt") {
		t.Fatalf("undo over an edited file: %v; want FAILED_PRECONDITION naming keep.txt", err)
	}
	expect(t, ws, map[string]string{"keep.txt": "mine\n", "new.txt": "written by a tool\n", "cmd.txt": "made by a command\n"})
	forced, err := engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: id, Force: true})
	if err != nil || strings.Join(forced.GetOverwritten(), ",") != "keep.txt" {
		t.Fatalf("forced undo: %v, %v", forced, err)
	}
	expect(t, ws, before)
	// The forced undo is a change of its own: what it overwrote is kept.
	if _, err := engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: id, Redo: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	expect(t, ws, after)
}

// TestWorkspaceUndoCollected keeps two checkpoints per workspace
// (--checkpoint-keep 2), lets a later turn's checkpoint collect the first
// turn's start, and checks that undoing the first turn then fails over
// gRPC with FAILED_PRECONDITION and a message that names the change and
// says why, in the API and in `penguin sessions undo`, changing nothing.
func TestWorkspaceUndoCollected(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 3*time.Minute)
	mock := startMock(t, "workspace", filepath.Join("testdata", "workspace.yaml"))
	providers := writeProviders(t, route{"scripted", mock})
	root, home := t.TempDir(), t.TempDir()
	env := []string{"MOCK_API_KEY=unused", "PENGUIN_HOME=" + t.TempDir(), "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	srv := start(t, "penguin serve", env, "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--providers", providers, "--root", root, "--checkpoint-keep", "2")
	addr := grpcAddr(srv, "penguin")
	ws := filepath.Join(root, "ws")
	for name, content := range map[string]string{"keep.txt": "v1\n", "old.txt": "old\n"} {
		writeFile(t, filepath.Join(ws, name), content)
	}
	run := func(prompt string) string {
		t.Helper()
		p := start(t, "penguin run", nil, "run", "--engine", addr, "--provider", "scripted", "--model", "m", "--workspace", ws, "--approval", "allow-all", "--sandbox", "none", prompt)
		if code := p.Wait(90 * time.Second); code != 0 {
			t.Fatalf("penguin run exited %d:\n%s", code, p.Output())
		}
		return sessionIDFrom(t, p.Output())
	}
	first := run("change some files")
	// An edit of the user's between the turns makes the second turn's
	// start a third checkpoint, which collects the first turn's start.
	writeFile(t, filepath.Join(ws, "mine.txt"), "the user's\n")
	run("nothing to change")
	now := map[string]string{"keep.txt": "v2\n", "old.txt": "<missing>", "new.txt": "written by a tool\n", "mine.txt": "the user's\n"}
	expect(t, ws, now)

	engine := e2etest.DialEngine(t, addr, "")
	list, err := engine.ListWorkspaceChanges(ctx, &penguinv1.ListWorkspaceChangesRequest{SessionId: first})
	if err != nil || len(list.GetChanges()) != 1 {
		t.Fatalf("changes: %v, %v", list, err)
	}
	seq := list.GetChanges()[0].GetSequence()
	_, err = engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: first})
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(msg, fmt.Sprintf("undo change #%d: its checkpoint was collected (this service keeps a workspace's last 2 checkpoints", seq)) || !strings.Contains(msg, "undo and redo are no longer possible") {
		t.Fatalf("undo of a collected change: %v; want FAILED_PRECONDITION saying change #%d's checkpoint was collected", err, seq)
	}
	expect(t, ws, now)
	undo := start(t, "penguin sessions undo", nil, "sessions", "--engine", addr, "undo", first)
	if code := undo.Wait(30 * time.Second); code == 0 || !strings.Contains(undo.Output(), "its checkpoint was collected") || strings.Contains(undo.Output(), "rpc error") {
		t.Fatalf("penguin sessions undo of a collected change exited %d:\n%s", code, undo.Output())
	}
}

// TestWorkspaceLargeChange runs a turn whose command creates 5,000 files:
// the list of changes carries the first 100 with the count, the diff
// pages through all of them in path order, and `penguin sessions diff`
// lists them all.
func TestWorkspaceLargeChange(t *testing.T) {
	t.Parallel()
	const count = 5000
	ctx := testkit.Context(t, 3*time.Minute)
	mock := startMock(t, "workspace-many", filepath.Join("testdata", "workspace-many.yaml"))
	providers := writeProviders(t, route{"scripted", mock})
	root, home := t.TempDir(), t.TempDir()
	env := []string{"MOCK_API_KEY=unused", "PENGUIN_HOME=" + t.TempDir(), "HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, ".cache")}
	srv := start(t, "penguin serve", env, "serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--providers", providers, "--root", root)
	addr := grpcAddr(srv, "penguin")
	ws := filepath.Join(root, "ws")
	writeFile(t, filepath.Join(ws, "README"), "a workspace\n")
	run := start(t, "penguin run", nil, "run", "--engine", addr, "--provider", "scripted", "--model", "m", "--workspace", ws, "--approval", "allow-all", "--sandbox", "none", "make many files")
	if code := run.Wait(90 * time.Second); code != 0 {
		t.Fatalf("penguin run exited %d:\n%s", code, run.Output())
	}
	id := sessionIDFrom(t, run.Output())
	engine := e2etest.DialEngine(t, addr, "")
	list, err := engine.ListWorkspaceChanges(ctx, &penguinv1.ListWorkspaceChangesRequest{SessionId: id})
	if err != nil || len(list.GetChanges()) != 1 {
		t.Fatalf("changes: %v, %v", list, err)
	}
	c := list.GetChanges()[0]
	if n := len(c.GetChange().GetFiles()); n != 100 || c.GetFileCount() != count {
		t.Fatalf("the list carries %d files of a change counted %d; want 100 of %d", n, c.GetFileCount(), count)
	}
	var paths []string
	token := ""
	for page := 0; ; page++ {
		if page > count/1000 {
			t.Fatalf("more than %d pages of 1000 for %d files", page, count)
		}
		resp, err := engine.GetWorkspaceDiff(ctx, &penguinv1.GetWorkspaceDiffRequest{SessionId: id, Sequence: c.GetSequence(), PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		files := resp.GetChange().GetChange().GetFiles()
		if len(files) > 1000 || resp.GetChange().GetFileCount() != count {
			t.Fatalf("page %d: %d files, count %d", page, len(files), resp.GetChange().GetFileCount())
		}
		for _, f := range files {
			paths = append(paths, changeMark(f)+f.GetPath())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if len(paths) != count || paths[0] != "Amany/f00001.txt" || paths[count-1] != fmt.Sprintf("Amany/f%05d.txt", count) {
		t.Fatalf("the pages hold %d files, from %v to %v; want %d, f00001 to f%05d", len(paths), paths[:1], paths[len(paths)-1:], count, count)
	}
	for i := 1; i < len(paths); i++ {
		if paths[i] <= paths[i-1] {
			t.Fatalf("pages out of order or repeating at %d: %s after %s", i, paths[i], paths[i-1])
		}
	}
	if _, err := engine.GetWorkspaceDiff(ctx, &penguinv1.GetWorkspaceDiffRequest{SessionId: id, Sequence: c.GetSequence(), PageToken: "not-a-token"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a made-up page token: %v, want INVALID_ARGUMENT", err)
	}
	diff := start(t, "penguin sessions diff", nil, "sessions", "--engine", addr, "diff", id)
	if code := diff.Wait(60 * time.Second); code != 0 || strings.Count(diff.Stdout(), "\n  A many/f") != count {
		t.Fatalf("penguin sessions diff exited %d with %d files listed, want %d", code, strings.Count(diff.Stdout(), "\n  A many/f"), count)
	}
}

func changeMark(f *penguinv1.FileChange) string {
	switch f.GetKind() {
	case penguinv1.FileChangeKind_FILE_CHANGE_KIND_ADDED:
		return "A"
	case penguinv1.FileChangeKind_FILE_CHANGE_KIND_DELETED:
		return "D"
	}
	return "M"
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expect checks the workspace's files, "<missing>" for one that must not
// exist.
func expect(t *testing.T, ws string, want map[string]string) {
	t.Helper()
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(ws, name))
		got := string(b)
		if os.IsNotExist(err) {
			got = "<missing>"
		} else if err != nil {
			t.Fatal(err)
		}
		if got != content {
			t.Errorf("%s = %q, want %q", name, got, content)
		}
	}
}
