package environment_test

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/services/environment"
)

// TestScratchIsBounded fills an environment's archives past the scratch
// limit: the oldest archives go first, the newest stays readable, and the
// directory never holds more than the limit.
func TestScratchIsBounded(t *testing.T) {
	const limit = 200 << 10
	h := start(t, environment.Options{ScratchLimit: limit})
	env := h.create(&penguinv1.CreateEnvironmentRequest{Label: "bounded"}).GetEnvironmentId()
	dir := filepath.Join(h.scratch, "bounded", "truncated-tool-output")
	var paths []string
	for i := 0; i < 12; i++ {
		// About 49 KB of output each, so four fit.
		r := h.exec(env, "exec_command", `{"cmd":"seq 1 10000","tty":false}`)
		paths = append(paths, archivePath(t, r))
		var total int64
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			info, _ := e.Info()
			total += info.Size()
		}
		if total > limit {
			t.Fatalf("after %d archives the scratch directory holds %d bytes, over the %d limit", i+1, total, limit)
		}
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= len(paths)-4) {
			t.Fatalf("archive %d of %d kept=%v; want only the four newest", i+1, len(paths), kept)
		}
	}
	wantStop(t, h.exec(env, "read_file", `{"file_path":"`+paths[len(paths)-1]+`","offset":10000}`), ok, "10000\t10000")
	// grep searches the archive directory too (and anchors match at
	// every line).
	wantStop(t, h.exec(env, "grep", `{"pattern":"^9999$","path":"`+dir+`"}`), ok, ":9999:9999")
}

// TestArchiveDirectoryMadeAtFirstTruncation checks that an environment
// makes its archive directory at its first truncated output, not at its
// creation: until then a read there finds nothing, and after it the
// archive is readable.
func TestArchiveDirectoryMadeAtFirstTruncation(t *testing.T) {
	h := start(t, environment.Options{})
	env := h.create(&penguinv1.CreateEnvironmentRequest{Label: "lazy"}).GetEnvironmentId()
	dir := filepath.Join(h.scratch, "lazy", "truncated-tool-output")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the archive directory exists before any output was truncated: %v", err)
	}
	early := filepath.Join(dir, "early.txt")
	wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": early})), failed, early+" does not exist")
	wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": "/etc/hostname"})), failed, "not inside the workspace")
	r := h.exec(env, "exec_command", `{"cmd":"seq 1 10000","tty":false}`)
	wantStop(t, h.exec(env, "read_file", args(map[string]any{"file_path": archivePath(t, r), "offset": 10000})), ok, "10000\t10000")
}

// TestScratchDirectoryMustBePrivate refuses a scratch directory others
// may write to.
func TestScratchDirectoryMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := environment.New(environment.Options{Root: t.TempDir(), ScratchDir: dir})
	if err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("New with a world-writable scratch directory = %v", err)
	}
}

// TestReadImageFetchesFromAnAllowedPrefix reaches a loopback image server
// once the configuration allows its prefix, and only then.
func TestReadImageFetchesFromAnAllowedPrefix(t *testing.T) {
	img := tinyPNG(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(img) })}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	source := args(map[string]any{"source": "http://" + lis.Addr().String() + "/a.png"})

	h := start(t, environment.Options{FetchAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	env := h.create(&penguinv1.CreateEnvironmentRequest{Network: penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY}).GetEnvironmentId()
	r := h.exec(env, "read_image", source)
	wantStop(t, r, ok, "image/png")
	if len(r.out.GetImages()) != 1 {
		t.Fatalf("no image: %s", r.text())
	}
	// Without network, the allowance does not apply.
	noNet, err := h.client.CreateEnvironment(testkit.Context(t, 30e9), &penguinv1.CreateEnvironmentRequest{Workspace: "nonet", NoNetwork: true})
	if err != nil {
		t.Skipf("no_network environments are not possible here: %v", err)
	}
	wantStop(t, h.exec(noNet.GetEnvironmentId(), "read_image", source), failed, "no network access")
}
