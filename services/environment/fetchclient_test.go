package environment

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/penguin-agent/penguin/services/environment/egress"
)

// TestFetchClientsShared checks that read_image's HTTP client is made
// once per network setting, not once per environment: every environment
// is kept for the environment idle timeout after its session's task, and
// a client each (transport, dialer, closures) was the largest part of an
// idle session's environment that the session does not use.
func TestFetchClientsShared(t *testing.T) {
	s, err := New(Options{Root: t.TempDir(), ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	seen := map[*http.Client]bool{}
	for range 100 {
		seen[s.fetchClient(false)] = true
		seen[s.fetchClient(true)] = true
	}
	if len(seen) != 2 {
		t.Fatalf("%d fetch clients over 100 asks for each network setting, want 2", len(seen))
	}
	// The one without network refuses before dialing.
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://192.0.2.1/x.png", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.fetchClient(true).Do(req); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("a fetch without network: %v, want a refusal", err)
	}
}
