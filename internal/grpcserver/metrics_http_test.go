package grpcserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

func TestServeMetricsExposesTheGivenRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "penguin_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)

	addr, stop := serveForTest(t, func(ctx context.Context, lis net.Listener) error {
		return grpcserver.ServeMetrics(ctx, lis, reg, nil)
	})
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "penguin_test_things_total 3") {
		t.Errorf("GET /metrics = %d:\n%s", code, body)
	}
	// Only this registry is served: nothing from the global one.
	if strings.Contains(body, "go_goroutines") {
		t.Error("/metrics serves the global registry's Go collector")
	}
	if code, _ := httpGet(t, "http://"+addr+"/other"); code != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", code)
	}
	stop()
}

func TestServeProfiles(t *testing.T) {
	t.Parallel()
	addr, stop := serveForTest(t, func(ctx context.Context, lis net.Listener) error {
		return grpcserver.ServeProfiles(ctx, lis, nil)
	})
	if code, body := httpGet(t, "http://"+addr+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile: total") {
		t.Errorf("GET goroutine profile = %d:\n%.300s", code, body)
	}
	if code, body := httpGet(t, "http://"+addr+"/debug/pprof/heap?gc=1"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("GET heap profile = %d, %d bytes", code, len(body))
	}
	if code, _ := httpGet(t, "http://"+addr+"/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the profiles server = %d, want 404", code)
	}
	stop()
}

// serveForTest runs serve on a loopback listener and returns its address
// and a function that ends serve's context and checks that it returns nil
// promptly.
func serveForTest(t *testing.T, serve func(context.Context, net.Listener) error) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testkit.Context(t, 30*time.Second))
	done := make(chan error, 1)
	go func() { done <- serve(ctx, lis) }()
	return lis.Addr().String(), func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("serving after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("serving did not return after cancel")
		}
	}
}

// httpGet returns the status and body of a GET of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestCheckProfilesAddr: profiles are served on loopback only, since they
// show what the process runs.
func TestCheckProfilesAddr(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:6060", "[::1]:6060", "localhost:6060"} {
		if err := grpcserver.CheckProfilesAddr(addr); err != nil {
			t.Errorf("CheckProfilesAddr(%q) = %v, want nil", addr, err)
		}
	}
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.0.0.5:6060", "example.internal:6060", "6060"} {
		if err := grpcserver.CheckProfilesAddr(addr); err == nil {
			t.Errorf("CheckProfilesAddr(%q) = nil, want a refusal", addr)
		}
	}
}
