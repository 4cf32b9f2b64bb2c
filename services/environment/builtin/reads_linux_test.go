package builtin

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// threadReads returns the read system calls this thread has made
// (syscr of /proc/thread-self/io).
func threadReads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscr in /proc/thread-self/io")
	return 0
}

// TestReadFileReadsTheEndOnce checks that read_file reads a small file in
// two read system calls, its content and then its end, where the code
// before sniffed past the size, read the end, forgot it and read it
// again (three).
func TestReadFileReadsTheEndOnce(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"small.txt": "Hello from the benchmark's workspace.\n", "two.txt": "one\ntwo"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := workspace.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tool := &readFile{d: Deps{Root: root}}
	// The calls and the counts on one thread, which nothing else runs on.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := threadReads(t)
	counting := threadReads(t) - a // what reading the count costs
	for _, name := range []string{"small.txt", "two.txt"} {
		var out strings.Builder
		before := threadReads(t)
		if _, err := tool.Run(context.Background(), `{"file_path":"`+name+`"}`, &out); err != nil {
			t.Fatal(err)
		}
		reads := threadReads(t) - before - counting
		if reads != 2 {
			t.Errorf("read_file of %s made %d read system calls, want 2", name, reads)
		}
		if !strings.Contains(out.String(), "1\t") {
			t.Errorf("read_file of %s said %q", name, out.String())
		}
	}
}
