package environment_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// BenchmarkReadFile compares read_file of a 200-line file three
// directories deep, through gRPC to its final output, with reading the
// same file with os.ReadFile in the same iteration: the added time is what
// the service costs, path confinement included. The metrics are the p50s,
// their ratio and the added time.
func BenchmarkReadFile(b *testing.B) {
	h := start(b, environment.Options{})
	resp := h.create(&penguinv1.CreateEnvironmentRequest{})
	env, ws := resp.GetEnvironmentId(), resp.GetWorkspace()
	path := filepath.Join(ws, "a", "b", "c", "file.go")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	var content strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&content, "line %d of a source file, long enough to be typical\n", i)
	}
	if err := os.WriteFile(path, []byte(content.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := testkit.Context(b, 10*time.Minute)
	direct := func() time.Duration {
		t0 := time.Now()
		data, err := os.ReadFile(path)
		if err != nil || len(data) != content.Len() {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	viaService := func() time.Duration {
		t0 := time.Now()
		r, err := h.tryExec(ctx, env, "read_file", `{"file_path":"a/b/c/file.go"}`)
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(r.text(), "   200\tline 199") {
			b.Fatalf("output %q", r.text())
		}
		return time.Since(t0)
	}
	compareP50(b, direct, viaService, nil)
}
