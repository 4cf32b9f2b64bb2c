package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/fakeengine"
)

// exportEngine answers ExportTrace with lines in two contexts, failing
// after failAfter lines when it is positive.
func exportEngine(t *testing.T, failAfter int) penguinv1.EngineServiceClient {
	lines := []*penguinv1.ExportTraceResponse{
		{Line: `{"type":"session_meta","n":1}`, ContextIndex: 1},
		{Line: `{"type":"event_msg","n":2}`, ContextIndex: 1},
		{Line: `{"type":"session_meta","n":3}`, ContextIndex: 2},
		{Line: `{"type":"model_msg","n":4}`, ContextIndex: 2},
	}
	return fakeengine.Start(t, &fakeengine.Engine{ExportTraceFunc: func(r *penguinv1.ExportTraceRequest, s grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error {
		if r.GetSessionId() != "session-a" || r.GetContextIndex() != 0 {
			return status.Errorf(codes.NotFound, "no session %q", r.GetSessionId())
		}
		for i, l := range lines {
			if failAfter > 0 && i == failAfter {
				return status.Error(codes.Unavailable, "the store went away")
			}
			if err := s.Send(l); err != nil {
				return err
			}
		}
		return nil
	}})
}

// entries lists a directory's names, hidden temporaries included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

func TestExportWritesOneFilePerContext(t *testing.T) {
	t.Parallel()
	engine := exportEngine(t, 0)
	dir := t.TempDir()
	var out bytes.Buffer
	if err := cli.Sessions(testkit.Context(t, 10*time.Second), engine, []string{"export", "session-a", dir}, &out, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"session-a_001.jsonl": "{\"type\":\"session_meta\",\"n\":1}\n{\"type\":\"event_msg\",\"n\":2}\n",
		"session-a_002.jsonl": "{\"type\":\"session_meta\",\"n\":3}\n{\"type\":\"model_msg\",\"n\":4}\n",
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"session-a_001.jsonl", "session-a_002.jsonl"}) {
		t.Fatalf("directory holds %v", got)
	}
	for name, content := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != content {
			t.Fatalf("%s = %q, %v; want %q", name, b, err, content)
		}
	}
	if got := strings.Fields(out.String()); !slices.Equal(got, []string{filepath.Join(dir, "session-a_001.jsonl"), filepath.Join(dir, "session-a_002.jsonl")}) {
		t.Fatalf("printed %q, want the two paths", out.String())
	}

	// Exporting again never overwrites: it names the file and leaves it.
	if err := os.WriteFile(filepath.Join(dir, "session-a_001.jsonl"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := cli.Sessions(testkit.Context(t, 10*time.Second), engine, []string{"export", "session-a", dir}, &out, false)
	if err == nil || !strings.Contains(err.Error(), "session-a_001.jsonl exists already") {
		t.Fatalf("second export: %v, want a refusal naming the file", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "session-a_001.jsonl")); string(b) != "kept\n" {
		t.Fatalf("the existing file was changed to %q", b)
	}
	if got := entries(t, dir); len(got) != 2 {
		t.Fatalf("directory holds %v after a refused export", got)
	}
}

// A stream that breaks mid-way keeps the contexts written in full and
// leaves nothing of the one cut off.
func TestExportCutShortLeavesNoPartialFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	err := cli.Sessions(testkit.Context(t, 10*time.Second), exportEngine(t, 3), []string{"export", "session-a", dir}, &out, false)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("export: %v, want the stream's failure", err)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"session-a_001.jsonl"}) {
		t.Fatalf("directory holds %v, want only the complete first context", got)
	}
}

func TestExportRefusesBadArguments(t *testing.T) {
	t.Parallel()
	engine := exportEngine(t, 0)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export"}, "usage: penguin sessions export ID [DIR]"},
		{[]string{"export", "a", "b", "c"}, "usage: penguin sessions export ID [DIR]"},
		{[]string{"export", "../escape", dir}, "is not a session id"},
		{[]string{"export", "session-unknown", dir}, "no session"},
		{[]string{"export", "session-a", filepath.Join(dir, "missing")}, "no such file or directory"},
	} {
		var out bytes.Buffer
		err := cli.Sessions(testkit.Context(t, 10*time.Second), engine, c.args, &out, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("refused exports left %v", got)
	}
}
