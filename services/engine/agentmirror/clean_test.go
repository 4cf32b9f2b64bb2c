package agentmirror

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// TestCleanCopy checks that a working copy left unchanged by a Sync is
// remembered (its files are not read again at the next one), and that an
// edit of the copy (right before a Sync, or settled, in place and of the
// same size) still reaches the store, and an edit through the store still
// reaches the copy.
func TestCleanCopy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("directory stamps are trusted on Linux only")
	}
	ctx := t.Context()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	st := s.(store.AgentStore)
	if _, err := st.CreateAgent(ctx, DefaultProject, "a", []store.AgentFile{
		{Path: "system_config.yaml", Data: []byte("max_turns: 3\n")},
		{Path: "memory/user/MEMORY.md", Data: []byte("- one\n")},
	}); err != nil {
		t.Fatal(err)
	}
	m, err := New(st, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	settle := func() { time.Sleep(50 * time.Millisecond) }
	sync := func() string {
		t.Helper()
		dir, err := m.Sync(ctx, DefaultProject, "a")
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	stored := func(path string) string {
		t.Helper()
		_, files, err := st.ReadAgent(ctx, DefaultProject, "a")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Path == path {
				return string(f.Data)
			}
		}
		return ""
	}
	overwrite := func(path, data string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(data), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	dir := sync()
	settle()
	sync()
	if _, ok := m.clean[copyKey(DefaultProject, "a")]; !ok {
		t.Fatal("a copy a Sync left as it was is not remembered: every Sync reads it again")
	}
	memory := filepath.Join(dir, "memory", "user", "MEMORY.md")
	overwrite(memory, "- two\n")
	sync()
	if got := stored("memory/user/MEMORY.md"); got != "- two\n" {
		t.Errorf("an edit right before a Sync: the store holds %q", got)
	}
	settle()
	sync()
	overwrite(memory, "- six\n")
	settle()
	sync()
	if got := stored("memory/user/MEMORY.md"); got != "- six\n" {
		t.Errorf("a settled edit: the store holds %q", got)
	}
	settle()
	sync()
	_, files, err := st.ReadAgent(ctx, DefaultProject, "a")
	if err != nil {
		t.Fatal(err)
	}
	var version int64
	for _, f := range files {
		if f.Path == "system_config.yaml" {
			version = f.Version
		}
	}
	if _, err := st.ChangeAgent(ctx, DefaultProject, "a", []store.AgentChange{{Path: "system_config.yaml", Data: []byte("max_turns: 7\n"), IfVersion: version}}); err != nil {
		t.Fatal(err)
	}
	sync()
	if data, _ := os.ReadFile(filepath.Join(dir, "system_config.yaml")); string(data) != "max_turns: 7\n" {
		t.Errorf("an edit through the store: the copy holds %q", data)
	}
}
