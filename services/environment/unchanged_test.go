package environment_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// checkpointOf checkpoints the workspace ws, following the checkpoint
// since ("" for none), and returns the id.
func (h *harness) checkpointOf(ws, since string) string {
	h.t.Helper()
	resp, err := h.client.CheckpointWorkspace(testkit.Context(h.t, 60*time.Second), &penguinv1.CheckpointWorkspaceRequest{Workspace: ws, Since: since})
	if err != nil {
		h.t.Fatalf("CheckpointWorkspace: %v", err)
	}
	return resp.GetCheckpoint()
}

// A checkpoint that follows the last one, after only reading tools, is
// that one, without a walk: a change made behind the service's back
// meanwhile (here, by the test) is not seen by it, but by a checkpoint
// that follows none (a turn's start), and by one after a tool that may
// write.
func TestCheckpointAfterReadsIsTheLast(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	// Made before the first checkpoint: making a workspace writes.
	other := h.create(&penguinv1.CreateEnvironmentRequest{}).GetEnvironmentId()
	file := filepath.Join(ws, "a.txt")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := h.checkpointOf(ws, "")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"a.txt"}`), ok, "one")
	wantStop(t, h.exec(env, "glob", `{"pattern":"*.txt"}`), ok, "a.txt")
	wantStop(t, h.exec(env, "grep", `{"pattern":"one"}`), ok, "a.txt")
	if err := os.WriteFile(file, []byte("one, and two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := h.checkpointOf(ws, before); after != before {
		t.Fatalf("after reading tools only, the checkpoint is %s, want the last one %s (taken again, not reused)", after, before)
	}
	start := h.checkpointOf(ws, "")
	if start == before {
		t.Fatal("a checkpoint that follows none was the last one: the workspace was not walked")
	}
	if h.checkpointOf(ws, before) == before {
		t.Fatal("a checkpoint that follows one that is no longer the last was that one")
	}
	// Another environment's tool that may write, even one that fails,
	// ends the reuse.
	if err := os.WriteFile(file, []byte("three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStop(t, h.exec(other, "edit_file", `{"file_path":"missing.txt","old_string":"x","new_string":"y"}`), failed)
	if h.checkpointOf(ws, start) == start {
		t.Fatal("after another environment's edit_file, the checkpoint was the last one: the workspace was not walked")
	}
}

// Every way the service has of writing to a workspace is seen by the next
// checkpoint: a checkpoint taken again is not the last one when any of
// them ran since.
func TestCheckpointSeesEveryWrite(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, h *harness, env, ws string)
	}{
		{"write_file", func(t *testing.T, h *harness, env, _ string) {
			wantStop(t, h.exec(env, "write_file", `{"file_path":"b.txt","content":"new\n"}`), ok)
		}},
		{"edit_file", func(t *testing.T, h *harness, env, _ string) {
			wantStop(t, h.exec(env, "edit_file", `{"file_path":"a.txt","old_string":"one","new_string":"uno"}`), ok)
		}},
		{"exec_command", func(t *testing.T, h *harness, env, _ string) {
			wantStop(t, h.exec(env, "exec_command", `{"cmd":"echo new > b.txt"}`), ok)
		}},
		{"a background command, after its call", func(t *testing.T, h *harness, env, ws string) {
			wantStop(t, h.exec(env, "exec_command", `{"cmd":"while [ ! -e go ]; do sleep 0.05; done; echo new > b.txt","run_in_background":true}`), ok)
			// A checkpoint between the call and the command's write does
			// not stand for the workspace after it.
			mid := h.checkpointOf(ws, "")
			if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "the background command's file", func() bool {
				_, err := os.Stat(filepath.Join(ws, "b.txt"))
				return err == nil
			})
			if after := h.checkpointOf(ws, mid); after == mid {
				t.Fatal("the checkpoint after the background command's write is the one before it: the write was missed")
			}
		}},
		{"a custom tool", func(t *testing.T, h *harness, _, ws string) {
			env := h.create(&penguinv1.CreateEnvironmentRequest{
				Workspace: ws,
				Tools:     &penguinv1.ToolConfig{Custom: []*penguinv1.ToolSpec{{Name: "scribble", Command: "echo new > b.txt", Permission: penguinv1.Permission_PERMISSION_R}}},
			}).GetEnvironmentId()
			wantStop(t, h.exec(env, "scribble", `{}`), ok)
		}},
		{"a builtin declared read-only", func(t *testing.T, h *harness, _, ws string) {
			env := h.create(&penguinv1.CreateEnvironmentRequest{
				Workspace: ws,
				Tools:     &penguinv1.ToolConfig{Builtin: []*penguinv1.ToolSpec{{Name: "write_file", Permission: penguinv1.Permission_PERMISSION_R}}},
			}).GetEnvironmentId()
			wantStop(t, h.exec(env, "write_file", `{"file_path":"b.txt","content":"new\n"}`), ok)
		}},
		{"an environment made inside the workspace", func(t *testing.T, h *harness, _, ws string) {
			h.create(&penguinv1.CreateEnvironmentRequest{Workspace: filepath.Join(ws, "sub", "dir")})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t, environment.Options{})
			resp := h.create(&penguinv1.CreateEnvironmentRequest{})
			env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
			if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := h.checkpointOf(ws, "")
			if again := h.checkpointOf(ws, before); again != before {
				t.Fatalf("an untouched workspace's checkpoints differ: %s, %s", before, again)
			}
			c.write(t, h, env, ws)
			after := h.checkpointOf(ws, before)
			if after == before {
				t.Fatal("the checkpoint after the write is the one before it: the write was missed")
			}
			diff, err := h.client.DiffCheckpoints(testkit.Context(t, 60*time.Second), &penguinv1.DiffCheckpointsRequest{Workspace: ws, From: before, To: after})
			if err != nil {
				t.Fatal(err)
			}
			if len(diff.GetFiles()) == 0 && c.name != "an environment made inside the workspace" {
				t.Fatalf("the checkpoints differ but list no file changed")
			}
		})
	}
}

// A restore writes to the workspace: the checkpoint after it is the
// restored one, not the last one taken before it.
func TestCheckpointAfterRestore(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := h.checkpointOf(ws, "")
	wantStop(t, h.exec(env, "write_file", `{"file_path":"a.txt","content":"two, longer\n"}`), ok)
	second := h.checkpointOf(ws, first)
	if second == first {
		t.Fatal("the write was missed")
	}
	if _, err := h.client.RestoreCheckpoint(testkit.Context(t, 60*time.Second), &penguinv1.RestoreCheckpointRequest{Workspace: ws, From: second, To: first}); err != nil {
		t.Fatal(err)
	}
	got := h.checkpointOf(ws, second)
	if got == second {
		t.Fatal("the checkpoint after the restore is the last one before it: the restore was missed")
	}
	diff, err := h.client.DiffCheckpoints(testkit.Context(t, 60*time.Second), &penguinv1.DiffCheckpointsRequest{Workspace: ws, From: first, To: got})
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.GetFiles()) != 0 {
		t.Fatalf("after restoring the first checkpoint the workspace differs from it: %v", diff.GetFiles())
	}
}

// A turn's start checkpoint records every change made from outside the
// service since the last checkpoint, with nothing of the service's
// running in between (no tool call, no command, no restore): the start
// is never the last checkpoint again (see docs/decisions.md). Each change
// is one that a walk made cheaper could miss: a file rewritten in place
// at the same size (no directory changes), a file in a directory below,
// an ignore file added (read only where a listing names one), a file
// removed.
func TestStartCheckpointSeesOutsideEdits(t *testing.T) {
	h := start(t, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\n")
	write("sub/deeper/b.txt", "two\n")
	write("c.log", "three\n")
	last := h.checkpointOf(ws, "")
	wantStop(t, h.exec(env, "read_file", `{"file_path":"a.txt"}`), ok, "one")
	if end := h.checkpointOf(ws, last); end != last {
		t.Fatalf("a turn that only read ended on %s, want its start %s", end, last)
	}
	edits := []struct {
		name, path string
		edit       func()
	}{
		{"a file rewritten in place at the same size", "a.txt", func() {
			f, err := os.OpenFile(filepath.Join(ws, "a.txt"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("uno\n"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file in a directory below", "sub/deeper/b.txt", func() { write("sub/deeper/b.txt", "dos\n") }},
		{"a file added below", "sub/new.txt", func() { write("sub/new.txt", "new\n") }},
		{"an ignore file that hides a file", "c.log", func() { write(".gitignore", "*.log\n") }},
		{"a file removed", "sub/deeper/b.txt", func() {
			if err := os.Remove(filepath.Join(ws, "sub", "deeper", "b.txt")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, e := range edits {
		e.edit()
		next := h.checkpointOf(ws, "")
		if next == last {
			t.Fatalf("%s: the next turn's start is the last checkpoint; the edit was missed", e.name)
		}
		diff, err := h.client.DiffCheckpoints(testkit.Context(t, 60*time.Second), &penguinv1.DiffCheckpointsRequest{Workspace: ws, From: last, To: next})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range diff.GetFiles() {
			found = found || f.GetPath() == e.path
		}
		if !found {
			t.Fatalf("%s: the checkpoints' difference %v does not name %s", e.name, diff.GetFiles(), e.path)
		}
		last = next
	}
}
