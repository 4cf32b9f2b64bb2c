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
)

func TestServeMetricsExposesTheGivenRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "penguin_test_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() { done <- grpcserver.ServeMetrics(ctx, lis, reg, nil) }()

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + lis.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "penguin_test_things_total 3") {
		t.Errorf("GET /metrics = %d:\n%s", resp.StatusCode, body)
	}
	// Only this registry is served: nothing from the global one.
	if strings.Contains(string(body), "go_goroutines") {
		t.Error("/metrics serves the global registry's Go collector")
	}

	resp, err = client.Get("http://" + lis.Addr().String() + "/other")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMetrics after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeMetrics did not return after cancel")
	}
}
