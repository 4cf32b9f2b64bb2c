//go:build unix

package llm_test

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/llm"
)

// TestReloadOnSIGHUP checks that SIGHUP reloads the routes: the
// environment changed (a key variable appeared), which no file change
// would show.
func TestReloadOnSIGHUP(t *testing.T) {
	// Catch SIGHUP in this process for the whole test, so that a signal
	// sent before Watch registers cannot end the test binary.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(guard) })

	var mu sync.Mutex
	env := map[string]string{}
	lookup := func(k string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := env[k]
		return v, ok
	}
	svc, err := llm.Setup(llm.Config{ProvidersFile: filepath.Join(t.TempDir(), "none.yaml"), Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); svc.Watch(ctx, time.Hour) }()
	t.Cleanup(func() { cancel(); <-done })
	mu.Lock()
	env["MISTRAL_API_KEY"] = "m"
	mu.Unlock()
	eventually.Within(t, 10*time.Second, "SIGHUP reloads the routes", func() bool {
		_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
		ps, _ := svc.ListProviders(t.Context(), &penguinv1.ListProvidersRequest{})
		return len(ps.GetProviders()) == 1 && ps.GetProviders()[0].GetName() == "mistral"
	})
}
