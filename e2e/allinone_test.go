package e2e

import (
	"path/filepath"
	"testing"
	"time"
)

// allInOne is one `penguin serve` process that the subtests of
// TestAllInOne share, each with its own scripted model behind its own
// provider route, so they can run side by side.
type allInOne struct {
	grpcAddr string
	httpAddr string
	root     string
}

// TestAllInOne starts the emulators and one all-in-one server, then drives
// it with the CLI, grpcurl, a Node.js client and the HTTP/SSE gateway
// (tasks over SSE, the schedule routes, and enum numbers no contract
// declares).
func TestAllInOne(t *testing.T) {
	t.Parallel()
	scripts := map[string]string{
		"coding":    demoScript(),
		"grpcurl":   filepath.Join("testdata", "grpcurl.yaml"),
		"node":      filepath.Join("testdata", "node.yaml"),
		"sse":       filepath.Join("testdata", "sse.yaml"),
		"schedules": filepath.Join("testdata", "schedules-http.yaml"),
	}
	var routes []route
	for _, name := range []string{"coding", "grpcurl", "node", "sse", "schedules"} {
		routes = append(routes, route{name, startMock(t, name, scripts[name])})
	}
	providers := writeProviders(t, routes...)
	root := t.TempDir()
	srv := start(t, "penguin serve", []string{"MOCK_API_KEY=unused", "PENGUIN_HOME=" + t.TempDir()},
		"serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--providers", providers,
		"--root", root, "--sse-heartbeat", "200ms")
	s := &allInOne{
		grpcAddr: grpcAddr(srv, "penguin"),
		httpAddr: srv.WaitLog("HTTP gateway listening", nil, "addr", time.Minute),
		root:     root,
	}

	t.Run("coding", func(t *testing.T) {
		t.Parallel()
		codingTask(t, s.grpcAddr, "coding", s.root)
	})
	t.Run("grpcurl", func(t *testing.T) {
		t.Parallel()
		grpcurlSession(t, s)
	})
	t.Run("node", func(t *testing.T) {
		t.Parallel()
		nodeClient(t, s)
	})
	t.Run("sse", func(t *testing.T) {
		t.Parallel()
		sseResume(t, s)
	})
	t.Run("schedules", func(t *testing.T) {
		t.Parallel()
		schedulesHTTP(t, s)
	})
	t.Run("enums", func(t *testing.T) {
		t.Parallel()
		gatewayEnums(t, s)
	})
}
