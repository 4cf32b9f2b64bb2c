package environment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unsafe"

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

// TestCommandEnvSharesBase checks that an environment's env holds the
// server's own "NAME=value" strings rather than a copy of each: it is
// kept for the environment's whole life, which goes on after its
// session's task for the environment idle timeout.
func TestCommandEnvSharesBase(t *testing.T) {
	base := make([]string, 200)
	for i := range base {
		base[i] = fmt.Sprintf("VAR_%03d=%s", i, strings.Repeat("v", 20))
	}
	vault := map[string]string{"TOKEN": "secret"}
	extra := map[string]string{"TMPDIR": "/tmp/x", "VAR_007": "set by the sandbox"}
	env, fixed := CommandEnv(base, vault, extra)
	if !slices.IsSorted(env) || len(env) != len(base)+len(vault)+len(extra)-1+len(forcedEnv) {
		t.Fatalf("env: %d entries, sorted %v", len(env), slices.IsSorted(env))
	}
	if !slices.Contains(env, "VAR_007=set by the sandbox") || !slices.Contains(fixed, "TOKEN=secret") || !slices.Contains(fixed, "TERM=dumb") {
		t.Fatalf("the overrides are missing: env %v, fixed %v", env, fixed)
	}
	// Each kept entry is base's string itself.
	i := slices.Index(env, base[100])
	if i < 0 || unsafe.StringData(env[i]) != unsafe.StringData(base[100]) {
		t.Fatalf("env holds a copy of %q", base[100])
	}
	// So building it allocates for the overrides and the containers, not
	// for every variable of the server's environment.
	allocs := testing.AllocsPerRun(20, func() { CommandEnv(base, vault, extra) })
	if allocs >= float64(len(base))/2 {
		t.Fatalf("CommandEnv allocates %.0f times for %d variables", allocs, len(base))
	}
}
